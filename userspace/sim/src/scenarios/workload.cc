// workload: datacenter traffic on a leaf-spine or fat-tree of engine-driven
// hosts, no congestion control (the engine's QPs run as they are), with the
// switch model of switch.h. Prints FCT slowdown percentiles (overall and by
// size), queue length p99, PFC pauses, drops/trims, link utilisation, goodput,
// per-spine/core counters and the simulator's events per second.
//
//   sroce-sim run workload --set topo=leaf-spine --set hosts=128
//     --set traffic=websearch --set load=0.5 --set duration_us=10000
//     [--set event_order=causal]
//
// Progress goes to stderr (one line per `progress_us` of simulated time).
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "sroce/sim/flows.h"
#include "sroce/sim/metrics.h"
#include "sroce/sim/topology.h"
#include "sroce/sim/traffic.h"
#include "util.h"

namespace sroce::sim {

namespace {

SwitchConfig switch_config(const ScenarioOptions& opt, uint64_t link_bps) {
  SwitchConfig c;
  c.mmu = opt.param_u64("mmu", 1) != 0;
  c.buffer_bytes = opt.param_u64("buffer_kb", 32 * 1024) * 1024;
  c.dt_alpha = opt.param_f64("alpha", 1.0);
  c.trim = opt.param_u64("trim", 0) != 0;
  c.trim_keep_bytes = static_cast<uint32_t>(opt.param_u64("trim_keep_bytes", 64));
  c.pfc.enabled = opt.param_u64("pfc", 1) != 0;
  c.pfc.xoff_bytes = opt.param_u64("xoff_kb", 256) * 1024;
  c.pfc.xon_bytes = opt.param_u64("xon_kb", 224) * 1024;
  c.ecn.enabled = opt.param_u64("ecn", 1) != 0;
  // DCQCN's 40 Gbit/s thresholds scaled to the link rate (section 5 of the
  // paper: Kmin 5 KB, Kmax 200 KB, Pmax 1 %).
  const double scale = static_cast<double>(link_bps) / 40e9;
  c.ecn.kmin_bytes = opt.param_u64("kmin_bytes", static_cast<uint64_t>(5'000 * scale));
  c.ecn.kmax_bytes = opt.param_u64("kmax_bytes", static_cast<uint64_t>(200'000 * scale));
  c.ecn.pmax = opt.param_f64("pmax", 0.01);
  c.int_stamp = opt.param_u64("int", 1) != 0;
  c.sb_flag_fraction = opt.param_f64("sb_flag", 0.5);
  return c;
}

double max_rss_mb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

// A digest of the run's outcome: every flow's completion time (ps, or -1 if
// it did not finish, -2 on error) in flow order, and the number of events.
// Two runs of the same seed and build agree on it exactly; the tests pin it
// for a small run so a change to the simulator's speed that changes a result
// is caught (tests/unit/sim/CMakeLists.txt, sim.scenario.workload-digest).
std::string fct_digest(const std::vector<FlowRecord>& flows, uint64_t events) {
  uint64_t h = 0xcbf29ce484222325ull;
  auto add = [&h](uint64_t v) { h = Rng::mix(h ^ v) * 0x100000001b3ull; };
  for (const FlowRecord& f : flows)
    add(f.error ? static_cast<uint64_t>(-2) : f.done() ? static_cast<uint64_t>(f.end.ps)
                                                       : static_cast<uint64_t>(-1));
  add(events);
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

Json dist_json(const Dist& d) {
  return {{"count", d.count}, {"p50", d.p50},   {"p95", d.p95},
          {"p99", d.p99},     {"mean", d.mean}, {"max", d.max}};
}

}  // namespace

int scenario_workload(const ScenarioOptions& opt, Reporter& rep) {
  const auto wall0 = std::chrono::steady_clock::now();
  const std::string topo = opt.param_str("topo", "leaf-spine");
  const std::string traffic = opt.param_str("traffic", "websearch");
  const uint64_t host_bps = opt.param_u64("host_gbps", 100) * 1'000'000'000ull;
  const uint64_t fabric_bps =
      opt.param_u64("fabric_gbps", host_bps / 1'000'000'000ull) * 1'000'000'000ull;
  const Duration delay = Duration::nanos(static_cast<int64_t>(opt.param_u64("delay_ns", 1000)));
  const Duration duration =
      Duration::micros(static_cast<int64_t>(opt.param_u64("duration_us", 1000)));
  const Duration drain = Duration::micros(
      static_cast<int64_t>(opt.param_u64("drain_us", opt.param_u64("duration_us", 1000))));
  const uint64_t mtu = opt.param_u64("mtu", 4096);
  const double load = opt.param_f64("load", 0.5);
  uint32_t nhosts = static_cast<uint32_t>(opt.param_u64("hosts", 128));

  // The tie-break of same-picosecond events (simulator.h): "schedule" (the
  // default, today's digests) or "causal" (the order a parallel run can keep).
  const std::string order = opt.param_str("event_order", "schedule");
  if (order != "schedule" && order != "causal") {
    rep.summary({{"scenario", "workload"},
                 {"ok", false},
                 {"error", "event_order must be schedule or causal, not " + order}});
    return 1;
  }
  Simulator sim(opt.seed, order == "causal" ? EventOrder::kCausal : EventOrder::kScheduleOrder);
  Network net(sim);
  bool pcap_failed = false;
  auto pcap = attach_pcap(net, opt, rep, &pcap_failed);
  if (pcap_failed) return 1;

  FlowRunnerConfig fc;
  fc.qp.mtu = mtu_of(mtu);
  // Send queue depth: a flow's WRITEs beyond it wait in the runner (flows.h).
  fc.qp.send_wr = static_cast<uint32_t>(opt.param_u64("send_wr", 64));
  // One CQ per host, drained after every engine call: it holds at most the
  // completions of one call (one QP's send queue, or a few).
  fc.qp.cqe = static_cast<uint32_t>(opt.param_u64("cqe", 1024));
  // Idle QPs a host keeps (flows.h): the rest are closed, so memory follows
  // the flows in progress. 0 keeps every QP.
  fc.idle_qps_per_host = static_cast<uint32_t>(opt.param_u64("idle_qps", 4));
  // Open client QPs per host (flows.h): flows beyond them wait for one to go
  // idle. 0: no bound. An all-to-all step at scale needs it (a QP pair per
  // host pair at once is 2 M QP ends at 1024 hosts).
  fc.max_open_qps_per_host = static_cast<uint32_t>(opt.param_u64("max_open_qps", 0));
  fc.chunk_bytes = static_cast<uint32_t>(opt.param_u64("chunk", 1u << 20));
  fc.verify = opt.param_u64("verify", 0) != 0;
  HostConfig hc;
  hc.engine.seed = opt.seed;
  hc.engine.port_mtu = fc.qp.mtu;
  // The fabric does not corrupt frames here: skip the software ICRC (it is
  // most of the engine's cost at 4 KiB; engine-bench measures it separately).
  hc.engine.icrc_offload = opt.param_u64("icrc", 0) == 0;
  // The engine's lossy mode (selective repeat, lanes, trimmed packets as
  // retransmission requests) is offered by default and negotiated per QP.
  // Without verify the payload is not checked: let the engine skip copying it
  // (`payload=1` copies anyway).
  hc.discard_payload = !fc.verify && opt.param_u64("payload", 0) == 0;
  hc.engine.lossy.enable = opt.param_u64("lossy", 1) != 0;
  hc.engine.lossy.lanes = static_cast<uint16_t>(opt.param_u64("lanes", hc.engine.lossy.lanes));
  hc.engine.lossy.train_bytes =
      static_cast<uint32_t>(opt.param_u64("train_bytes", hc.engine.lossy.train_bytes));
  hc.arena_bytes =
      opt.param_u64("arena_kb", fc.verify ? 64 * 1024 : 2 * fc.chunk_bytes / 1024 + 64) * 1024;

  LinkConfig hl;
  hl.rate_bps = host_bps;
  hl.delay = delay;
  LinkConfig fl = hl;
  fl.rate_bps = fabric_bps;
  LinkConfig lossy = fl;
  lossy.impair.loss = opt.param_f64("loss", 0);

  std::vector<Host*> hosts;
  std::vector<Switch*> top;  // spines or cores: per-path counters
  std::vector<std::string> top_names;
  Json topo_json;
  if (topo == "fat-tree") {
    FatTreeConfig ft;
    ft.k = static_cast<uint32_t>(opt.param_u64("k", 0));
    if (ft.k == 0) {  // the smallest k with k^3/4 >= hosts
      ft.k = 2;
      while (ft.k * ft.k * ft.k / 4 < nhosts) ft.k += 2;
    }
    ft.host_link = hl;
    ft.edge_agg = fl;
    ft.agg_core = lossy;
    ft.sw = switch_config(opt, fabric_bps);
    FatTree t = build_fat_tree(net, ft, hc);
    hosts = t.hosts;
    top = t.cores;
    topo_json = {{"topology", "fat-tree"}, {"k", ft.k}, {"cores", t.cores.size()}};
  } else if (topo == "leaf-spine") {
    LeafSpineConfig lc;
    lc.hosts_per_leaf = static_cast<uint32_t>(opt.param_u64("hosts_per_leaf", 16));
    lc.leaves = std::max<uint32_t>(1, (nhosts + lc.hosts_per_leaf - 1) / lc.hosts_per_leaf);
    // Default: no oversubscription (spine capacity = host capacity per leaf).
    lc.spines = static_cast<uint32_t>(
        opt.param_u64("spines", std::max<uint64_t>(1, lc.hosts_per_leaf * host_bps / fabric_bps)));
    lc.host_link = hl;
    lc.uplink = fl;
    lc.downlink = lossy;
    lc.sw = switch_config(opt, fabric_bps);
    // spine_delay_ns=1000,2000,...: spine s's links (both ways) get delay s.
    if (auto it = opt.params.find("spine_delay_ns"); it != opt.params.end()) {
      const std::string& v = it->second;
      for (size_t pos = 0; pos < v.size();) {
        size_t comma = v.find(',', pos);
        if (comma == std::string::npos) comma = v.size();
        const auto ns = std::strtoll(v.substr(pos, comma - pos).c_str(), nullptr, 10);
        lc.uplink_per_spine.push_back(lc.uplink);
        lc.uplink_per_spine.back().delay = Duration::nanos(ns);
        lc.downlink_per_spine.push_back(lc.downlink);
        lc.downlink_per_spine.back().delay = Duration::nanos(ns);
        pos = comma + 1;
      }
    }
    LeafSpine t = build_leaf_spine(net, lc, hc);
    hosts = t.hosts;
    top = t.spines;
    topo_json = {{"topology", "leaf-spine"},
                 {"leaves", lc.leaves},
                 {"spines", lc.spines},
                 {"hosts_per_leaf", lc.hosts_per_leaf}};
    // A spine that blackholes mid-run: its links go down, routes stay (the
    // flows hashed onto it stall until the transport gives up or recovers).
    if (opt.params.count("blackhole_us") != 0) {
      const Time at =
          Time{} + Duration::micros(static_cast<int64_t>(opt.param_u64("blackhole_us", 0)));
      Switch* victim = t.spines[opt.param_u64("blackhole_spine", 0) % t.spines.size()];
      for (const auto& l : net.links())
        if (&l->from() == victim || &l->to() == victim)
          l->impairments().outages.push_back({at, Time::never()});
    }
  } else {
    rep.summary({{"scenario", "workload"},
                 {"ok", false},
                 {"error", "topo must be leaf-spine or fat-tree"}});
    return 1;
  }
  nhosts = static_cast<uint32_t>(hosts.size());

  Rng trng(Rng::mix(opt.seed ^ 0x7aff1cull));
  std::vector<FlowSpec> specs;
  const uint64_t bytes = opt.param_u64("bytes", 1u << 20);
  if (traffic == "incast") {
    const uint32_t fanin =
        static_cast<uint32_t>(std::min<uint64_t>(opt.param_u64("fanin", 16), nhosts - 1));
    std::vector<uint32_t> srcs;
    // Senders spread over the fabric: every k-th host after the receiver 0.
    for (uint32_t i = 0; i < fanin; ++i)
      srcs.push_back(1 + static_cast<uint32_t>(uint64_t{i} * (nhosts - 1) / fanin));
    specs = incast_flows(srcs, 0, bytes);
  } else if (traffic == "permutation") {
    specs = permutation_flows(nhosts, bytes, trng);
  } else if (traffic == "ring") {
    specs = ring_flows(nhosts, bytes);
  } else if (traffic == "alltoall") {
    specs = all_to_all_flows(nhosts, bytes, opt.param_f64("skew", 0), trng);
  } else {
    auto cdf = FlowSizeCdf::named(traffic, opt.param_str("cdf_dir", ""));
    if (!cdf) {
      rep.summary({{"scenario", "workload"}, {"ok", false}, {"error", cdf.error().message}});
      return 1;
    }
    specs = poisson_flows(nhosts, *cdf, load, host_bps, duration, trng);
  }
  const bool open_loop = traffic != "incast" && traffic != "permutation" &&
                         traffic != "alltoall" && traffic != "ring";

  FlowRunner runner(net, hosts, fc);
  if (auto r = runner.setup(); !r) {
    rep.summary({{"scenario", "workload"}, {"ok", false}, {"error", r.error().message}});
    return 1;
  }
  if (auto r = runner.add(specs); !r) {
    rep.summary({{"scenario", "workload"}, {"ok", false}, {"error", r.error().message}});
    return 1;
  }
  uint64_t offered = 0;
  for (const auto& f : specs) offered += f.bytes;
  Json start = {{"scenario", "workload"}, {"seed", opt.seed},      {"traffic", traffic},
                {"hosts", nhosts},        {"flows", specs.size()}, {"offered_bytes", offered}};
  start.update(topo_json);
  rep.event("start", start);

  const auto wall_run0 = std::chrono::steady_clock::now();
  const double setup_wall = std::chrono::duration<double>(wall_run0 - wall0).count();
  // Run: to the end of the arrivals, then at most `drain` more, stopping as
  // soon as every flow has completed. Progress on stderr.
  const Time end = Time{} + duration + drain;
  const Duration step = Duration::micros(static_cast<int64_t>(opt.param_u64("progress_us", 1000)));
  const bool progress = opt.param_u64("progress", 1) != 0;
  Time t = Time{};
  auto engine_bytes = [&] {
    uint64_t n = 0;
    for (Host* h : hosts) n += h->engine().memory_bytes();
    return n;
  };
  uint64_t engine_peak = engine_bytes();
  uint64_t qps_open_peak = 0;
  while (
      t < end &&
      !(runner.all_done() && runner.started() == specs.size() && sim.now() >= Time{} + duration) &&
      sim.pending() > 0) {
    t = std::min(end, t + step);
    sim.run(t);
    engine_peak = std::max(engine_peak, engine_bytes());
    qps_open_peak = std::max<uint64_t>(qps_open_peak, runner.qps_open());
    if (progress) {
      const double wall =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_run0).count();
      std::fprintf(stderr,
                   "workload: t=%.0f us flows %llu/%llu done, %llu events, %.2f M events/s\n",
                   to_us(sim.now()), static_cast<unsigned long long>(runner.completed()),
                   static_cast<unsigned long long>(specs.size()),
                   static_cast<unsigned long long>(sim.events_run()),
                   static_cast<double>(sim.events_run()) / std::max(wall, 1e-9) / 1e6);
    }
    if (!open_loop && runner.all_done()) break;
  }
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_run0).count();
  const Time stop = sim.now();

  // Metrics.
  std::vector<Duration> ideal(specs.size());
  const uint32_t mtu_payload = static_cast<uint32_t>(mtu);
  for (size_t i = 0; i < specs.size(); ++i)
    ideal[i] = ideal_fct(first_path(net, *hosts[specs[i].src], *hosts[specs[i].dst]),
                         specs[i].bytes, mtu_payload, fc.chunk_bytes);
  const FctReport fr = fct_report(runner.flows(), ideal);
  LogHistogram qh;
  uint64_t pfc = 0, trimmed = 0, ecn = 0, drops = 0, sbflag = 0, max_buf = 0;
  for (const auto& n : net.nodes()) {
    if (n->kind() != NodeKind::kSwitch) continue;
    const auto& s = static_cast<const Switch&>(*n);
    qh.merge(s.queue_histogram());
    pfc += s.stats().pfc_xoff;
    trimmed += s.stats().trimmed;
    ecn += s.stats().ecn_marked;
    drops += s.stats().egress_drops;
    sbflag += s.stats().sb_flagged;
    max_buf = std::max(max_buf, s.stats().max_buffer_bytes);
  }
  const double secs = static_cast<double>(stop.ps) * 1e-12;
  auto util = [&](const Link& l) {
    return secs > 0 ? static_cast<double>(l.stats().tx_wire_bytes) * 8 /
                          (static_cast<double>(l.config().rate_bps) * secs)
                    : 0;
  };
  double host_down_sum = 0, host_down_max = 0, fab_sum = 0, fab_max = 0;
  uint64_t host_down_n = 0, fab_n = 0, paused_ps = 0;
  for (const auto& l : net.links()) {
    paused_ps += l->stats().paused_ps;
    const double u = util(*l);
    if (l->to().kind() == NodeKind::kHost) {
      host_down_sum += u;
      host_down_max = std::max(host_down_max, u);
      ++host_down_n;
    } else if (l->from().kind() == NodeKind::kSwitch && l->to().kind() == NodeKind::kSwitch) {
      fab_sum += u;
      fab_max = std::max(fab_max, u);
      ++fab_n;
    }
  }
  Json per_top = Json::array();
  for (Switch* s : top) {
    uint64_t tx = 0, bytes_tx = 0, q = 0, dr = 0, tr = 0;
    for (const Link* l : s->out_links()) {
      tx += l->stats().tx_frames;
      bytes_tx += l->stats().tx_wire_bytes;
      q = std::max(q, l->stats().max_queue_bytes);
      dr += l->stats().queue_drops + l->stats().lost();
      tr += l->stats().trimmed;
    }
    per_top.push_back({{"switch", s->name()},
                       {"tx_frames", tx},
                       {"tx_bytes", bytes_tx},
                       {"max_queue_bytes", q},
                       {"drops", dr},
                       {"trimmed", tr}});
  }
  uint64_t stalls = 0, rx_ce = 0, rx_trim = 0, rx_sb = 0, rx_int = 0;
  EngineStats es{};
  for (Host* h : hosts) {
    es = es + h->engine().stats();
    stalls += h->stats().stalls;
    rx_ce += h->stats().rx_ecn_ce;
    rx_trim += h->stats().rx_trimmed;
    rx_sb += h->stats().rx_sb_flag;
    rx_int += h->stats().rx_int;
  }
  const LinkStats tot = net.total_link_stats();

  Json buckets = Json::array();
  for (const auto& b : fr.buckets)
    buckets.push_back(
        {{"size", b.name}, {"slowdown", dist_json(b.slowdown)}, {"fct_us", dist_json(b.fct_us)}});
  const bool finite_ok = open_loop || runner.completed() == specs.size();
  const bool ok = runner.errors() == 0 && stalls == 0 && finite_ok && (!fc.verify || [&] {
                    std::string why;
                    const bool v = runner.verify(&why);
                    if (!v) rep.error(why);
                    return v;
                  }());
  if (opt.param_u64("links", 0) != 0) {
    Json links = Json::array();
    for (const auto& l : net.links())
      if (l->from().kind() == NodeKind::kSwitch)
        links.push_back({{"link", l->name()},
                         {"util", util(*l)},
                         {"tx_frames", l->stats().tx_frames},
                         {"max_queue_bytes", l->stats().max_queue_bytes},
                         {"drops", l->stats().queue_drops},
                         {"trimmed", l->stats().trimmed},
                         {"ecn_marked", l->stats().ecn_marked},
                         {"pfc_pauses", l->stats().pfc_pauses}});
    rep.event("links", {{"links", links}});
  }
  Json sum = {
      {"scenario", "workload"},
      {"ok", ok},
      {"traffic", traffic},
      {"hosts", nhosts},
      {"load", open_loop ? load : 0.0},
      {"duration_us", to_us(Time{} + duration)},
      {"sim_end_us", to_us(stop)},
      // When the last flow completed: a collective step's duration.
      {"last_end_us", [&] {
         Time last{};
         for (const auto& f : runner.flows())
           if (f.done()) last = std::max(last, f.end);
         return to_us(last);
       }()},
      {"flows", specs.size()},
      {"completed", runner.completed()},
      {"incomplete", specs.size() - runner.completed()},
      {"flow_errors", runner.errors()},
      // Neither completed nor failed: still running, or stuck.
      {"flows_unresolved", specs.size() - runner.completed() - runner.errors()},
      {"qps", runner.qps()},
      {"qps_open", runner.qps_open()},
      {"qps_open_peak", qps_open_peak},
      {"qps_closed", runner.qps_closed()},
      {"flows_waited", runner.flows_waited()},
      {"p50_slowdown", fr.slowdown.p50},
      {"p95_slowdown", fr.slowdown.p95},
      {"p99_slowdown", fr.slowdown.p99},
      {"slowdown", dist_json(fr.slowdown)},
      {"fct_us", dist_json(fr.fct_us)},
      {"by_size", buckets},
      {"queue_p99_bytes", qh.quantile(0.99)},
      {"queue_max_bytes", qh.max()},
      {"buffer_max_bytes", max_buf},
      {"pfc_pauses", pfc},
      {"pfc_paused_us", static_cast<double>(paused_ps) * 1e-6},
      {"switch_drops", drops},
      {"link_losses", tot.lost()},
      {"trimmed", trimmed},
      {"ecn_marked", ecn},
      {"sb_flagged", sbflag},
      {"host_rx",
       {{"ecn_ce", rx_ce}, {"trimmed", rx_trim}, {"sb_flag", rx_sb}, {"int_stamped", rx_int}}},
      {"goodput_gbps",
       secs > 0 ? static_cast<double>(runner.bytes_completed()) * 8 / secs / 1e9 : 0},
      {"goodput_per_host_gbps",
       secs > 0 ? static_cast<double>(runner.bytes_completed()) * 8 / secs / 1e9 / nhosts : 0},
      {"offered_load",
       static_cast<double>(offered) * 8 /
           (static_cast<double>(host_bps) * nhosts * static_cast<double>(duration.ps) * 1e-12)},
      {"util_host_down_mean", host_down_n ? host_down_sum / static_cast<double>(host_down_n) : 0},
      {"util_host_down_max", host_down_max},
      {"util_fabric_mean", fab_n ? fab_sum / static_cast<double>(fab_n) : 0},
      {"util_fabric_max", fab_max},
      {"engine", to_json(es)},
      {"stalls", stalls},
      // Memory (docs/sim.md, "Scale"): the process's peak resident set; the
      // engines' own accounting (all hosts) at its peak over the progress
      // steps and at the end; the open QPs' share of it per QP end.
      {"max_rss_mb", max_rss_mb()},
      {"engine_bytes_peak", engine_peak},
      {"engine_bytes_end", engine_bytes()},
      {"bytes_per_qp",
       runner.qps_open() > 0 ? runner.qp_memory_bytes() / (2 * runner.qps_open()) : 0},
      // The packet pool (packet.h): slots it ever held (in chunks of 256),
      // full-size bodies among them, and the bytes of both.
      {"packets_peak", net.pool().capacity()},
      {"packet_bodies_peak", net.pool().bodies()},
      {"packet_pool_bytes", net.pool().memory_bytes()},
      {"events", sim.events_run()},
      {"fct_digest", fct_digest(runner.flows(), sim.events_run())},
      {"event_order", order},
      {"setup_wall_s", setup_wall},
      {"run_wall_s", wall},
      {"events_per_s", static_cast<double>(sim.events_run()) / std::max(wall, 1e-9)},
      {"per_top_switch", per_top}};
  sum.update(topo_json);
  if (!runner.first_error().empty()) sum["error"] = runner.first_error();
  rep.summary(sum);
  return ok ? 0 : 1;
}

}  // namespace sroce::sim
