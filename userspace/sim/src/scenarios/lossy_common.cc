#include "lossy_common.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "sroce/sim/topology.h"
#include "sroce/sim/transfer.h"
#include "util.h"

namespace sroce::sim {

namespace {

// Samples the receiver's accepted bytes and the sender's lanes every bin:
// the goodput timeline and the time a dead path's lanes are retired.
class Sampler final : public EventSink {
 public:
  Sampler(Simulator& sim, const PairRun& cfg, const RcTransfer& xfer, const QpEnd& client,
          const QpEnd& server, const LeafSpine& fab, PairResult& out)
      : sim_(sim), cfg_(cfg), xfer_(xfer), client_(client), server_(server), fab_(fab), out_(out) {}

  void start(Time t0) {
    t0_ = t0;
    sim_.schedule(t0 + cfg_.sample, this, 0);
  }

  // The spine a packet of this lane crosses from the client's leaf.
  int spine_of(uint16_t src_port) const {
    PacketMeta m;
    m.src = client_.addr;
    m.dst = server_.addr;
    m.src_port = src_port;
    const Link* l = fab_.leaves[0]->select(m);
    for (size_t s = 0; s < fab_.up[0].size(); ++s)
      if (fab_.up[0][s] == l) return static_cast<int>(s);
    return -1;
  }

  void on_event(uint32_t, uint64_t, Time now) override {
    if (auto qs = server_.engine->qp_stats(server_.qpn)) {
      const uint64_t rx = qs->rx_bytes;
      out_.rx_gbps.push_back(static_cast<double>(rx - last_rx_) * 8 /
                             (static_cast<double>(cfg_.sample.ps) * 1e-12) / 1e9);
      last_rx_ = rx;
    }
    const Time dead_at = t0_ + cfg_.blackhole_at;
    if (cfg_.blackhole_spine >= 0) {
      // Lanes through the dead spine in service now (retired ones come back
      // as probes after a hold-down).
      LaneStats ls[kMaxLanes];
      const size_t n = client_.engine->lane_stats(client_.qpn, ls);
      uint32_t active = 0;
      for (size_t i = 0; i < n; ++i)
        if (ls[i].active && spine_of(ls[i].src_port) == cfg_.blackhole_spine) ++active;
      out_.dead_lanes_active.push_back(active);
    }
    if (cfg_.blackhole_spine >= 0 && out_.retire_us < 0 && now >= dead_at) {
      LaneStats ls[kMaxLanes];
      const size_t n = client_.engine->lane_stats(client_.qpn, ls);
      // A retired lane is re-admitted as a probe after a hold-down, so the
      // time is when the last dead lane was first seen retired.
      first_retired_.resize(n, -1);
      bool any = false, all_retired = true;
      for (size_t i = 0; i < n; ++i) {
        if (spine_of(ls[i].src_port) != cfg_.blackhole_spine) continue;
        any = true;
        if (!ls[i].active && first_retired_[i] < 0) {
          first_retired_[i] = to_us(now - dead_at);
          if (out_.first_retire_us < 0) out_.first_retire_us = first_retired_[i];
        }
        all_retired = all_retired && first_retired_[i] >= 0;
      }
      if (any && all_retired) out_.retire_us = to_us(now - dead_at);
    }
    if (!xfer_.done()) sim_.schedule(now + cfg_.sample, this, 0);
  }

 private:
  Simulator& sim_;
  const PairRun& cfg_;
  const RcTransfer& xfer_;
  const QpEnd& client_;
  const QpEnd& server_;
  const LeafSpine& fab_;
  PairResult& out_;
  Time t0_{};
  uint64_t last_rx_ = 0;
  std::vector<double> first_retired_;  // per lane, us after the blackhole
};

}  // namespace

PairResult run_pair(const PairRun& cfg) {
  PairResult r;
  Simulator sim(cfg.seed);
  Network net(sim);
  LeafSpineConfig lc;
  lc.spines = cfg.spines;
  lc.host_link.rate_bps = cfg.rate_bps;
  lc.host_link.delay = cfg.delay;
  lc.uplink = lc.host_link;
  lc.downlink = lc.host_link;
  lc.downlink.impair.loss = cfg.loss;
  lc.uplink.ecn_threshold_bytes = lc.downlink.ecn_threshold_bytes = cfg.ecn_bytes;
  lc.host_link.ecn_threshold_bytes = cfg.ecn_bytes;
  const size_t per_spine = std::max(cfg.spine_delay_ns.size(), cfg.spine_rate_bps.size());
  for (size_t s = 0; s < per_spine; ++s) {
    lc.uplink_per_spine.push_back(lc.uplink);
    lc.downlink_per_spine.push_back(lc.downlink);
    if (s < cfg.spine_delay_ns.size()) {
      lc.uplink_per_spine.back().delay = Duration::nanos(cfg.spine_delay_ns[s]);
      lc.downlink_per_spine.back().delay = Duration::nanos(cfg.spine_delay_ns[s]);
    }
    if (s < cfg.spine_rate_bps.size() && cfg.spine_rate_bps[s] != 0) {
      lc.uplink_per_spine.back().rate_bps = cfg.spine_rate_bps[s];
      lc.downlink_per_spine.back().rate_bps = cfg.spine_rate_bps[s];
    }
  }
  HostConfig hc;
  hc.engine.seed = cfg.seed;
  hc.engine.port_mtu = cfg.mtu;
  // The fabric does not corrupt frames: skip the software ICRC (engine-bench
  // measures its cost); the data are still copied and verified.
  hc.engine.icrc_offload = true;
  hc.engine.lossy = cfg.lossy;
  if (cfg.int_telemetry) {
    lc.sw.mmu = true;  // INT is stamped at the MMU's egress dequeue
    lc.sw.int_stamp = true;
    hc.engine.cc.enable = true;
    hc.engine.cc.config.algorithm = cc::Algorithm::kDelay;
    hc.engine.cc.line_rate_bps = cfg.rate_bps;
    hc.engine.cc.notification_point = false;
  }
  hc.arena_bytes = cfg.bytes + (8u << 20);
  LeafSpine fab = build_leaf_spine(net, lc, hc);

  QpOptions qo;
  qo.mtu = cfg.mtu;
  qo.timeout = cfg.timeout;
  qo.send_wr = std::max<uint32_t>(256, cfg.window * 2);
  auto pair = make_qp_pair(*fab.hosts[0], *fab.hosts[1], qo, cfg.seed);
  if (!pair) {
    r.why = pair.error().message;
    return r;
  }
  TransferConfig tc;
  tc.total_bytes = cfg.bytes;
  tc.msg_bytes = cfg.msg;
  tc.window = cfg.window;
  // WRITEs, or READs only (`op=read`: the responses are sprayed and
  // selective too, docs/lossy.md "READ responses").
  tc.mix = {cfg.read ? WrOpcode::kRdmaRead : WrOpcode::kRdmaWrite};
  tc.pattern_seed = cfg.seed;
  RcTransfer xfer(pair->first, pair->second, tc);
  if (auto s = xfer.setup(); !s) {
    r.why = s.error().message;
    return r;
  }
  Sampler sampler(sim, cfg, xfer, pair->first, pair->second, fab, r);
  // Per-WR completion time: WR k is posted when WR k - window completes
  // (the transfer keeps `window` in flight), the first window at the start.
  std::vector<Time> done_at;
  xfer.on_progress = [&](const RcTransfer& x, Time now) {
    while (done_at.size() < x.stats().completed) done_at.push_back(now);
    if (x.done()) sim.stop();
  };
  if (cfg.blackhole_spine >= 0) {
    // The spine's links (both ways) drop everything from then on; routes stay
    // (no convergence), so only the transport can steer around it.
    const Time at = sim.now() + cfg.blackhole_at;
    Switch* victim = fab.spines[static_cast<size_t>(cfg.blackhole_spine) % fab.spines.size()];
    for (const auto& l : net.links())
      if (&l->from() == victim || &l->to() == victim)
        l->impairments().outages.push_back({at, Time::never()});
  }
  sampler.start(sim.now());
  xfer.start();
  sim.run(sim.now() + cfg.limit);

  const auto& st = xfer.stats();
  r.finished = xfer.done();
  r.wrs_posted = st.posted;
  r.wrs_ok = st.completed;
  r.wr_errors = st.errors;
  r.bytes_done = st.bytes_done;
  r.data_ok = r.finished && !xfer.failed() && xfer.verify(&r.why);
  if (!r.finished && r.why.empty())
    r.why = st.first_error.empty() ? "did not finish within the simulated time limit" : st.first_error;
  if (xfer.failed() && r.why.empty()) r.why = st.first_error;
  const Duration elapsed = st.last_completion - st.first_post;
  r.elapsed_us = to_us(elapsed);
  const double secs = static_cast<double>(elapsed.ps) * 1e-12;
  r.goodput_gbps = secs > 0 ? static_cast<double>(st.bytes_done) * 8 / secs / 1e9 : 0;
  if (auto q = pair->first.engine->qp_stats(pair->first.qpn)) r.client = *q;
  if (auto q = pair->second.engine->qp_stats(pair->second.qpn)) r.server = *q;
  r.engines = fab.hosts[0]->engine().stats() + fab.hosts[1]->engine().stats();
  LaneStats ls[kMaxLanes];
  const size_t n = pair->first.engine->lane_stats(pair->first.qpn, ls);
  r.lanes.assign(ls, ls + n);
  for (const auto& l : r.lanes) {
    const int s = sampler.spine_of(l.src_port);
    r.lane_spine.push_back(s);
    if (cfg.blackhole_spine >= 0 && s == cfg.blackhole_spine) ++r.lanes_dead_path;
    if (!l.active && s != cfg.blackhole_spine) ++r.lanes_retired_wrongly;
  }
  r.frames_lost = net.total_link_stats().lost();
  r.ce_marked = net.total_link_stats().ecn_marked;
  for (size_t k = 0; k < done_at.size(); ++k) {
    const Time posted = k < cfg.window ? st.first_post : done_at[k - cfg.window];
    r.wr_fct_us.push_back(to_us(done_at[k] - posted));
  }
  for (size_t s = 0; s < fab.up[0].size(); ++s)
    r.spine_max_queue.push_back(fab.up[0][s]->stats().max_queue_bytes);
  r.events = sim.events_run();
  return r;
}

Json lanes_json(const PairResult& r) {
  Json a = Json::array();
  for (size_t i = 0; i < r.lanes.size(); ++i) {
    const auto& l = r.lanes[i];
    a.push_back({{"lane", i},
                 {"src_port", l.src_port},
                 {"spine", r.lane_spine[i]},
                 {"active", l.active},
                 {"tx_packets", l.tx_packets},
                 {"retransmits", l.retransmits},
                 {"naks", l.naks},
                 {"losses", l.losses_detected},
                 {"srtt_us", static_cast<double>(l.srtt_ps) * 1e-6},
                 {"weight", static_cast<double>(l.weight) / kLaneWeightFull},
                 {"ce_echoed", l.ce_echoed},
                 {"weight_cuts", l.weight_cuts}});
  }
  return a;
}

std::vector<int64_t> parse_list(const std::string& v) {
  std::vector<int64_t> out;
  for (size_t pos = 0; pos < v.size();) {
    size_t comma = v.find(',', pos);
    if (comma == std::string::npos) comma = v.size();
    out.push_back(std::strtoll(v.substr(pos, comma - pos).c_str(), nullptr, 10));
    pos = comma + 1;
  }
  return out;
}

Json run_quiet(int (*fn)(const ScenarioOptions&, Reporter&), const ScenarioOptions& opt) {
  std::FILE* sink = std::fopen("/dev/null", "w");
  if (sink == nullptr) return Json{{"ok", false}, {"error", "cannot open /dev/null"}};
  Reporter rep(sink, true, true);
  fn(opt, rep);
  std::fclose(sink);
  return rep.last_summary();
}

}  // namespace sroce::sim
