// Issue 4's fabric experiments; spray-vs-ecmp runs through the `workload` scenario (the
// switch model of switch.h, FlowRunner's WRITE flows on the real engine, no
// congestion control) with one setting changed between two runs:
//
// trim           heavy incast on a lossy fabric (no PFC, a small shared
//                buffer) with switch trimming on and off (DCP): retransmission
//                timeouts and the tail FCT (its own runner, lossy_incast.cc,
//                with a warm-up so that the QPs are in lossy mode)
// spray-vs-ecmp  permutation traffic on a leaf-spine: one lane per QP (the
//                QP's 5-tuple is one ECMP path, so flows collide) vs `lanes`
//                lanes (per-packet spraying): p99 FCT and link utilisation
#include <string>

#include "lossy_common.h"
#include "util.h"

namespace sroce::sim {

int scenario_workload(const ScenarioOptions&, Reporter&);

namespace {

// Sets a parameter by erase + emplace: assigning a literal to a mapped
// string trips GCC 12's -Wrestrict false positive at -O3 (GCC PR 105329).
void set_param(ScenarioOptions& o, const std::string& key, const std::string& value) {
  o.params.erase(key);
  o.params.emplace(key, value);
}

// Options for the workload scenario: ours, with `fixed` filled in where the
// user did not set them.
ScenarioOptions with_defaults(const ScenarioOptions& opt,
                              const std::map<std::string, std::string>& fixed) {
  ScenarioOptions o = opt;
  o.pcap.clear();
  set_param(o, "progress", "0");
  for (const auto& [k, v] : fixed)
    if (o.params.count(k) == 0) set_param(o, k, v);
  return o;
}

double num(const Json& j, const char* key) {
  return j.contains(key) && j[key].is_number() ? j[key].get<double>() : -1;
}

double p99_fct(const Json& s) {
  return s.contains("fct_us") ? s["fct_us"].value("p99", -1.0) : -1.0;
}

// The part of a workload summary the comparison reports.
Json brief(const Json& s) {
  Json e = s.value("engine", Json::object());
  return {{"ok", s.value("ok", false)},
          {"flows", s.value("flows", uint64_t{0})},
          {"completed", s.value("completed", uint64_t{0})},
          {"p99_fct_us", p99_fct(s)},
          {"p50_fct_us", s.contains("fct_us") ? s["fct_us"].value("p50", -1.0) : -1.0},
          {"max_fct_us", s.contains("fct_us") ? s["fct_us"].value("max", -1.0) : -1.0},
          {"p99_slowdown", num(s, "p99_slowdown")},
          {"p50_slowdown", num(s, "p50_slowdown")},
          {"goodput_gbps", num(s, "goodput_gbps")},
          {"util_fabric_mean", num(s, "util_fabric_mean")},
          {"util_fabric_max", num(s, "util_fabric_max")},
          {"util_host_down_mean", num(s, "util_host_down_mean")},
          {"queue_p99_bytes", num(s, "queue_p99_bytes")},
          {"switch_drops", s.value("switch_drops", uint64_t{0})},
          {"trimmed", s.value("trimmed", uint64_t{0})},
          {"pfc_pauses", s.value("pfc_pauses", uint64_t{0})},
          {"timeouts", e.value("timeouts", uint64_t{0})},
          {"retransmits", e.value("retransmits", uint64_t{0})},
          {"naks", e.value("naks_sent", uint64_t{0})},
          {"sim_end_us", num(s, "sim_end_us")},
          {"events", s.value("events", uint64_t{0})},
          {"error", s.value("error", "")}};
}

}  // namespace

int scenario_lossy_trim(const ScenarioOptions& opt, Reporter& rep) {
  // 31-to-1 incast of 1 MB flows (31 MB into one 100 Gbit/s port) through a
  // 4 MB shared buffer, PFC off: the buffer overflows and packets are dropped
  // (trim=0) or cut to their headers (trim=1); no congestion control. A
  // lossless reference: PFC on with a 32 MB buffer (ports x (XOFF + headroom)
  // must fit, docs/sim.md). lossy_incast.cc says why there is a warm-up.
  IncastRun base;
  base.seed = opt.seed;
  base.hosts = static_cast<uint32_t>(opt.param_u64("hosts", 32));
  base.hosts_per_leaf = static_cast<uint32_t>(opt.param_u64("hosts_per_leaf", 8));
  base.fanin = static_cast<uint32_t>(opt.param_u64("fanin", 31));
  base.bytes = opt.param_u64("bytes", 1'000'000);
  base.warm_bytes = opt.param_u64("warm_bytes", 16384);
  base.warm = Duration::micros(static_cast<int64_t>(opt.param_u64("warm_us", 100)));
  base.buffer_bytes = opt.param_u64("buffer_kb", 4096) * 1024;
  base.lanes = static_cast<uint16_t>(opt.param_u64("lanes", 16));
  base.train_bytes = static_cast<uint32_t>(opt.param_u64("train_bytes", base.train_bytes));
  base.chunk_bytes = static_cast<uint32_t>(opt.param_u64("chunk", 65536));
  IncastRun on = base, off = base, pfc = base;
  on.trim = true;
  pfc.pfc = true;
  pfc.buffer_bytes = opt.param_u64("pfc_buffer_kb", 32768) * 1024;
  rep.event("start", {{"scenario", "trim"},
                      {"seed", opt.seed},
                      {"hosts", base.hosts},
                      {"fanin", base.fanin},
                      {"bytes", base.bytes},
                      {"buffer_kb", base.buffer_bytes / 1024},
                      {"lanes", base.lanes},
                      {"warm_bytes", base.warm_bytes}});
  const Json b_on = run_incast(on);
  rep.event("run", {{"trim", true}, {"result", b_on}});
  const Json b_off = run_incast(off);
  rep.event("run", {{"trim", false}, {"result", b_off}});
  const Json b_pfc = run_incast(pfc);
  rep.event("run", {{"pfc", true}, {"result", b_pfc}});
  const double p_on = b_on.value("p99_fct_us", -1.0), p_off = b_off.value("p99_fct_us", -1.0);
  const bool ok = b_on.value("ok", false) && b_off.value("ok", false) && b_pfc.value("ok", false);
  rep.summary({{"scenario", "trim"},
               {"ok", ok},
               {"seed", opt.seed},
               {"rto_count_trim", b_on.value("timeouts", uint64_t{0})},
               {"rto_count_notrim", b_off.value("timeouts", uint64_t{0})},
               // Tail FCT without trimming over the tail with it: > 1 means
               // trimming shortens the tail.
               {"p99_fct_ratio", p_on > 0 ? p_off / p_on : -1.0},
               {"p99_fct_us_trim", p_on},
               {"p99_fct_us_notrim", p_off},
               {"p99_fct_us_pfc", b_pfc.value("p99_fct_us", -1.0)},
               {"rto_count_pfc", b_pfc.value("timeouts", uint64_t{0})},
               {"trim", b_on},
               {"notrim", b_off},
               {"pfc", b_pfc}});
  return ok ? 0 : 1;
}

int scenario_lossy_spray_vs_ecmp(const ScenarioOptions& opt, Reporter& rep) {
  // 128 hosts, 8 leaves of 16, 16 spines (no oversubscription), 100 Gbit/s,
  // a random permutation of 4 MB flows, posted as 64 KiB WRITEs (lossy mode
// is negotiated during a QP's first WR, so a flow of one large WR would run
// in compatible mode; the same for the incast above). PFC on (as a RoCE fabric runs), so
  // ECMP collisions become queueing and pauses rather than drops.
  const std::map<std::string, std::string> fixed = {
      {"traffic", "permutation"}, {"hosts", "128"}, {"hosts_per_leaf", "16"},
      {"bytes", "4000000"},       {"ecn", "0"},     {"int", "0"}, {"drain_us", "100000"},
      {"chunk", "65536"},         {"progress_us", "10"}};
  const std::string lanes = opt.param_str("lanes", "16");
  ScenarioOptions spray = with_defaults(opt, fixed), ecmp = spray;
  set_param(spray, "lanes", lanes);
  set_param(ecmp, "lanes", "1");
  rep.event("start", {{"scenario", "spray-vs-ecmp"}, {"seed", opt.seed}, {"params", Json(spray.params)}});
  const Json s_ecmp = run_quiet(scenario_workload, ecmp);
  const Json b_ecmp = brief(s_ecmp);
  rep.event("run", {{"lanes", 1}, {"result", b_ecmp}});
  const Json s_spray = run_quiet(scenario_workload, spray);
  const Json b_spray = brief(s_spray);
  rep.event("run", {{"lanes", lanes}, {"result", b_spray}});
  const double p_e = p99_fct(s_ecmp), p_s = p99_fct(s_spray);
  const bool ok = s_ecmp.value("ok", false) && s_spray.value("ok", false);
  rep.summary({{"scenario", "spray-vs-ecmp"},
               {"ok", ok},
               {"seed", opt.seed},
               {"hosts", s_spray.value("hosts", uint64_t{0})},
               {"p99_fct_us_ecmp", p_e},
               {"p99_fct_us_lanes", p_s},
               // ECMP's tail over spraying's: > 1 means spraying shortens it.
               {"p99_fct_ratio", p_s > 0 ? p_e / p_s : -1.0},
               {"util_fabric_max_ecmp", b_ecmp["util_fabric_max"]},
               {"util_fabric_max_lanes", b_spray["util_fabric_max"]},
               {"util_fabric_mean_ecmp", b_ecmp["util_fabric_mean"]},
               {"util_fabric_mean_lanes", b_spray["util_fabric_mean"]},
               {"ecmp", b_ecmp},
               {"lanes", b_spray}});
  return ok ? 0 : 1;
}

}  // namespace sroce::sim
