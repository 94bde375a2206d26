// One congestion-control case on a leaf-spine (cc_eval.h). Parameters
// (--set key=value), with the CI-sized defaults:
//
//   hosts=16 hosts_per_leaf=8 spines=(hosts_per_leaf: no oversubscription)
//   host_gbps=100 delay_ns=1000 mtu=4096
//   buffer_kb=8192 xoff_kb=256 xon_kb=224    shared buffer per switch, PFC per ingress
//   kmin_kb=12 kmax_kb=500 pmax=0.2          RED/ECN at dequeue (DCQCN's 40G values x 2.5;
//                                            Pmax as the cc lab: docs/cc/README.md)
//   sb_flag=0.125                            Odin's shared-buffer flag level (of buffer)
//   trim=0                                   lossy runs: switch trimming
//   hpcc_eta=0.95                            HPCC's (and Odin's) target utilisation
//   hpcc_max_stage=(HpccConfig)              HPCC's (and Odin's) maxStage
//   odin_headroom=(OdinConfig)               Odin's NIC-ratio window headroom
//   odin_fair_floor=1                        Odin's ratio floor at the NIC's equal share
//   delay_pace=1                             0: Swift paced per srtt below one packet (old)
//   ack_timeout=8                            local ACK timeout, IBA exponent (1.05 ms)
//   incast:    fanin=15 bytes=524288 stagger_us=0 (flow i starts at i x stagger)
//   alltoall:  bytes=4194304 (per source, split over the others) skew=1 (Zipf-like
//              toward a few hot receivers, as MoE dispatch; 0 = uniform)
//   websearch / fbhdp: load=0.5 duration_us=300
//   drain_us=100000                          run limit after the arrivals (ends when all done)
//   warmup=1 (lossy runs): one 4 KiB flow per host pair at t=0 so that every QP
//   has negotiated lossy mode before the measured flows start at warmup_us=40.
#include "sroce/sim/cc_eval.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>

#include "sroce/sim/flows.h"
#include "sroce/sim/metrics.h"
#include "sroce/sim/topology.h"
#include "sroce/sim/traffic.h"
#include "util.h"

namespace sroce::sim {

namespace {

Json dist_json(const Dist& d) {
  return {{"count", d.count}, {"p50", d.p50}, {"p95", d.p95}, {"p99", d.p99}, {"max", d.max}};
}

// The flows' FCT slowdowns under ideal max-min fair sharing of the hosts'
// NICs (a fluid model: each flow gets its max-min fair rate over its
// sender's transmit and its receiver's receive capacity, recomputed at every
// start and end; the leaf-spine core is taken as non-blocking and the path
// latency as in `ideal`). It is what a perfect per-flow fair controller with
// no headroom and no queue would give: last-hop fan-in and the NIC sharing
// of all-to-all are in it, congestion control is not (docs/results/cc.md).
Json fair_share_slowdowns(const std::vector<FlowSpec>& specs, const std::vector<Duration>& ideal,
                          uint32_t nhosts, double payload_bps) {
  const size_t n = specs.size();
  std::vector<size_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return specs[a].start < specs[b].start; });
  std::vector<double> left(n), rate(n, 0), done_at(n, -1);
  for (size_t i = 0; i < n; ++i) left[i] = static_cast<double>(specs[i].bytes) * 8;
  std::vector<size_t> active;
  size_t next = 0;
  double now = 0;  // seconds
  const auto start_s = [&](size_t i) { return static_cast<double>(specs[i].start.ps) * 1e-12; };
  std::vector<double> cap(2 * nhosts);
  std::vector<uint32_t> cnt(2 * nhosts);
  std::vector<char> frozen;
  while (next < n || !active.empty()) {
    if (active.empty()) now = std::max(now, start_s(order[next]));
    while (next < n && start_s(order[next]) <= now) active.push_back(order[next++]);
    // Progressive filling over the 2 x nhosts NIC resources.
    std::fill(cap.begin(), cap.end(), payload_bps);
    frozen.assign(active.size(), 0);
    for (size_t k = 0; k < active.size(); ++k) rate[active[k]] = 0;
    size_t unfrozen = active.size();
    while (unfrozen > 0) {
      std::fill(cnt.begin(), cnt.end(), 0);
      for (size_t k = 0; k < active.size(); ++k)
        if (!frozen[k]) {
          ++cnt[specs[active[k]].src];
          ++cnt[nhosts + specs[active[k]].dst];
        }
      double inc = 1e300;
      for (size_t r = 0; r < cap.size(); ++r)
        if (cnt[r] > 0) inc = std::min(inc, cap[r] / cnt[r]);
      for (size_t k = 0; k < active.size(); ++k)
        if (!frozen[k]) {
          rate[active[k]] += inc;
          cap[specs[active[k]].src] -= inc;
          cap[nhosts + specs[active[k]].dst] -= inc;
        }
      for (size_t k = 0; k < active.size(); ++k)
        if (!frozen[k] && (cap[specs[active[k]].src] <= payload_bps * 1e-9 ||
                           cap[nhosts + specs[active[k]].dst] <= payload_bps * 1e-9)) {
          frozen[k] = 1;
          --unfrozen;
        }
    }
    double dt = next < n ? start_s(order[next]) - now : 1e300;
    for (size_t f : active) dt = std::min(dt, left[f] / rate[f]);
    now += dt;
    std::vector<size_t> still;
    for (size_t f : active) {
      left[f] -= rate[f] * dt;
      if (left[f] <= 1e-3)
        done_at[f] = now;
      else
        still.push_back(f);
    }
    active.swap(still);
  }
  std::vector<double> sd;
  for (size_t i = 0; i < n; ++i) {
    const double alone = static_cast<double>(specs[i].bytes) * 8 / payload_bps;
    const double id = static_cast<double>(ideal[i].ps) * 1e-12;
    const double fct = done_at[i] - start_s(i) + (id - alone);
    sd.push_back(std::max(1.0, fct / id));
  }
  return {{"p99_slowdown", percentile(sd, 0.99)},
          {"p95_slowdown", percentile(sd, 0.95)},
          {"p50_slowdown", percentile(sd, 0.50)}};
}

}  // namespace

CcResult run_cc_case(const ScenarioOptions& opt, const std::string& traffic, const CcCase& c) {
  const auto wall0 = std::chrono::steady_clock::now();
  CcResult res;
  const uint64_t host_bps = opt.param_u64("host_gbps", 100) * 1'000'000'000ull;
  const Duration delay = Duration::nanos(static_cast<int64_t>(opt.param_u64("delay_ns", 1000)));
  const uint64_t mtu = opt.param_u64("mtu", 4096);
  const uint32_t nhosts_req = static_cast<uint32_t>(opt.param_u64("hosts", 16));

  Simulator sim(opt.seed);
  Network net(sim);

  FlowRunnerConfig fc;
  fc.qp.mtu = mtu_of(mtu);
  fc.qp.send_wr = 512;
  fc.qp.cqe = 8192;
  fc.chunk_bytes = static_cast<uint32_t>(opt.param_u64("chunk", 1u << 20));
  // Local ACK timeout (IBA 9.7.6.1.3: 4.096 us x 2^t; default 8 = 1.05 ms).
  // Above the deepest queue (--set ack_timeout=10 with the bench's 32 MB)
  // it removes the spurious timeouts of a lossy incast but slows it: in
  // lossy mode the RTO also repairs tail drops (docs/results/cc.md).
  fc.qp.timeout = static_cast<uint8_t>(opt.param_u64("ack_timeout", fc.qp.timeout));

  HostConfig hc;
  hc.engine.seed = opt.seed;
  hc.engine.port_mtu = fc.qp.mtu;
  hc.engine.icrc_offload = true;  // the fabric corrupts nothing here
  hc.discard_payload = true;
  hc.arena_bytes = 2ull * fc.chunk_bytes + (64u << 10);
  hc.engine.lossy.enable = !c.lossless;
  hc.engine.lossy.lanes = static_cast<uint16_t>(opt.param_u64("lanes", hc.engine.lossy.lanes));
  // The unloaded RTT of the longest path (host-leaf-spine-leaf-host and
  // back): 8 propagation delays, a full frame serialised on the 4 forward
  // hops and an ACK on the 4 reverse ones (HPCC's T).
  const Duration frame = cc::tx_time(static_cast<double>(mtu + 66), static_cast<double>(host_bps));
  const Duration ackf = cc::tx_time(128.0, static_cast<double>(host_bps));
  const Duration base_rtt = Duration::picos(8 * delay.ps + 4 * frame.ps + 4 * ackf.ps);
  hc.engine.cc.enable = c.cc;
  hc.engine.cc.line_rate_bps = host_bps;
  hc.engine.cc.base_rtt = base_rtt;
  hc.engine.cc.config.algorithm = c.alg;
  hc.engine.cc.config.odin.buffer_flag = c.odin_flag;
  hc.engine.cc.config.odin.nic_ratio = c.odin_ratio;
  hc.engine.cc.config.odin.compensation = c.odin_comp;
  // HPCC's target utilisation (paper: 0.95; the authors' later published
  // runs use 0.99), for HPCC and Odin alike.
  hc.engine.cc.config.hpcc.eta = opt.param_f64("hpcc_eta", hc.engine.cc.config.hpcc.eta);
  hc.engine.cc.config.odin.hpcc.eta = opt.param_f64("hpcc_eta", hc.engine.cc.config.odin.hpcc.eta);
  // maxStage (HPCC Algorithm 1), for HPCC and Odin alike (docs/cc/hpcc.md).
  const auto max_stage = static_cast<uint32_t>(
      opt.param_u64("hpcc_max_stage", hc.engine.cc.config.hpcc.max_stage));
  hc.engine.cc.config.hpcc.max_stage = max_stage;
  hc.engine.cc.config.odin.hpcc.max_stage = max_stage;
  // Odin part 2's window headroom (docs/cc/odin.md).
  hc.engine.cc.config.odin.nic_window_headroom =
      opt.param_f64("odin_headroom", hc.engine.cc.config.odin.nic_window_headroom);
  hc.engine.cc.config.odin.nic_fair_floor =
      opt.param_u64("odin_fair_floor", hc.engine.cc.config.odin.nic_fair_floor ? 1 : 0) != 0;
  // delay_pace=0: the first version's pacing below one packet (per srtt).
  hc.engine.cc.config.delay.pace_at_target = opt.param_u64("delay_pace", 1) != 0;
  // LTP: which policy, and the delay rule (as configured above) as its fallback.
  hc.engine.cc.config.ltp.variant = c.ltp;
  hc.engine.cc.config.ltp.net = c.ltp_net;
  hc.engine.cc.config.ltp.filter.track_info_gain = c.ltp_info_gain;
  hc.engine.cc.config.ltp.fallback = hc.engine.cc.config.delay;
  // LTP's deployment-side knobs (not in the policy; docs/cc/ltp.md): the
  // saturation cut and the queue guard (ltp_guard_ns, 0 = off).
  auto& ltpc = hc.engine.cc.config.ltp;
  ltpc.saturation_cut = opt.param_f64("ltp_sat_cut", ltpc.saturation_cut);
  ltpc.start_rate = opt.param_f64("ltp_start", ltpc.start_rate);
  if (opt.params.count("ltp_guard_ns"))
    ltpc.guard_queue = Duration::nanos(static_cast<int64_t>(opt.param_u64("ltp_guard_ns", 0)));
  ltpc.guard_beta = opt.param_f64("ltp_guard_beta", ltpc.guard_beta);
  ltpc.guard_max_cut = opt.param_f64("ltp_guard_max_cut", ltpc.guard_max_cut);

  SwitchConfig sw;
  sw.mmu = true;
  sw.buffer_bytes = opt.param_u64("buffer_kb", 8192) * 1024;
  sw.pfc.enabled = c.lossless;
  sw.pfc.xoff_bytes = opt.param_u64("xoff_kb", 256) * 1024;
  sw.pfc.xon_bytes = opt.param_u64("xon_kb", 224) * 1024;
  sw.trim = !c.lossless && opt.param_u64("trim", 0) != 0;
  sw.ecn.enabled = true;
  sw.ecn.kmin_bytes = opt.param_u64("kmin_kb", 12) * 1000;
  sw.ecn.kmax_bytes = opt.param_u64("kmax_kb", 500) * 1000;
  sw.ecn.pmax = opt.param_f64("pmax", 0.2);
  sw.int_stamp = true;
  sw.sb_flag_fraction = opt.param_f64("sb_flag", 0.125);

  LeafSpineConfig lc;
  lc.hosts_per_leaf = static_cast<uint32_t>(opt.param_u64("hosts_per_leaf", 8));
  lc.leaves = std::max<uint32_t>(1, (nhosts_req + lc.hosts_per_leaf - 1) / lc.hosts_per_leaf);
  lc.spines = static_cast<uint32_t>(opt.param_u64("spines", lc.hosts_per_leaf));
  lc.host_link.rate_bps = host_bps;
  lc.host_link.delay = delay;
  lc.uplink = lc.host_link;
  lc.downlink = lc.host_link;
  lc.sw = sw;
  LeafSpine topo = build_leaf_spine(net, lc, hc);
  const auto nhosts = static_cast<uint32_t>(topo.hosts.size());

  Rng trng(Rng::mix(opt.seed ^ 0xcc5eedull));
  std::vector<FlowSpec> specs;
  const Duration duration =
      Duration::micros(static_cast<int64_t>(opt.param_u64("duration_us", 300)));
  bool open_loop = false;
  if (traffic == "incast") {
    const auto fanin =
        static_cast<uint32_t>(std::min<uint64_t>(opt.param_u64("fanin", 15), nhosts - 1));
    std::vector<uint32_t> srcs;
    for (uint32_t i = 0; i < fanin; ++i)
      srcs.push_back(1 + static_cast<uint32_t>(uint64_t{i} * (nhosts - 1) / fanin));
    specs = incast_flows(srcs, 0, opt.param_u64("bytes", 512u << 10));
    const auto stagger = static_cast<int64_t>(opt.param_u64("stagger_us", 0));
    for (size_t i = 0; i < specs.size(); ++i)
      specs[i].start = specs[i].start + Duration::micros(stagger * static_cast<int64_t>(i));
  } else if (traffic == "alltoall") {
    // MoE dispatch: skewed toward popular experts by default (skew=0: uniform).
    specs =
        all_to_all_flows(nhosts, opt.param_u64("bytes", 4u << 20), opt.param_f64("skew", 1), trng);
  } else if (traffic == "permutation") {
    specs = permutation_flows(nhosts, opt.param_u64("bytes", 1u << 20), trng);
  } else {
    auto cdf = FlowSizeCdf::named(traffic, opt.param_str("cdf_dir", ""));
    if (!cdf) {
      res.json = {{"ok", false}, {"error", cdf.error().message}};
      return res;
    }
    specs = poisson_flows(nhosts, *cdf, opt.param_f64("load", 0.5), host_bps, duration, trng);
    open_loop = true;
  }

  // Lossy runs: a warm-up flow per pair first (cc_eval.cc header).
  std::vector<FlowSpec> all;
  const bool warm = !c.lossless && opt.param_u64("warmup", 1) != 0;
  if (warm) {
    const Duration shift = Duration::micros(static_cast<int64_t>(opt.param_u64("warmup_us", 40)));
    std::set<std::pair<uint32_t, uint32_t>> pairs;
    for (const auto& f : specs) pairs.insert({f.src, f.dst});
    for (const auto& [s, d] : pairs) all.push_back({s, d, 4096, Time{}});
    for (auto& f : specs) f.start = f.start + shift;
  }
  const size_t nwarm = all.size();
  all.insert(all.end(), specs.begin(), specs.end());

  FlowRunner runner(net, topo.hosts, fc);
  if (auto r = runner.setup(); !r) {
    res.json = {{"ok", false}, {"error", r.error().message}};
    return res;
  }
  if (auto r = runner.add(all); !r) {
    res.json = {{"ok", false}, {"error", r.error().message}};
    return res;
  }
  const Time first_start =
      specs.empty()
          ? Time{}
          : std::min_element(specs.begin(), specs.end(), [](const FlowSpec& a, const FlowSpec& b) {
              return a.start < b.start;
            })->start;
  // The run ends when every flow is done, or `drain_us` after the arrivals
  // (100 ms: lossy DCQCN needs 25 ms for the bench's 63-to-1 incast; with
  // 20 ms it was cut off with 28 of 63 flows done, docs/results/cc.md).
  const Duration drain = Duration::micros(static_cast<int64_t>(opt.param_u64("drain_us", 100000)));
  const Time end = first_start + duration + drain;
  // The incast's bottleneck (the receiver's downlink), its queue sampled
  // every `sample_ns` (what the switch histogram, weighted by arrivals and
  // dominated by the first RTT's burst, does not show: the settled queue).
  Time last_start = first_start;
  for (const auto& f : specs) last_start = std::max(last_start, f.start);
  const Time est_from = last_start + base_rtt * 10;
  // The fair share of one incast flow: the bottleneck's payload rate / fan-in.
  const double fair_bps = static_cast<double>(host_bps) * static_cast<double>(mtu) /
                          static_cast<double>(mtu + 66) / static_cast<double>(std::max<size_t>(1, specs.size()));
  double est_err_sum = 0;
  uint64_t est_err_n = 0;
  // ltp_info_gain: the newest (decisions, nats) of each flow's controller.
  std::vector<std::pair<uint64_t, double>> gain(all.size(), {0, 0.0});
  const Link* bottleneck = nullptr;
  for (const auto& l : net.links())
    if (&l->to() == topo.hosts[0]) bottleneck = l.get();
  std::vector<std::pair<Time, uint64_t>> qsamples;
  const Duration step = Duration::nanos(static_cast<int64_t>(opt.param_u64("sample_ns", 2000)));
  // trace_us=N (incast): every N us on stderr, the bottleneck's busy fraction
  // over the interval and its queue (docs/results/cc.md, "Why").
  const uint64_t trace_ps = opt.param_u64("trace_us", 0) * 1'000'000ull;
  Time trace_at = first_start + Duration::picos(static_cast<int64_t>(trace_ps));
  uint64_t trace_bytes = 0;
  for (Time t = Time{}; t < end && sim.pending() > 0;) {
    t = std::min(end, t + step);
    sim.run(t);
    if (traffic == "incast" && bottleneck != nullptr && t >= first_start)
      qsamples.emplace_back(t, bottleneck->data_queue_bytes());
    // LTP (incast): the filter's estimate of each running flow against its
    // max-min fair share of the bottleneck, from 10 base RTTs after the
    // last start until the first flow is done (docs/cc/ltp.md).
    if (traffic == "incast" && c.cc && c.alg == cc::Algorithm::kLtp && t >= est_from &&
        runner.completed() <= nwarm) {
      for (size_t i = nwarm; i < all.size(); ++i) {
        const auto q = runner.sender_qp(i);
        if (!q) continue;
        const auto st = q->first->qp_stats(q->second);
        if (!st || st->cc_est_bps == 0) continue;
        est_err_sum += std::fabs(std::log2(static_cast<double>(st->cc_est_bps) / fair_bps));
        ++est_err_n;
      }
    }
    if (c.cc && c.alg == cc::Algorithm::kLtp && c.ltp_info_gain) {
      for (size_t i = nwarm; i < all.size(); ++i) {
        const auto q = runner.sender_qp(i);
        if (!q) continue;
        if (const auto st = q->first->qp_stats(q->second); st && st->ltp_decisions >= gain[i].first)
          gain[i] = {st->ltp_decisions, st->ltp_info_gain};
      }
    }
    if (trace_ps > 0 && bottleneck != nullptr && t >= trace_at) {
      const uint64_t b = bottleneck->stats().tx_wire_bytes;
      std::fprintf(stderr, "trace %s t_us %.0f util %.3f queue_kb %.1f", c.name.c_str(),
                   to_us(t - first_start),
                   static_cast<double>(b - trace_bytes) * 8 /
                       (static_cast<double>(host_bps) * static_cast<double>(trace_ps) * 1e-12),
                   static_cast<double>(bottleneck->data_queue_bytes()) / 1000);
      // The controllers of the unfinished measured flows: the sum of their
      // rates over the line rate, LTP's estimates over the fair share (mean),
      // and how many MIs the policy and the fallback decided so far.
      double rate_sum = 0, est_sum = 0;
      uint64_t running = 0, dec = 0, fb = 0;
      for (size_t i = nwarm; i < all.size(); ++i) {
        const auto q = runner.sender_qp(i);
        if (!q || runner.flows()[i].done()) continue;
        const auto st = q->first->qp_stats(q->second);
        if (!st) continue;
        ++running;
        rate_sum += static_cast<double>(st->cc_rate_bps);
        est_sum += static_cast<double>(st->cc_est_bps);
        dec += st->ltp_decisions;
        fb += st->ltp_fallback_mis;
      }
      if (running > 0)
        std::fprintf(stderr, " flows %llu rate_sum %.3f est_over_fair %.3f ltp_mis %llu fallback_mis %llu",
                     static_cast<unsigned long long>(running), rate_sum / static_cast<double>(host_bps),
                     est_sum / static_cast<double>(running) / fair_bps,
                     static_cast<unsigned long long>(dec), static_cast<unsigned long long>(fb));
      std::fprintf(stderr, "\n");
      trace_bytes = b;
      trace_at = t + Duration::picos(static_cast<int64_t>(trace_ps));
    }
    if (runner.all_done() && runner.started() == all.size()) break;
  }
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();

  // Metrics over the measured flows only.
  std::vector<FlowRecord> measured(runner.flows().begin() + static_cast<long>(nwarm),
                                   runner.flows().end());
  std::vector<Duration> ideal(measured.size());
  Time last_end = first_start;
  uint64_t done = 0, bytes_done = 0;
  for (size_t i = 0; i < measured.size(); ++i) {
    const auto& f = measured[i];
    ideal[i] = ideal_fct(first_path(net, *topo.hosts[f.spec.src], *topo.hosts[f.spec.dst]),
                         f.spec.bytes, static_cast<uint32_t>(mtu), fc.chunk_bytes);
    if (f.done()) {
      ++done;
      bytes_done += f.spec.bytes;
      last_end = std::max(last_end, f.end);
    }
  }
  const FctReport fr = fct_report(measured, ideal);
  if (opt.param_u64("fair_share", 1) != 0)
    res.fair_share = fair_share_slowdowns(specs, ideal, nhosts,
                                          static_cast<double>(host_bps) *
                                              static_cast<double>(mtu) /
                                              static_cast<double>(mtu + 66));
  LogHistogram qh;
  uint64_t pfc = 0, drops = 0, trimmed = 0, ecn = 0, sbflag = 0, max_buf = 0;
  for (const auto& n : net.nodes()) {
    if (n->kind() != NodeKind::kSwitch) continue;
    const auto& s = static_cast<const Switch&>(*n);
    qh.merge(s.queue_histogram());
    pfc += s.stats().pfc_xoff;
    drops += s.stats().egress_drops;
    trimmed += s.stats().trimmed;
    ecn += s.stats().ecn_marked;
    sbflag += s.stats().sb_flagged;
    max_buf = std::max(max_buf, s.stats().max_buffer_bytes);
  }
  uint64_t paused_ps = 0;
  for (const auto& l : net.links()) paused_ps += l->stats().paused_ps;
  EngineStats es{};
  uint64_t stalls = 0;
  for (Host* h : topo.hosts) {
    es = es + h->engine().stats();
    stalls += h->stats().stalls;
  }
  // Bottleneck of an incast: the receiver's downlink, over the transfer,
  // and its queue in the second half of the transfer (settled).
  double bottleneck_util = 0;
  std::vector<double> settled;
  if (traffic == "incast" && last_end > first_start && bottleneck != nullptr) {
    bottleneck_util =
        static_cast<double>(bottleneck->stats().tx_wire_bytes) * 8 /
        (static_cast<double>(host_bps) * static_cast<double>((last_end - first_start).ps) * 1e-12);
    const Time half = first_start + Duration::picos((last_end - first_start).ps / 2);
    // The last flows finish one by one: stop at 90 % of the transfer.
    const Time stop = first_start + Duration::picos((last_end - first_start).ps * 9 / 10);
    for (const auto& [t, q] : qsamples)
      if (t >= half && t <= stop) settled.push_back(static_cast<double>(q));
  }
  // Incast: Jain over the flows' mean rates (equal sizes), and the
  // convergence time: from the last start until the bottleneck queue stays
  // within 1.5 x its settled p99 plus one packet up to 90 % of the transfer.
  double jain = 0, converge_us = -1;
  if (traffic == "incast" && !measured.empty()) {
    double s = 0, s2 = 0;
    for (const auto& f : measured) {
      const double r = f.done() ? static_cast<double>(f.spec.bytes) /
                                      std::max(1.0, static_cast<double>((f.end - f.spec.start).ps))
                                : 0.0;
      s += r;
      s2 += r * r;
    }
    jain = s2 > 0 ? s * s / (static_cast<double>(measured.size()) * s2) : 0;
    if (!settled.empty() && last_end > first_start) {
      const double bound = 1.5 * percentile(settled, 0.99) + static_cast<double>(mtu + 66);
      const Time stop = first_start + Duration::picos((last_end - first_start).ps * 9 / 10);
      Time conv = last_start;
      for (const auto& [t, q] : qsamples)
        if (t >= last_start && t <= stop && static_cast<double>(q) > bound) conv = t;
      converge_us = to_us(conv - last_start);
    }
  }
  const double span_s = static_cast<double>((last_end - first_start).ps) * 1e-12;
  res.p99 = fr.slowdown.p99;
  res.p50 = fr.slowdown.p50;
  res.queue_p99 = qh.quantile(0.99);
  res.pfc = pfc;
  res.goodput_gbps = span_s > 0 ? static_cast<double>(bytes_done) * 8 / span_s / 1e9 : 0;
  res.ok = runner.errors() == 0 && stalls == 0 && (open_loop || done == measured.size());
  Json buckets = Json::array();
  for (const auto& b : fr.buckets)
    if (b.slowdown.count > 0)
      buckets.push_back({{"size", b.name}, {"slowdown", dist_json(b.slowdown)}});
  res.json = {{"p99_slowdown", fr.slowdown.p99},
              {"p50_slowdown", fr.slowdown.p50},
              {"p95_slowdown", fr.slowdown.p95},
              {"queue_p99_bytes", res.queue_p99},
              {"queue_max_bytes", qh.max()},
              {"buffer_max_bytes", max_buf},
              {"pfc_pauses", pfc},
              {"pfc_paused_us", static_cast<double>(paused_ps) * 1e-6},
              {"ok", res.ok},
              {"flows", measured.size()},
              {"completed", done},
              {"completion_us", to_us(last_end - first_start)},
              {"goodput_gbps", res.goodput_gbps},
              {"drops", drops},
              {"trimmed", trimmed},
              {"ecn_marked", ecn},
              {"sb_flagged", sbflag},
              {"timeouts", es.timeouts},
              {"retransmits", es.retransmits},
              {"cnps_dropped", es.rx_drop_reason[kRxDropCnp]},
              {"by_size", buckets},
              {"sim_end_us", to_us(sim.now())},
              {"stalls", stalls},
              {"flow_errors", runner.errors()},
              {"events", sim.events_run()},
              {"wall_s", wall}};
  if (traffic == "incast") {
    res.json["bottleneck_util"] = bottleneck_util;
    res.json["settled_queue_p99_bytes"] = settled.empty() ? 0.0 : percentile(settled, 0.99);
    res.json["settled_queue_p50_bytes"] = settled.empty() ? 0.0 : percentile(settled, 0.50);
    res.json["settled_qdelay_p99_us"] =
        settled.empty() ? 0.0 : percentile(settled, 0.99) * 8 / static_cast<double>(host_bps) * 1e6;
    res.json["jain"] = jain;
    res.json["converge_us"] = converge_us;
    if (c.ltp_info_gain) {
      uint64_t mis = 0;
      double nats = 0;
      for (const auto& [m, g] : gain) {
        mis += m;
        nats += g;
      }
      res.json["ltp_info_gain_per_mi"] = mis > 0 ? nats / static_cast<double>(mis) : 0.0;
    }
    if (est_err_n > 0) res.json["est_err_log2"] = est_err_sum / static_cast<double>(est_err_n);
  }
  if (!runner.first_error().empty()) res.json["error"] = runner.first_error();
  return res;
}

std::vector<CcCase> cc_cases(const ScenarioOptions& opt, bool ablation_default) {
  std::vector<CcCase> out;
  const std::string modes = opt.param_str("modes", "both");  // lossless | lossy | both
  const std::string algs = opt.param_str("algs", "dcqcn,hpcc,odin,delay");
  auto wanted = [&](const char* n) { return algs.find(n) != std::string::npos; };
  for (const bool lossless : {true, false}) {
    if ((lossless && modes == "lossy") || (!lossless && modes == "lossless")) continue;
    for (auto a : {cc::Algorithm::kDcqcn, cc::Algorithm::kHpcc, cc::Algorithm::kOdin,
                   cc::Algorithm::kDelay}) {
      if (!wanted(cc::to_string(a))) continue;
      CcCase c;
      c.name = cc::to_string(a);
      c.alg = a;
      c.lossless = lossless;
      out.push_back(c);
    }
    if (opt.param_u64("baseline", 1) != 0) {
      CcCase c;
      c.name = "none";
      c.cc = false;
      c.lossless = lossless;
      out.push_back(c);
    }
    if (lossless && opt.param_u64("ablation", ablation_default ? 1 : 0) != 0) {
      for (int part = 0; part < 3; ++part) {
        CcCase c;
        c.alg = cc::Algorithm::kOdin;
        c.lossless = true;
        c.name = part == 0 ? "odin_no_flag" : part == 1 ? "odin_no_ratio" : "odin_no_compensation";
        c.odin_flag = part != 0;
        c.odin_ratio = part != 1;
        c.odin_comp = part != 2;
        out.push_back(c);
      }
    }
  }
  return out;
}

int run_cc_scenario(const ScenarioOptions& opt, Reporter& rep, const std::string& scenario,
                    const std::string& traffic, bool ablation_default) {
  Json sum = {{"scenario", scenario},
              {"traffic", traffic},
              {"seed", opt.seed},
              {"hosts", opt.param_u64("hosts", 16)}};
  Json lossy = Json::object();
  bool ok = true;
  for (const CcCase& c : cc_cases(opt, ablation_default)) {
    CcResult r = run_cc_case(opt, traffic, c);
    ok = ok && r.ok;
    rep.event(
        "case",
        Json{{"name", c.name}, {"mode", c.lossless ? "lossless" : "lossy"}, {"result", r.json}});
    std::fprintf(stderr, "%s: %s %s p99 %.2f p50 %.2f queue p99 %llu pfc %llu (%.1f s)\n",
                 scenario.c_str(), c.lossless ? "lossless" : "lossy", c.name.c_str(), r.p99, r.p50,
                 static_cast<unsigned long long>(r.queue_p99),
                 static_cast<unsigned long long>(r.pfc), r.json.value("wall_s", 0.0));
    if (!r.fair_share.is_null() && !sum.contains("fair_share")) sum["fair_share"] = r.fair_share;
    if (c.lossless)
      sum[c.name] = r.json;
    else
      lossy[c.name] = r.json;
  }
  if (!lossy.empty()) sum["lossy"] = lossy;
  sum["ok"] = ok;
  rep.summary(sum);
  return ok ? 0 : 1;
}

}  // namespace sroce::sim
