// cc-lab: the one-switch lab model (lab_model.h) run per algorithm, one JSON
// line out, so that each controller has numbers before it is wired into the
// engine and the simulator. docs/cc/README.md, "cc-lab".
//
//   cc-lab --scenario dumbbell --alg all --flows 4 [--stagger-us 500] [--duration-ms 10]
//   cc-lab --scenario alltoall --alg all --hosts 8 --bytes 1048576 [--skew 4]
//   cc-lab --scenario alltoall --ablation      (odin with each part off in turn, and hpcc)
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "lab_model.h"

namespace {

using namespace sroce;
using namespace sroce::cc;
using namespace sroce::cc::lab;
using nlohmann::ordered_json;

struct Options {
  std::string scenario = "dumbbell";
  std::string alg = "all";
  bool ablation = false;
  int flows = 2;
  int hosts = 8;
  double stagger_us = 500;
  double duration_ms = 0;   // 0 = scenario default
  uint64_t bytes = 1 << 20;
  double skew = 1.0;        // alltoall: receiver 0 gets `skew` times the bytes
  double spread_us = 5;     // alltoall: host s starts at a seeded time in [0, spread)
  double rate_gbps = 100;
  double link_delay_us = 2;
  uint32_t mtu = 4096;
  std::string dcqcn_preset = "connectx";
  double kmin_kb = 12.5;
  double kmax_kb = 500;
  double pmax = 0.2;
  uint64_t flag_kb = 0;      // 0: 1 MB (dumbbell), 50 KB per port (alltoall)
  uint64_t xoff_kb = 0;      // 0: 2 MB (dumbbell), 100 KB per port (alltoall)
  uint64_t seed = 1;
  double flag_decrease = -1;  // < 0: OdinConfig default
  int max_stage = -1;         // < 0: HpccConfig default (HPCC and Odin)
  double headroom = -1;       // < 0: OdinConfig default
  bool no_fair_floor = false;  // odin: the proportional ratio alone
  double timeline_us = 0;   // > 0: per-flow rates every timeline_us to stderr
};

struct Variant {
  std::string name;
  CcConfig cc;
};

double us(Duration d) { return static_cast<double>(d.ps) / 1e6; }

// Development aid: "t_us rate_gbps..." per step, one column per flow.
void timeline(const Options& o, const LabConfig& cfg, const LabResult& r) {
  if (o.timeline_us <= 0) return;
  const Duration step = Duration::picos(static_cast<int64_t>(o.timeline_us * 1e6));
  for (Time t = Time::zero(); t + step <= cfg.end; t += step) {
    std::fprintf(stderr, "%9.1f", static_cast<double>(t.ps) / 1e6);
    for (size_t i = 0; i < r.flows.size(); ++i)
      std::fprintf(stderr, " %6.2f", flow_rate(r, cfg, static_cast<int>(i), t, t + step) / 1e9);
    std::fprintf(stderr, "\n");
  }
}

ordered_json dumbbell(const Options& o, const LabConfig& base, const CcConfig& cc) {
  LabConfig cfg = base;
  cfg.cc = cc;
  cfg.hosts = o.flows;
  cfg.ports = 1;
  const Duration stagger = Duration::picos(static_cast<int64_t>(o.stagger_us * 1e6));
  std::vector<LabFlowSpec> specs;
  for (int i = 0; i < o.flows; ++i)
    specs.push_back(LabFlowSpec{i, 0, Time::zero() + stagger * i, 0});
  const Time last_start = specs.back().start;
  if (o.duration_ms > 0) {
    cfg.end = Time::zero() + Duration::picos(static_cast<int64_t>(o.duration_ms * 1e9));
  } else {
    cfg.end = last_start + Duration::millis(5);
  }
  const LabResult r = run_lab(cfg, specs);
  timeline(o, cfg, r);
  std::vector<int> ids(o.flows);
  for (int i = 0; i < o.flows; ++i) ids[i] = i;
  const double payload_cap = static_cast<double>(cfg.port_rate_bps) * cfg.mtu / (cfg.mtu + cfg.overhead);
  // Converged: every 100 us window from then on has Jain >= 0.95 and carries
  // >= 80 % of the payload capacity.
  const Duration conv =
      convergence_time(r, cfg, ids, payload_cap, last_start, Duration::micros(100), 0.95, 0.8);
  const Time half = last_start + Duration::picos((cfg.end - last_start).ps / 2);
  ordered_json j;
  j["convergence_us"] = conv.ps < 0 ? ordered_json(nullptr) : ordered_json(us(conv));
  j["queue_p99_bytes"] = percentile(r.queue_samples, 99);
  j["queue_p50_bytes"] = percentile(r.queue_samples, 50);
  j["utilisation"] = utilisation(r, cfg, 0, last_start, cfg.end);
  j["jain"] = jain(r, cfg, half, cfg.end);
  j["pfc_pauses"] = r.xoff_crossings;
  j["paused_us"] = us(r.paused);
  j["cnps"] = r.cnps;
  j["events"] = r.events;
  return j;
}

ordered_json alltoall(const Options& o, const LabConfig& base, const CcConfig& cc) {
  LabConfig cfg = base;
  cfg.cc = cc;
  cfg.hosts = o.hosts;
  cfg.ports = o.hosts;
  const std::vector<LabFlowSpec> specs = alltoall_flows(
      o.hosts, o.bytes, o.skew, Duration::picos(static_cast<int64_t>(o.spread_us * 1e6)), o.seed);
  // Long enough for the slowest receiver at a quarter of line rate.
  uint64_t max_rx = 0;
  for (int d = 0; d < o.hosts; ++d) {
    uint64_t rx = 0;
    for (const auto& f : specs) rx += f.dst == d ? f.bytes : 0;
    max_rx = std::max(max_rx, rx);
  }
  cfg.end = o.duration_ms > 0
                ? Time::zero() + Duration::picos(static_cast<int64_t>(o.duration_ms * 1e9))
                : Time::zero() + tx_time(static_cast<double>(max_rx) * 4, static_cast<double>(cfg.port_rate_bps)) +
                      Duration::millis(1);
  const LabResult r = run_lab(cfg, specs);
  timeline(o, cfg, r);
  const FctStats st = fct_stats(r);
  // The best possible completion: the busiest receiver at its line rate.
  const double ideal_us = us(tx_time(static_cast<double>(max_rx) * (cfg.mtu + cfg.overhead) / cfg.mtu,
                                     static_cast<double>(cfg.port_rate_bps)) + r.base_rtt);
  ordered_json j;
  j["completion_us"] = st.unfinished ? ordered_json(nullptr) : ordered_json(us(st.last_finish - Time::zero()));
  j["ideal_completion_us"] = ideal_us;
  j["unfinished"] = st.unfinished;
  j["p50_slowdown"] = st.p50_slowdown;
  j["p99_slowdown"] = st.p99_slowdown;
  j["queue_p99_bytes"] = percentile(r.queue_samples, 99);
  j["pool_p99_bytes"] = percentile(r.pool_samples, 99);
  j["pool_max_bytes"] = r.max_pool;
  j["pfc_pauses"] = r.xoff_crossings;
  j["paused_us"] = us(r.paused);
  j["cnps"] = r.cnps;
  j["events"] = r.events;
  return j;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"cc-lab: congestion control in a one-switch packet model (one JSON line)"};
  app.add_option("--scenario", o.scenario, "dumbbell | alltoall")->check(CLI::IsMember({"dumbbell", "alltoall"}));
  app.add_option("--alg", o.alg, "dcqcn | hpcc | odin | delay | all");
  app.add_flag("--ablation", o.ablation, "odin and odin with each part off, plus hpcc");
  app.add_option("--flows", o.flows, "dumbbell: flows (one per host) into one port")->check(CLI::Range(1, 4096));
  app.add_option("--hosts", o.hosts, "alltoall: hosts (= receivers)")->check(CLI::Range(2, 512));
  app.add_option("--stagger-us", o.stagger_us, "dumbbell: start of flow i = i x stagger");
  app.add_option("--duration-ms", o.duration_ms, "simulated time (0 = scenario default)");
  app.add_option("--bytes", o.bytes, "alltoall: bytes per flow")->check(CLI::Range(uint64_t{1}, uint64_t{1} << 40));
  app.add_option("--skew", o.skew, "alltoall: receiver 0 gets skew x bytes from everyone")->check(CLI::Range(1.0, 1000.0));
  app.add_option("--spread-us", o.spread_us, "alltoall: host start times spread (us)")->check(CLI::Range(0.0, 1e6));
  app.add_option("--rate-gbps", o.rate_gbps, "NIC and port rate")->check(CLI::Range(1.0, 1600.0));
  app.add_option("--link-delay-us", o.link_delay_us, "per-hop propagation")->check(CLI::Range(0.0, 1000.0));
  app.add_option("--mtu", o.mtu, "payload bytes per packet")->check(CLI::Range(256, 9000));
  app.add_option("--dcqcn", o.dcqcn_preset, "connectx | paper")->check(CLI::IsMember({"connectx", "paper"}));
  app.add_option("--kmin-kb", o.kmin_kb, "ECN RED Kmin (KB)");
  app.add_option("--kmax-kb", o.kmax_kb, "ECN RED Kmax (KB)");
  app.add_option("--pmax", o.pmax, "ECN RED Pmax")->check(CLI::Range(0.0, 1.0));
  app.add_option("--flag-kb", o.flag_kb, "shared-buffer flag level of the pool (KB; 0 = 1000, alltoall 50 per port)");
  app.add_option("--xoff-kb", o.xoff_kb, "PFC XOFF level of the pool (KB; 0 = 2000, alltoall 100 per port)");
  app.add_option("--flag-decrease", o.flag_decrease, "odin: eta_flag = eta x (1 - this)")->check(CLI::Range(0.0, 0.9));
  app.add_option("--max-stage", o.max_stage, "hpcc/odin: maxStage (default 0)")->check(CLI::Range(0, 100));
  app.add_option("--headroom", o.headroom, "odin: NIC-ratio window headroom (default 3)")->check(CLI::Range(1.0, 100.0));
  app.add_flag("--no-fair-floor", o.no_fair_floor, "odin: no floor at the NIC's equal share");
  app.add_option("--seed", o.seed, "seed of RED marking, link jitter and host start times");
  app.add_option("--timeline-us", o.timeline_us, "print per-flow rates (Gb/s) every N us to stderr");
  CLI11_PARSE(app, argc, argv);
  if (o.kmin_kb > o.kmax_kb) {
    std::fprintf(stderr, "cc-lab: --kmin-kb %.1f is above --kmax-kb %.1f\n", o.kmin_kb, o.kmax_kb);
    return 2;
  }

  std::vector<Variant> variants;
  CcConfig base_cc;
  base_cc.dcqcn = o.dcqcn_preset == "paper" ? DcqcnConfig::paper() : DcqcnConfig::connectx();
  if (o.flag_decrease >= 0) base_cc.odin.flag_decrease = o.flag_decrease;
  if (o.max_stage >= 0) {
    base_cc.hpcc.max_stage = static_cast<uint32_t>(o.max_stage);
    base_cc.odin.hpcc.max_stage = static_cast<uint32_t>(o.max_stage);
  }
  if (o.headroom > 0) base_cc.odin.nic_window_headroom = o.headroom;
  if (o.no_fair_floor) base_cc.odin.nic_fair_floor = false;
  auto with = [&](Algorithm a) {
    CcConfig c = base_cc;
    c.algorithm = a;
    return c;
  };
  if (o.ablation) {
    variants.push_back({"hpcc", with(Algorithm::kHpcc)});
    variants.push_back({"odin", with(Algorithm::kOdin)});
    CcConfig c = with(Algorithm::kOdin);
    c.odin.buffer_flag = false;
    variants.push_back({"odin_no_flag", c});
    c = with(Algorithm::kOdin);
    c.odin.nic_ratio = false;
    variants.push_back({"odin_no_ratio", c});
    c = with(Algorithm::kOdin);
    c.odin.compensation = false;
    variants.push_back({"odin_no_compensation", c});
    c = with(Algorithm::kOdin);
    c.odin.nic_share_ai = true;
    variants.push_back({"odin_ai_split", c});
  } else if (o.alg == "all") {
    for (Algorithm a : {Algorithm::kDcqcn, Algorithm::kHpcc, Algorithm::kOdin, Algorithm::kDelay})
      variants.push_back({to_string(a), with(a)});
  } else {
    const auto a = parse_algorithm(o.alg);
    if (!a) {
      std::fprintf(stderr, "cc-lab: unknown --alg '%s' (expected dcqcn, hpcc, odin, delay or all)\n",
                   o.alg.c_str());
      return 2;
    }
    variants.push_back({o.alg, with(*a)});
  }

  LabConfig lab;
  lab.host_rate_bps = lab.port_rate_bps = static_cast<uint64_t>(o.rate_gbps * 1e9);
  lab.link_delay = Duration::picos(static_cast<int64_t>(o.link_delay_us * 1e6));
  lab.mtu = o.mtu;
  lab.kmin = static_cast<uint64_t>(o.kmin_kb * 1000);
  lab.kmax = static_cast<uint64_t>(o.kmax_kb * 1000);
  lab.pmax = o.pmax;
  // The pool grows with the switch's port count; the default levels too.
  const uint64_t ports = o.scenario == "alltoall" ? static_cast<uint64_t>(o.hosts) : 0;
  lab.flag_bytes = o.flag_kb ? o.flag_kb * 1000 : ports ? ports * 50'000 : 1'000'000;
  lab.xoff_bytes = o.xoff_kb ? o.xoff_kb * 1000 : ports ? ports * 100'000 : 2'000'000;
  lab.seed = o.seed;

  ordered_json out;
  out["scenario"] = o.scenario;
  out["rate_gbps"] = o.rate_gbps;
  if (o.scenario == "dumbbell") {
    out["flows"] = o.flows;
    out["stagger_us"] = o.stagger_us;
  } else {
    out["hosts"] = o.hosts;
    out["bytes"] = o.bytes;
    out["skew"] = o.skew;
    out["spread_us"] = o.spread_us;
  }
  out["dcqcn_preset"] = o.dcqcn_preset;
  out["flag_kb"] = lab.flag_bytes / 1000;
  out["xoff_kb"] = lab.xoff_bytes / 1000;
  for (const Variant& v : variants)
    out[v.name] = o.scenario == "dumbbell" ? dumbbell(o, lab, v.cc) : alltoall(o, lab, v.cc);
  std::printf("%s\n", out.dump().c_str());
  return 0;
}
