// sroced configuration: the TOML file (/etc/sroce/sroced.toml by default),
// then `--set key=value` and the dedicated command-line overrides on top.
//
// Every key is documented in packaging/sroced.toml and docs/sroced.md. Every
// value is validated when loaded; an error names the key, says what was
// expected and what was found, so the daemon never starts half-configured.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sroce/engine/result.h"

namespace sroce {
struct EngineConfig;
}

namespace sroce::daemon {

inline constexpr const char* kDefaultConfigPath = "/etc/sroce/sroced.toml";

struct Config {
  struct Device {
    std::string name = "sroce0";  // the RDMA device name applications see
    std::string netdev;           // interface whose addresses are the GIDs; "" = auto
    std::vector<std::string> addresses;  // explicit IPv4 GIDs; [] = the netdev's addresses
    bool ipv6 = true;  // the netdev's IPv6 addresses (not link-local) as GIDs after the IPv4 ones
    // The kernel path (docs/kmod.md): "auto" serves rdma_sroce.ko's device
    // `name` when /dev/sroce and the device exist, "on" requires it, "off"
    // serves the socket only. Command line: --kernel (on) / --no-kernel (off).
    std::string kernel = "auto";
  } device;

  struct Control {
    std::string socket;  // "" = SROCE_RUN_DIR/<device.name>.sock
    uint32_t socket_mode = 0660;
    bool allow_root = true;
    bool allow_same_uid = true;  // the daemon's own uid
    std::vector<uint32_t> allow_uids;
    std::vector<uint32_t> allow_gids;
    uint32_t max_contexts = 256;  // 1..65534: tag 0xffff is the daemon's own (memory.h kLocalTag)
    uint32_t max_objects_per_context = 16384;
  } control;

  struct Datapath {
    std::string kind = "udp";
    uint16_t port = 4791;        // RoCEv2 well-known port (Annex A17.2.1)
    bool gso = true;             // UDP_SEGMENT on send
    // io_uring zero-copy sends (IORING_OP_SENDMSG_ZC) for sends of kZcMinBytes and more:
    // the kernel sends from sroced's buffer instead of copying it, and the buffer is
    // reused only after the kernel's notification. Off: over veth the kernel copies
    // anyway (docs/performance.md, "io_uring zero-copy send").
    bool send_zc = false;
    bool gro = true;             // UDP_GRO on receive
    uint32_t batch = 64;         // packets per rx/tx burst
    uint32_t rx_buffers = 16;    // receives kept posted in io_uring
    uint32_t rx_buffer_bytes = 65536;
    uint32_t tx_slots = 64;      // GSO send buffers in flight
    uint32_t uring_entries = 256;
    uint32_t max_tx_ports = 1024;  // distinct lane source ports (one socket each)
    uint32_t sndbuf = 4u << 20;
    uint32_t rcvbuf = 8u << 20;
    uint32_t busy_poll_us = 50;  // keep polling this long after the last work before sleeping
    // 0: the loop runs as a normal (CFS) task; 1..99: SCHED_FIFO at this
    // priority, so a wake-up preempts the programs spinning on their CQs at
    // once (docs/sroced.md, "Latency"). Needs CAP_SYS_NICE.
    uint32_t realtime_priority = 0;
    // With realtime_priority 0: the loop's slice as a normal task (EEVDF's
    // per-task slice, sched_setattr sched_runtime, Linux 6.12+; 100..100000
    // us, 0 = the kernel's default). A short slice lets the daemon's wake-up
    // preempt a program spinning on its CQ while it keeps a fair share.
    uint32_t slice_us = 100;
    bool memory_batching = true;  // read-ahead windows and staged writes of app memory (memory.h)
  } datapath;

  // [dpdk]: the poll-mode datapath, used when datapath.kind = "dpdk"
  // (docs/dpdk.md). Only read by dpdk-pmd/; validated whatever the kind.
  struct Dpdk {
    // "af_xdp" / "af_packet": that virtual device on device.netdev;
    // "": the PCI port(s) EAL probes (bound to vfio-pci); else a --vdev string.
    std::string vdev = "af_xdp";
    uint32_t port = 0;             // ethdev port id
    uint32_t queues = 1;           // rx/tx queue pairs, all polled by the one lcore
    std::string lcores;            // "" = the loop is not pinned; "N" = pinned to CPU N
    bool huge_pages = false;       // false: --no-huge (anonymous memory)
    uint32_t memory_mb = 256;      // EAL -m
    uint32_t mbufs = 8191;         // mbuf pool size (rx rings + tx in flight + parked)
    uint32_t mbuf_cache = 256;     // per-lcore mempool cache
    uint32_t mbuf_data_room = 0;   // 0 = sized for the PMD (af_xdp: one page per mbuf)
    uint32_t rx_desc = 1024;
    uint32_t tx_desc = 1024;
    std::string xdp_prog;          // af_xdp: "" = sroce's steering program, "none" = the PMD's own
    uint32_t sleep_poll_us = 0;    // 0 = never sleep (a busy core); else idle looks at most N us apart
    uint32_t idle_yield_passes = 32;  // sched_yield after N passes without a packet (0 = never)
    uint32_t max_tx_ports = 1024;  // distinct lane source ports counted
    std::vector<std::string> static_neighbours;  // "10.0.0.2=02:00:00:00:00:02" (no kernel netdev)
    std::vector<std::string> eal_args;           // appended to the EAL command line
  } dpdk;

  struct Engine {
    uint32_t max_qps = 1024;
    uint32_t max_cqs = 1024;
    uint32_t max_mrs = 4096;
    uint32_t max_pds = 1024;
    uint32_t max_srqs = 256;
    uint32_t max_ahs = 4096;
    uint32_t max_cqe = 65536;
    uint32_t max_qp_wr = 16384;
    uint32_t max_sge = 32;
    uint32_t max_inline_data = 256;
    uint32_t max_rd_atomic = 16;
    uint64_t seed = 0;  // 0 = random at start
    // Lossy mode (docs/lossy.md): offered to every RC peer, used with sroce
    // peers only (negotiated in-band); lanes = UDP source ports per QP,
    // 0 = the build's default (Kconfig DEFAULT_LANES).
    bool lossy = true;
    uint32_t lanes = 0;
    // Lane trains (docs/lossy.md "Lane trains"): bytes of consecutive new packets
    // of a QP one lane carries before the next lane is chosen (one GSO send, one
    // GRO batch); 0 or <= the MTU: packet by packet.
    uint32_t lane_train_bytes = 32768;
    // [engine.cc]: congestion control per RC QP (docs/cc/README.md,
    // docs/sroced.md "Congestion control"). "none" = off: the engine sends
    // exactly what it sends without congestion control.
    struct Cc {
      std::string algorithm = "none";      // "none", "dcqcn", "hpcc", "odin", "delay", "ltp"
      uint32_t line_rate_mbps = 100000;    // the port rate: every flow starts at it, never exceeds it
      uint32_t base_rtt_us = 8;            // unloaded RTT (HPCC's T; the delay controller's base)
      uint32_t delay_target_us = 0;        // delay: base target; 0 = base_rtt_us + 2 us
      uint32_t delay_per_hop_bytes = 10000;  // delay: target per switch hop, as queue bytes at line rate
      std::string dcqcn_preset = "connectx";  // "connectx" (NIC defaults) or "paper"
      bool notification_point = true;      // answer CE-marked requests with CNPs
      uint32_t ack_every = 1;              // AckReq on every n-th request packet while cc runs
      // INT on the wire (docs/wire.md "INT"): off here, unlike the engine's
      // default, because Linux routers stamp no INT: a shim would only cost
      // 8 bytes a request and hide the BTH from tshark and the eBPF probes.
      bool int_telemetry = false;
      bool per_lane = false;               // one controller per lane (docs/cc/README.md "Per lane")
    } cc;
    // docs/lossy.md: lane weights (CE / loss / delay steer the spray) and
    // the reorder window's upper bound in us (0: stays at reorder_timeout).
    bool lane_weights = true;
    uint32_t reorder_timeout_max_us = 1000;
  } engine;

  // [limits]: what one uid may hold in sroced, so that one user cannot
  // exhaust it for everyone (docs/security.md, "Limits"; uid_limits.h).
  struct Limits {
    uint32_t contexts_per_uid = 32;     // open connections, HELLO or not: EMFILE
    uint32_t qps_per_uid = 256;         // ENOMEM
    uint32_t mrs_per_uid = 1024;        // MRs and memory windows: ENOMEM
    uint64_t mr_bytes_per_uid = 16ull << 30;  // registered bytes: ENOMEM (as RLIMIT_MEMLOCK)
    uint32_t ring_fds_per_uid = 1024;   // CQ/QP/SRQ rings and completion channels: EMFILE
    bool root = false;                  // false: uid 0 is exempt (as CAP_SYS_RESOURCE from rlimits)
    uint32_t hello_timeout_ms = 5000;   // a connection without HELLO (or STATS) by then is closed
  } limits;

  struct Log {
    std::string level = "info";
  } log;

  // The control socket path after defaults are applied.
  std::string socket_path() const;
};

// Parses and validates TOML text. `source` names the file in messages.
// `sets` are "key=value" overrides (value in TOML syntax, e.g.
// datapath.batch=32 or log.level="debug"), applied before validation.
Result<Config> parse_config(std::string_view toml_text, std::string_view source,
                            const std::vector<std::string>& sets = {});

// Reads `path`; a missing file is an error only when `required`.
Result<Config> load_config(const std::string& path, bool required,
                           const std::vector<std::string>& sets = {});

// Re-checks cross-key rules after command-line overrides changed fields.
Result<void> validate(const Config& cfg);

// [engine.cc] as the engine's congestion-control configuration (off for
// algorithm "none"). `ec` is an EngineConfig; only its `cc` member is set.
void apply_cc_config(const Config& cfg, EngineConfig& ec);

}  // namespace sroce::daemon
