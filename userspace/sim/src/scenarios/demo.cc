// demo: the headline run. Two hosts on different leaves of a 4-spine
// leaf-spine fabric whose every path loses 1% of frames (on each spine->leaf
// link, both directions), one RC QP pair moving 64 MiB as a mix of WRITEs,
// SENDs and READs, every byte verified.
#include <string>

#include "sroce/sim/topology.h"
#include "sroce/sim/transfer.h"
#include "util.h"

namespace sroce::sim {

namespace {
struct FabricRun {
  uint64_t total;
  uint32_t msg;
  uint32_t spines;
  double loss;
  Mtu mtu;
  const char* name;
};

int run_fabric_transfer(const ScenarioOptions& opt, Reporter& rep, const FabricRun& fr,
                        const std::function<void(LeafSpineConfig&)>& tweak,
                        const std::function<void(Network&, LeafSpine&)>& after_build) {
  Simulator sim(opt.seed);
  Network net(sim);
  bool pcap_failed = false;
  auto pcap = attach_pcap(net, opt, rep, &pcap_failed);
  if (pcap_failed) return 1;

  LeafSpineConfig lc;
  lc.spines = fr.spines;
  lc.host_link.rate_bps = 100'000'000'000ull;
  lc.host_link.delay = Duration::micros(1);
  lc.uplink = lc.host_link;
  lc.downlink = lc.host_link;
  lc.downlink.impair.loss = fr.loss;
  if (tweak) tweak(lc);
  HostConfig hc;
  hc.engine.seed = opt.seed;
  hc.arena_bytes = fr.total + (8u << 20);
  LeafSpine fab = build_leaf_spine(net, lc, hc);
  if (after_build) after_build(net, fab);

  QpOptions qo;
  qo.mtu = fr.mtu;
  auto pair = make_qp_pair(*fab.hosts[0], *fab.hosts[1], qo, opt.seed);
  if (!pair) {
    rep.error(pair.error().message);
    rep.summary({{"scenario", fr.name}, {"ok", false}, {"error", pair.error().message}});
    return 1;
  }
  TransferConfig tc;
  tc.total_bytes = opt.param_u64("bytes", fr.total);
  tc.msg_bytes = static_cast<uint32_t>(opt.param_u64("msg", fr.msg));
  tc.window = static_cast<uint32_t>(opt.param_u64("window", 8));
  tc.pattern_seed = opt.seed;
  RcTransfer xfer(pair->first, pair->second, tc);
  if (auto r = xfer.setup(); !r) {
    rep.error(r.error().message);
    rep.summary({{"scenario", fr.name}, {"ok", false}, {"error", r.error().message}});
    return 1;
  }
  rep.event("start", {{"scenario", fr.name},
                      {"seed", opt.seed},
                      {"topology", "leaf-spine"},
                      {"spines", lc.spines},
                      {"link_gbps", lc.host_link.rate_bps / 1e9},
                      {"path_loss", fr.loss},
                      {"mtu", mtu_bytes(fr.mtu)},
                      {"bytes", tc.total_bytes},
                      {"messages", xfer.messages()}});
  uint64_t next_report = tc.total_bytes / 8;
  xfer.on_progress = [&](const RcTransfer& x, Time now) {
    if (x.stats().bytes_done >= next_report) {
      next_report += tc.total_bytes / 8;
      rep.event("progress", {{"t_us", to_us(now)},
                             {"bytes", x.stats().bytes_done},
                             {"completions", x.stats().completed}});
    }
    if (x.done()) sim.stop();
  };
  xfer.start();
  const Time limit = Time{} + Duration::millis(static_cast<int64_t>(opt.param_u64("limit_ms", 10'000)));
  sim.run(limit);

  const auto& st = xfer.stats();
  std::string why;
  const bool finished = xfer.done();
  const bool data_ok = finished && !xfer.failed() && xfer.verify(&why);
  if (!finished && why.empty())
    why = st.first_error.empty() ? "did not finish within the simulated time limit" : st.first_error;
  if (xfer.failed() && why.empty()) why = st.first_error;

  Host& a = *fab.hosts[0];
  Host& b = *fab.hosts[1];
  const EngineStats es = a.engine().stats() + b.engine().stats();
  Json spines = Json::array();
  for (uint32_t s = 0; s < lc.spines; ++s) {
    // Frames that crossed spine s, per direction.
    spines.push_back({{"spine", s},
                      {"a_to_b", fab.up[0][s]->stats().tx_frames},
                      {"b_to_a", fab.up[1][s]->stats().tx_frames},
                      {"lost", fab.down[s][0]->stats().lost() + fab.down[s][1]->stats().lost() +
                                   fab.up[0][s]->stats().lost() + fab.up[1][s]->stats().lost()}});
  }
  const Duration elapsed = st.last_completion - st.first_post;
  const double secs = static_cast<double>(elapsed.ps) / 1e12;
  const double goodput = secs > 0 ? static_cast<double>(st.bytes_done) * 8 / secs / 1e9 : 0;
  const LinkStats ls = net.total_link_stats();
  rep.event("paths", {{"per_spine", spines}});
  Json hosts = Json::array();
  for (Host* h : {&a, &b}) {
    Json row = {{"host", h->name()}};
    row.update(to_json(h->engine().stats()));
    hosts.push_back(row);
  }
  rep.event("engine", {{"per_host", hosts}});
  rep.event("fabric", to_json(ls));
  Json sum = {{"scenario", fr.name},
              {"ok", data_ok},
              {"seed", opt.seed},
              {"bytes", st.bytes_done},
              {"sim_time_us", to_us(elapsed)},
              {"goodput_gbps", goodput},
              {"completions", {{"write", st.by_op[0]}, {"send", st.by_op[1]}, {"read", st.by_op[2]},
                               {"recv", st.recv_completed}, {"errors", st.errors}}},
              {"retransmits", es.retransmits},
              {"naks", es.naks_sent},
              {"rnr_naks", es.rnr_naks_sent},
              {"timeouts", es.timeouts},
              {"frames_lost", ls.lost()},
              {"bad_icrc", es.rx_bad_icrc},
              {"data_verified", data_ok},
              {"events", sim.events_run()}};
  if (!data_ok) sum["error"] = why;
  if (pcap) sum["pcap_frames"] = pcap->frames();
  rep.summary(sum);
  return data_ok ? 0 : 1;
}
}  // namespace

int scenario_demo(const ScenarioOptions& opt, Reporter& rep) {
  return run_fabric_transfer(opt, rep, {64ull << 20, 1u << 20, 4, 0.01, Mtu::k4096, "demo"}, nullptr,
                             nullptr);
}

int scenario_lossy_rc(const ScenarioOptions& opt, Reporter& rep) {
  // Every impairment at once on the spine->leaf links: 0.5% random loss,
  // Gilbert-Elliott bursts (mean burst 4 frames, ~0.5% of the time), 1%
  // reordered by 5 us, 0.5% duplicated, 0.2% corrupted.
  return run_fabric_transfer(
      opt, rep, {16ull << 20, 256u << 10, 4, 0.005, Mtu::k1024, "lossy-rc"},
      [&](LeafSpineConfig& lc) {
        auto& imp = lc.downlink.impair;
        imp.burst = {0.0012, 0.25, 0.0, 1.0};
        imp.reorder = opt.param_f64("reorder", 0.01);
        imp.reorder_delay = Duration::micros(5);
        imp.duplicate = opt.param_f64("dup", 0.005);
        imp.corrupt = opt.param_f64("corrupt", 0.002);
      },
      nullptr);
}

int scenario_link_flap(const ScenarioOptions& opt, Reporter& rep) {
  // Spine 1 dies for 2 ms starting 0.5 ms in (both directions, both leaves);
  // routing does not converge around it, so the lanes hashed onto it see
  // total loss until it returns.
  const Time t1 = Time{} + Duration::micros(static_cast<int64_t>(opt.param_u64("down_us", 500)));
  const Time t2 = t1 + Duration::micros(static_cast<int64_t>(opt.param_u64("outage_us", 2000)));
  return run_fabric_transfer(
      opt, rep, {16ull << 20, 256u << 10, 4, 0.0, Mtu::k4096, "link-flap"}, nullptr,
      [&](Network& net, LeafSpine& fab) {
        for (auto& per_leaf : fab.up) per_leaf[1]->impairments().outages.push_back({t1, t2});
        for (Link* l : fab.down[1]) l->impairments().outages.push_back({t1, t2});
        // --set reroute_us=N: the fabric converges N us after each change
        // (routes recomputed without the dead links, then with them again).
        const bool reroute = opt.params.count("reroute_us") != 0;
        if (reroute) {
          const Duration conv = Duration::micros(static_cast<int64_t>(opt.param_u64("reroute_us", 100)));
          net.reroute_at(t1 + conv);
          net.reroute_at(t2 + conv);
        }
        rep.event("outage", {{"spine", 1}, {"down_us", to_us(t1)}, {"up_us", to_us(t2)},
                             {"reroute", reroute}});
      });
}

}  // namespace sroce::sim
