// Runs a list of flows (traffic.h) as RDMA WRITE transfers between hosts on
// RC QPs of the real engine, and records each flow's completion time.
//
// A flow of S bytes from host a to host b is posted at its start time as
// ceil(S / chunk_bytes) signaled WRITEs on one RC QP a->b (a real application
// would post one large WRITE; the packets on the wire differ only in the
// first/last opcodes at chunk boundaries). It completes when the last WRITE's
// completion reaches the application at a (after the ACK of its last packet):
// FCT = that time - start.
//
// QPs: each ordered host pair keeps a pool. A starting flow takes an idle QP of
// its pair, or connects a new one (instantly: connection setup is control
// path), at most `max_qps_per_pair`, then queues on the least loaded. Each
// host has one PD, one CQ for all its QPs, and one MR over its whole arena.
// A QP's WRITEs wait in the runner when its send queue is full (as an
// application's would) and are posted as earlier ones complete, so the send
// queue's depth bounds memory, not the flow sizes. The receiving end of a
// flow QP posts nothing: its send queue has one entry.
//
// Idle QPs (`idle_qps_per_host`): with a bound, a source host keeps at most
// that many idle QPs; past it the one idle longest is destroyed at both ends
// (an application closing a connection it has not used for a while), so the
// QPs alive follow the flows in progress, not every pair that ever talked.
// 0 keeps every QP, as persistent connections.
//
// Open QPs per host (`max_open_qps_per_host`): with a bound, a flow that needs
// a new QP at a source host that already has that many open client QPs first
// closes the host's QP idle longest; if none is idle it waits (FIFO per host)
// until one of the host's QPs goes idle, and starts then (its FCT still counts
// from its start time). That is how a collective library runs an all-to-all
// over many peers: a window of connections in use at a time, not one per peer
// at once (an MoE all-to-all over 1024 hosts is a million flows at t = 0).
// With the flows of a host listed to peers i+1, i+2, ... (all_to_all_flows),
// the window makes it a shifted pairwise exchange. 0: no bound.
//
// Memory: by default every flow of a host writes from the same source buffer
// into the same destination buffer at the peer (chunk_bytes each; contents
// are not checked), so 128 hosts need only a few MiB of arena each. With
// `verify`, each flow gets its own regions, filled with a per-flow pattern,
// and verify() compares them byte for byte.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <unordered_map>
#include <vector>

#include "sroce/sim/traffic.h"
#include "sroce/sim/verbs_setup.h"

namespace sroce::sim {

struct FlowRunnerConfig {
  QpOptions qp;                     // mtu, timeouts, SQ depth ...
  uint32_t chunk_bytes = 1u << 20;  // largest WRITE of a flow
  uint32_t max_qps_per_pair = 8;
  uint32_t idle_qps_per_host = 0;  // 0: keep every QP; else close the oldest idle past it
  uint32_t max_open_qps_per_host = 0;  // 0: no bound; else flows wait for a QP (above)
  bool verify = false;
  // IP traffic class of every flow: ECT(0) (0b10) so switches may mark CE
  // (RFC 3168; DCQCN needs marks). 0 makes the traffic not ECN-capable.
  uint8_t traffic_class = 2;
};

struct FlowRecord {
  FlowSpec spec;
  Time end = Time::never();  // completion of the last WRITE at the sender
  uint32_t wrs = 0;
  uint32_t wrs_posted = 0;
  uint32_t wrs_done = 0;
  bool error = false;
  bool done() const { return end != Time::never(); }
};

class FlowRunner {
 public:
  FlowRunner(Network& net, std::vector<Host*> hosts, const FlowRunnerConfig& cfg);
  FlowRunner(const FlowRunner&) = delete;
  FlowRunner& operator=(const FlowRunner&) = delete;

  // PD, CQ and MR per host; the shared buffers (or nothing, with verify).
  Result<void> setup();
  // The sending engine and QPN of flow `index` once it started (for
  // sampling its QpStats), or nothing.
  std::optional<std::pair<Engine*, Qpn>> sender_qp(uint64_t index) const;
  // Schedules the flows (start times at or after now). With verify, their
  // regions are allocated and filled now.
  Result<void> add(const std::vector<FlowSpec>& flows);

  const std::vector<FlowRecord>& flows() const { return flows_; }
  uint64_t started() const { return started_; }
  uint64_t completed() const { return completed_; }
  uint64_t errors() const { return errors_; }
  uint64_t bytes_completed() const { return bytes_done_; }
  bool all_done() const { return completed_ + errors_ == flows_.size(); }
  const std::string& first_error() const { return first_error_; }
  uint64_t qps() const { return qps_.size(); }           // QPs connected so far
  uint64_t qps_open() const { return qps_.size() - qps_closed_; }
  uint64_t qps_closed() const { return qps_closed_; }
  // Flows that waited for a QP under max_open_qps_per_host.
  uint64_t flows_waited() const { return flows_waited_; }
  // Engine memory of the open QPs (Engine::qp_memory_bytes), both ends.
  uint64_t qp_memory_bytes() const;
  // With verify: every completed flow's destination equals its source.
  bool verify(std::string* why) const;

 private:
  struct HostState {
    Handle pd = kNoHandle;
    Handle cq = kNoHandle;
    MrKeys keys;
    uint64_t src_buf = 0;
    uint64_t dst_buf = 0;
  };
  struct Qp {
    QpEnd client;
    QpEnd server;
    uint32_t src = 0, dst = 0;  // host indices (client at src)
    uint32_t outstanding = 0;   // WRs posted, not completed
    uint32_t queued = 0;        // WRs of waiting flows not posted yet
    bool posting = false;       // post_waiting runs for it (completions may re-enter)
    // Flows with WRITEs not yet posted (the send queue was full), in order:
    // a list through waiting_next_ (kNoFlow: empty).
    uint64_t wait_head = kNoFlow;
    uint64_t wait_tail = kNoFlow;
    uint32_t idle_mark = 0;  // bumped when the QP leaves the idle list
    bool idle = false;
    bool closed = false;
  };
  struct IdleEntry {
    uint32_t qp;
    uint32_t mark;
  };
  static constexpr uint64_t kNoFlow = UINT64_MAX;
  struct Regions {
    uint64_t src = 0;
    uint64_t dst = 0;
  };

  void start_flow(uint64_t index, Time now);
  // Under max_open_qps_per_host: closes the source host's QP idle longest;
  // false if none is idle.
  bool close_oldest_idle(uint32_t host);
  void start_pending(uint32_t host);  // starts the host's next waiting flow, if any
  void post_waiting(uint32_t q);  // posts waiting WRITEs while the send queue has room
  void became_idle(uint32_t q);
  void close_qp(uint32_t q);
  Result<uint32_t> new_qp(uint32_t src, uint32_t dst);
  void on_wc(uint32_t host, const Wc& wc, Time now);
  void fail(uint64_t flow, const std::string& why);
  void fill(uint64_t flow, std::span<std::byte> out) const;

  Network& net_;
  std::vector<Host*> hosts_;
  FlowRunnerConfig cfg_;
  std::vector<HostState> hs_;
  std::vector<Qp> qps_;
  // (src << 32 | dst) -> QP indices of that pair.
  std::unordered_map<uint64_t, std::vector<uint32_t>> pairs_;
  std::vector<FlowRecord> flows_;
  std::vector<Regions> regions_;   // verify only
  std::vector<uint32_t> flow_qp_;  // the QP each started flow was posted on
  std::vector<uint64_t> waiting_next_;  // per flow: the next flow waiting on its QP
  std::vector<std::vector<IdleEntry>> idle_;  // per source host: idle QPs, oldest first
  std::vector<size_t> idle_head_;             // ... from this index
  std::vector<uint32_t> idle_count_;          // ... of which still idle
  std::vector<uint32_t> open_;                // per source host: open client QPs
  std::vector<std::vector<uint64_t>> pending_;  // per source host: flows waiting for a QP
  std::vector<size_t> pending_head_;
  uint64_t flows_waited_ = 0;
  uint64_t qps_closed_ = 0;
  uint64_t started_ = 0;
  uint64_t completed_ = 0;
  uint64_t errors_ = 0;
  uint64_t bytes_done_ = 0;
  std::string first_error_;
};

}  // namespace sroce::sim
