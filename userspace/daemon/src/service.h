// Serving local processes: the control socket, per-process contexts and
// their objects, the shared-memory rings, events.
//
// Every object a process creates is named by a handle that is only
// meaningful inside its context (context.h): a process cannot reach another
// process's PD, CQ, SRQ, AH or QP by guessing numbers. QPNs and rkeys are
// global as RDMA requires (a peer addresses a QP by its QPN), but a QPN is
// only accepted in a control op from the context that owns the QP.
#pragma once

#include <sys/socket.h>
#include <sys/types.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "config.h"
#include "context.h"
#include "gsi.h"
#include "gsi_socket.h"
#include "kernel_channel.h"
#include "uid_limits.h"
#include "memory.h"
#include "sroce/engine/engine.h"

namespace sroce::daemon {

struct ServiceStats {
  uint64_t contexts_opened = 0;
  uint64_t contexts_closed = 0;
  uint64_t ctl_requests = 0;
  uint64_t ctl_errors = 0;      // requests answered with an error status
  uint64_t ctl_garbage = 0;     // malformed messages dropped
  uint64_t ctl_refused = 0;     // peers refused by the uid policy or the context limit
  uint64_t ring_wqes = 0;       // work requests taken from rings
  uint64_t ring_bad_wqes = 0;   // malformed ring entries (completed in error)
  uint64_t cqes = 0;            // completions written to CQ rings
  uint64_t comp_events = 0;
  uint64_t async_events = 0;
  uint64_t event_drops = 0;     // event sockets full or closed
  uint64_t gsi_dropped = 0;     // kernel path: QP1 MADs not sent (queue full, unencodable)
  uint64_t gsi_sent = 0;        // kernel path: QP1 MADs queued for the datapath (gsi.h)
  uint64_t gsi_received = 0;    // kernel path: QP1 datagrams handed to the module
  uint64_t gsi_rx_dropped = 0;  // kernel path: QP1 datagrams refused (gsi_decode, channel)
  uint64_t mrs_shared = 0;      // SROCE_OP_SHARE_MR accepted: MRs reached by memcpy
  uint64_t contexts_gone = 0;   // closed because their address space went away (exec, exit)
};

// What the service needs from the rest of the daemon.
struct ServiceEnv {
  Engine* engine = nullptr;
  ProcessMemory* memory = nullptr;
  const Config* config = nullptr;
  std::vector<Gid> gids;
  uint32_t netdev_mtu = 1500;
  // Bytes a packet carries beyond IPv4 + UDP + BTH + the largest extension
  // header + ICRC (72): the lossy-mode trailer when lossy mode is offered.
  uint32_t extra_header_bytes = 0;
  std::string netdev;
  // The datapath sends and receives RoCEv2 over IPv6 too (the UDP datapath with
  // IPv6 GIDs): QP1's IPv6 MADs then go through it, not through their own socket.
  bool datapath_ipv6 = false;
  uint64_t node_guid = 0;
  // Registers / unregisters an fd with the loop; `key` comes back on events.
  std::function<void(int fd, uint64_t key)> watch;
  std::function<void(int fd)> unwatch;
  // Extra JSON for SROCE_OP_STATS (datapath, engine): filled by the daemon.
  // `viewer` is the caller's uid: other than root it sees only its own
  // contexts and QPs (docs/security.md, "The wire").
  std::function<std::string(uint32_t what, uid_t viewer)> stats_json;
  // Takes the listening socket out of the loop's interest (false) and back
  // (true): after accept(2) failed for want of descriptors (uid_limits.h).
  std::function<void(bool)> listen_interest;
};

class Service {
 public:
  explicit Service(ServiceEnv env);
  ~Service();

  // Creates the listening socket (replacing a stale socket file).
  Result<void> listen();
  int listen_fd() const { return listen_fd_; }

  // Loop callbacks. `key` is what was passed to watch().
  void on_listen_ready(Time now);
  void on_fd_ready(uint64_t key, uint32_t events, Time now);

  // One pass: new work requests from every ring into the engine. Returns
  // true if anything was posted.
  bool poll_rings(Time now);
  // Completions, completion notifications and async events out of the
  // engine into rings and event sockets. Returns true if anything moved.
  bool poll_completions();

  // Before sleeping: tells every producer to ring the doorbell, then takes a
  // last look; true means work arrived and the loop must not sleep.
  bool prepare_sleep(Time now);
  void after_sleep();

  // Shutdown: every context gets IBV_EVENT_DEVICE_FATAL and every ring its
  // error flag, then all objects are destroyed and the socket removed.
  void shutdown();

  const ServiceStats& stats() const { return stats_; }
  size_t context_count() const { return contexts_.size(); }
  // `viewer`: the caller's uid; root (and the daemon's own uid) sees all.
  std::string contexts_json(uid_t viewer = 0) const;
  std::string qps_json(uid_t viewer = 0) const;
  // Objects alive in the contexts `viewer` may see (all of them for root: tests and
  // `sroce status`).
  ObjectCounts object_counts(uid_t viewer = 0) const;
  bool sees_all(uid_t viewer) const;
  const LimitStats& limit_stats() const { return limit_stats_; }
  // The HELLO timeout and the accept pause (service_limits.cc).
  Time next_deadline() const;
  void on_timer(Time now);

  // The kernel path (service_kernel.cc, docs/kmod.md): serve the contexts
  // of rdma_sroce.ko's device `ibdev` through its control channel, beside
  // the socket.
  Result<void> attach_kernel(const std::string& ibdev);
  bool kernel_attached() const { return kchan_ != nullptr; }
  size_t kernel_gid_count() const { return kchan_ ? kchan_->gid_count() : 0; }
  // QP1 of the kernel path (gsi.h): a received datagram for QP1 goes to the
  // module (true: consumed; false: not ours, the engine takes it), and the
  // MADs the module sent leave through the datapath.
  bool on_gsi_packet(std::span<const std::byte> payload, const PacketMeta& meta);
  std::optional<TxPacket> poll_gsi_transmit(std::span<std::byte> out, Time now);

  static constexpr uint64_t kKeySocket = 1;
  static constexpr uint64_t kKeyDoorbell = 2;
  static constexpr uint64_t kKeyKernel = 3;          // the channel fd (ctx unused)
  static constexpr uint64_t kKeyKernelDoorbell = 4;  // its doorbell eventfd
  static uint64_t key(uint64_t kind, uint32_t ctx) { return (kind << 32) | ctx; }

 private:
  // Control ops (service_control.cc / service_objects.cc). Each returns the
  // reply status (0 or -errno) and fills `reply` / `fds`.
  struct Reply {
    std::byte body[SROCE_MAX_MSG];
    size_t len = 0;
    int fds[4] = {-1, -1, -1, -1};
    int nfds = 0;
    // Descriptors that came with the request (SCM_RIGHTS); an op that keeps one sets it to
    // -1, handle_message closes the others.
    static constexpr int kMaxInFds = 4;
    int in_fds[kMaxInFds] = {-1, -1, -1, -1};
    int in_nfds = 0;
    template <typename T>
    T& as() {
      len = sizeof(T);
      memset(body, 0, sizeof(T));
      return *reinterpret_cast<T*>(body);
    }
    void add_fd(int fd) { fds[nfds++] = fd; }
  };
  void handle_message(Context& c, Time now);
  int dispatch(Context& c, uint16_t op, std::span<const std::byte> body, Reply& r, Time now);
  void send_reply(Context& c, const sroce_msg_hdr& req, int status, Reply& r);

  int op_hello(Context& c, std::span<const std::byte> body, Reply& r);
  int op_query_device(Reply& r);
  int op_query_port(std::span<const std::byte> body, Reply& r);
  int op_query_gid(std::span<const std::byte> body, Reply& r);
  int op_stats(Context& c, std::span<const std::byte> body, Reply& r);
  int op_alloc_pd(Context& c, Reply& r);
  int op_dealloc_pd(Context& c, std::span<const std::byte> body);
  int op_reg_mr(Context& c, std::span<const std::byte> body, Reply& r);
  int op_dereg_mr(Context& c, std::span<const std::byte> body);
  int op_share_mr(Context& c, std::span<const std::byte> body, Reply& r);  // service_memory.cc
  void unshare_mr(Context& c, uint32_t lkey, MrObj& m);
  int probe_range(Context& c, uint64_t addr, uint64_t length);  // REG_MR/REREG_MR's EFAULT check
  int op_rereg_mr(Context& c, std::span<const std::byte> body, Reply& r);
  int op_alloc_mw(Context& c, std::span<const std::byte> body, Reply& r);
  int op_dealloc_mw(Context& c, std::span<const std::byte> body);
  int op_create_cq(Context& c, std::span<const std::byte> body, Reply& r);
  int op_destroy_cq(Context& c, std::span<const std::byte> body);
  int op_resize_cq(Context& c, std::span<const std::byte> body, Reply& r);  // service_resize.cc
  // Kernel path: REREG_MR with a new translation (service_resize.cc).
  int kernel_rereg_translation(Context& c, MrObj& m, const sroce_rereg_mr& req,
                               std::span<const std::byte> ext, Reply& r);
  int op_create_qp(Context& c, std::span<const std::byte> body, Reply& r);
  int op_modify_qp(Context& c, std::span<const std::byte> body, Time now);
  int op_query_qp(Context& c, std::span<const std::byte> body, Reply& r);
  int op_destroy_qp(Context& c, std::span<const std::byte> body, Reply& r);
  int op_create_srq(Context& c, std::span<const std::byte> body, Reply& r);
  int op_modify_srq(Context& c, std::span<const std::byte> body);
  int op_query_srq(Context& c, std::span<const std::byte> body, Reply& r);
  int op_destroy_srq(Context& c, std::span<const std::byte> body);
  int op_create_ah(Context& c, std::span<const std::byte> body, Reply& r);
  int op_destroy_ah(Context& c, std::span<const std::byte> body);
  int op_create_channel(Context& c, Reply& r);
  int op_destroy_channel(Context& c, std::span<const std::byte> body);

  int fail(Context& c, const char* op, const Error& e);  // logs, returns -errno

  // The kernel path (service_kernel.cc).
  void on_kernel_ready(uint32_t events, Time now);
  void on_kernel_request(uint32_t kctx, std::span<std::byte> msg, Time now);
  void on_gsi_send(std::span<const std::byte> body);
  void on_gsi6_ready();
  void kernel_detach(const char* why);
  int kernel_hello(uint32_t kctx, std::span<const std::byte> body, Reply& r);
  // Maps region `m` of the channel into `out`.
  int kernel_map(const sroce_kmap& m, int prot, SharedMemory& out);
  // The extension of a kernel CREATE_CQ/SRQ (`ext` follows the request):
  // checks the module laid the ring out as the daemon would, maps it.
  int kernel_ring(std::span<const std::byte> ext, uint32_t size, uint32_t esz, SharedMemory& out);
  // The same for CREATE_QP: SQ at 0, RQ at `sq_bytes` (none with an SRQ).
  int kernel_qp_rings(std::span<const std::byte> ext, uint32_t sq_size, uint32_t sq_esz, uint32_t rq_size,
                      uint32_t rq_esz, size_t sq_bytes, bool srq, SharedMemory& out);
  // REG_MR: maps the pinned pages; `at` is where byte `length` of the MR
  // starts ([addr, addr + length) lives at [at, at + length)).
  int kernel_mr(std::span<const std::byte> ext, uint64_t length, SharedMemory& out, std::byte*& at, bool& writable);
  // sgid_index of a kernel context's address vector: the kernel's table
  // index in, the engine's GID index out (and back for QUERY_QP).
  int kernel_sgid_in(uint8_t& index);
  void kernel_sgid_out(uint8_t& index);

  // Rings (service_rings.cc).
  bool poll_send_ring(Context& c, QpObj& qp, Time now);
  bool poll_recv_ring(Context& c, QpObj& qp);
  bool poll_srq_ring(Context& c, SrqObj& srq);
  bool drain_cq(Context& c, CqObj& cq);
  void push_error_cqe(Context& c, uint32_t cq_local, uint64_t wr_id, uint32_t qpn, uint8_t opcode,
                      uint8_t status);
  void send_comp_event(Context& c, CqObj& cq);
  void send_async_event(Context& c, uint64_t element, uint32_t type);
  void deliver_async(const AsyncEvent& ev);

  // Whose memory (service_memory.cc): HELLO's mem file, contexts whose address space is gone.
  int hello_mem_fd(Context& c, int fd, const sroce_hello_mem& hm);
  void close_gone_context(uint32_t id);
  void reap_gone_contexts(Time now);

  // Lifetime.
  void close_context(uint32_t id, const char* why);
  void destroy_objects(Context& c);
  bool uid_allowed(uid_t uid, gid_t gid) const;

  // Per-uid limits and the connection policy (service_limits.cc, uid_limits.h).
  bool limited(uid_t uid) const;
  UidUsage usage_of(uid_t uid) const;
  int admit_connection(const ucred& cred);          // 0 or -errno (EACCES, EMFILE)
  void refuse_connection(int fd, int status);       // notice, close, count
  void accept_failed(int err, Time now);
  void note_accepted(Context& c, Time now);
  int admit_request(Context& c, uint16_t op, std::span<const std::byte> body);  // 0 or -errno
  Context* find(uint32_t id);

  ServiceEnv env_;
  const Config& cfg_;
  Engine& engine_;
  ProcessMemory& mem_;
  int listen_fd_ = -1;
  std::string path_;
  bool bound_ = false;

  std::map<uint32_t, std::unique_ptr<Context>> contexts_;
  uint32_t next_context_id_ = 1;
  std::vector<uint16_t> free_tags_;
  // Global indices from engine names to the owning context (events, stats).
  std::unordered_map<Qpn, uint32_t> qp_owner_;
  std::unordered_map<Handle, std::pair<uint32_t, uint32_t>> cq_owner_;   // engine cq -> (ctx, local)
  std::unordered_map<Handle, std::pair<uint32_t, uint32_t>> srq_owner_;  // engine srq -> (ctx, local)
  std::unique_ptr<KernelChannel> kchan_;
  std::unordered_map<uint32_t, uint32_t> kctx_;  // the module's context id -> ours
  GsiTxQueue gsi_tx_;
  std::unique_ptr<Gsi6Socket> gsi6_;  // QP1 for IPv6 GIDs (gsi_socket.h); may be absent
  uint32_t gsi6_psn_ = 0;

  Time last_gone_sweep_{};
  Time now_{};  // the loop's clock at the last pass (for control-path engine calls)
  std::vector<Wc> wc_scratch_;
  std::vector<Sge> sge_scratch_;
  std::vector<std::byte> inline_scratch_;
  ServiceStats stats_;
  LimitStats limit_stats_;
  Time hello_deadline_ = Time::never();  // earliest HELLO timeout of a connection
  bool listen_paused_ = false;
  Time listen_resume_ = Time::never();
};

}  // namespace sroce::daemon
