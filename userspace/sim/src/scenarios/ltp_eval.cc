// ltp-eval (issue 17, docs/cc/ltp.md "Evaluation"): LTP beside HPCC, DCQCN,
// the delay-based controller and LTP's two ablations, on N-to-1 incasts the
// policy never saw (it was trained on the fluid model, not on this
// packet-level fabric). Each environment is one incast on a leaf-spine,
// lossless; the summary line averages the environments:
//
//   util_<x>            bottleneck utilisation over the transfer
//   qdelay_p99_us_<x>   p99 of the bottleneck's settled queue, as delay
//   jain_ltp            Jain over the flows' mean rates
//   converge_ms_ltp     until the queue stays near its settled level
//   est_err_ltp, est_err_ltp_noprobe   the filter's mean |log2(estimate / fair share)|
//
// Parameters: envs=GBPS:DELAY_NS:FANIN:KB,... (default one small one, CI),
// algs=ltp,ltp_noprobe,ltp_nofilter,hpcc,dcqcn,delay, and the cc_eval.cc ones.
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "sroce/sim/cc_eval.h"

namespace sroce::sim {

namespace {

struct LtpEnv {
  uint64_t gbps, delay_ns, fanin, kb;
};

std::vector<LtpEnv> parse_envs(const std::string& s, std::string& err) {
  std::vector<LtpEnv> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    LtpEnv e{};
    if (std::sscanf(item.c_str(), "%lu:%lu:%lu:%lu", &e.gbps, &e.delay_ns, &e.fanin, &e.kb) != 4 ||
        e.gbps == 0 || e.delay_ns == 0 || e.fanin == 0 || e.kb == 0) {
      err = "envs: expected GBPS:DELAY_NS:FANIN:KB (all > 0), got \"" + item + "\"";
      return {};
    }
    out.push_back(e);
  }
  if (out.empty()) err = "envs: expected at least one GBPS:DELAY_NS:FANIN:KB";
  return out;
}

}  // namespace

int scenario_ltp_eval(const ScenarioOptions& opt, Reporter& rep) {
  std::string err;
  const auto envs = parse_envs(opt.param_str("envs", "100:1000:3:2048"), err);
  if (!err.empty()) {
    std::fprintf(stderr, "ltp-eval: %s\n", err.c_str());
    return 2;
  }
  const std::string algs = opt.param_str("algs", "ltp,ltp_noprobe,ltp_nofilter,hpcc,dcqcn,delay");
  std::vector<CcCase> cases;
  const auto add = [&](const char* name, cc::Algorithm a, cc::LtpVariant v) {
    if (("," + algs + ",").find(std::string(",") + name + ",") == std::string::npos) return;
    CcCase c;
    c.name = name;
    c.alg = a;
    c.ltp = v;
    c.lossless = true;
    cases.push_back(c);
  };
  add("ltp", cc::Algorithm::kLtp, cc::LtpVariant::kFull);
  add("ltp_noprobe", cc::Algorithm::kLtp, cc::LtpVariant::kNoProbe);
  add("ltp_nofilter", cc::Algorithm::kLtp, cc::LtpVariant::kNoFilter);
  add("hpcc", cc::Algorithm::kHpcc, cc::LtpVariant::kFull);
  add("dcqcn", cc::Algorithm::kDcqcn, cc::LtpVariant::kFull);
  add("delay", cc::Algorithm::kDelay, cc::LtpVariant::kFull);
  if (cases.empty()) {
    std::fprintf(stderr, "ltp-eval: algs: none of ltp, ltp_noprobe, ltp_nofilter, hpcc, dcqcn, delay in \"%s\"\n",
                 algs.c_str());
    return 2;
  }
  Json sum = {{"scenario", "ltp-eval"}, {"seed", opt.seed}, {"envs", envs.size()}};
  // LTP's deployment knobs in effect (cc_eval.cc reads them), so that a
  // summary line says which configuration it measured.
  const cc::LtpConfig ltp_default;
  sum["ltp_sat_cut"] = opt.param_f64("ltp_sat_cut", ltp_default.saturation_cut);
  sum["ltp_start"] = opt.param_f64("ltp_start", ltp_default.start_rate);
  sum["ltp_guard_ns"] = opt.param_u64("ltp_guard_ns", static_cast<uint64_t>(ltp_default.guard_queue.ps / 1000));
  Json per_env = Json::array();
  std::map<std::string, double> util, qd, jain, conv, est;
  std::map<std::string, int> est_n;
  bool ok = true;
  for (const auto& e : envs) {
    ScenarioOptions o = opt;
    o.params["host_gbps"] = std::to_string(e.gbps);
    o.params["delay_ns"] = std::to_string(e.delay_ns);
    o.params["fanin"] = std::to_string(e.fanin);
    o.params["bytes"] = std::to_string(e.kb * 1024);
    if (!o.params.count("hosts")) o.params["hosts"] = std::to_string(e.fanin + 1);
    if (!o.params.count("hosts_per_leaf"))
      o.params["hosts_per_leaf"] = std::to_string(std::max<uint64_t>(2, (e.fanin + 2) / 2));
    Json env = {{"gbps", e.gbps}, {"delay_ns", e.delay_ns}, {"fanin", e.fanin}, {"kb", e.kb}};
    for (const CcCase& c : cases) {
      CcResult r = run_cc_case(o, "incast", c);
      ok = ok && r.ok;
      const double u = r.json.value("bottleneck_util", 0.0);
      const double q = r.json.value("settled_qdelay_p99_us", 0.0);
      util[c.name] += u / static_cast<double>(envs.size());
      qd[c.name] += q / static_cast<double>(envs.size());
      jain[c.name] += r.json.value("jain", 0.0) / static_cast<double>(envs.size());
      conv[c.name] += r.json.value("converge_us", 0.0) / 1000 / static_cast<double>(envs.size());
      if (r.json.contains("est_err_log2")) {
        est[c.name] += r.json["est_err_log2"].get<double>();
        ++est_n[c.name];
      }
      rep.event("case", Json{{"name", c.name}, {"env", env}, {"result", r.json}});
      std::fprintf(stderr, "ltp-eval: %lu G %lu ns x%lu %s util %.3f qdelay p99 %.2f us jain %.3f (%.1f s)\n",
                   e.gbps, e.delay_ns, e.fanin, c.name.c_str(), u, q, r.json.value("jain", 0.0),
                   r.json.value("wall_s", 0.0));
      env[c.name] = {{"util", u},
                     {"qdelay_p99_us", q},
                     {"jain", r.json.value("jain", 0.0)},
                     {"converge_us", r.json.value("converge_us", 0.0)},
                     {"completion_us", r.json.value("completion_us", 0.0)},
                     {"ok", r.ok}};
      if (r.json.contains("est_err_log2")) env[c.name]["est_err_log2"] = r.json["est_err_log2"];
    }
    per_env.push_back(env);
  }
  for (const CcCase& c : cases) {
    sum["util_" + c.name] = util[c.name];
    sum["qdelay_p99_us_" + c.name] = qd[c.name];
    sum["jain_" + c.name] = jain[c.name];
    sum["converge_ms_" + c.name] = conv[c.name];
    if (est_n[c.name] > 0) sum["est_err_" + c.name] = est[c.name] / est_n[c.name];
  }
  sum["per_env"] = per_env;
  sum["ok"] = ok;
  rep.summary(sum);
  return ok ? 0 : 1;
}

}  // namespace sroce::sim
