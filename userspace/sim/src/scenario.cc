#include "sroce/sim/scenario.h"

#include <cstdlib>

namespace sroce::sim {

int scenario_demo(const ScenarioOptions&, Reporter&);
int scenario_wire_tour(const ScenarioOptions&, Reporter&);
int scenario_engine_bench(const ScenarioOptions&, Reporter&);
int scenario_lossy_rc(const ScenarioOptions&, Reporter&);
int scenario_link_flap(const ScenarioOptions&, Reporter&);
int scenario_property(const ScenarioOptions&, Reporter&);
int scenario_fabric_selftest(const ScenarioOptions&, Reporter&);
int scenario_workload(const ScenarioOptions&, Reporter&);
// Issue 4's lossy-mode experiments (scenarios/lossy_pair.cc, lossy_fabric.cc).
int scenario_lossy_loss_sweep(const ScenarioOptions&, Reporter&);
int scenario_lossy_reorder_only(const ScenarioOptions&, Reporter&);
int scenario_lossy_path_failure(const ScenarioOptions&, Reporter&);
int scenario_lossy_lane_weights(const ScenarioOptions&, Reporter&);
int scenario_lossy_trim(const ScenarioOptions&, Reporter&);
int scenario_lossy_spray_vs_ecmp(const ScenarioOptions&, Reporter&);
// Issue 5's congestion-control experiments (scenarios/cc_scenarios.cc).
int scenario_cc_incast(const ScenarioOptions&, Reporter&);
int scenario_cc_alltoall(const ScenarioOptions&, Reporter&);
int scenario_cc_websearch(const ScenarioOptions&, Reporter&);
int scenario_cc_fbhdp(const ScenarioOptions&, Reporter&);
int scenario_ltp_eval(const ScenarioOptions&, Reporter&);

const std::vector<Scenario>& scenarios() {
  static const std::vector<Scenario> kAll = {
      {"demo",
       "RC pair moves 64 MiB (WRITE/SEND/READ mix) over a 4-spine leaf-spine with 1% loss; data "
       "verified",
       scenario_demo},
      {"wire-tour",
       "every opcode the engine sends (RC/UC/UD, atomics, ACK, NAK, RNR NAK) back to back; use "
       "with --pcap",
       scenario_wire_tour},
      {"engine-bench",
       "engine cost in-process (Mpps per core, 4 KiB WRITE and 64 B SEND) beside memcpy and sim "
       "events/s",
       scenario_engine_bench},
      {"lossy-rc",
       "RC WRITEs through Bernoulli, burst (Gilbert-Elliott), reorder, duplicate and corrupt "
       "impairments",
       scenario_lossy_rc},
      {"link-flap",
       "one spine's links die at t1 and come back at t2 during an RC transfer; no data lost",
       scenario_link_flap},
      {"property",
       "one seeded random property case (random ops, sizes, MTU, impairments); replays a failing "
       "seed",
       scenario_property},
      {"fabric-selftest",
       "synthetic traffic (no engine): ECMP spread, serialization, loss and reorder rates",
       scenario_fabric_selftest},
      {"workload",
       "datacenter traffic (websearch/fbhdp/... Poisson, incast, all-to-all, permutation) on a "
       "leaf-spine "
       "or fat-tree with the switch model; FCT slowdown, queues, PFC, utilisation, events/s",
       scenario_workload},
      {"loss-sweep",
       "one QP, 100 Gbit/s, random loss 0..5 %: goodput of go-back-N, selective repeat, 16 lanes",
       scenario_lossy_loss_sweep},
      {"reorder-only",
       "four paths of different delay, no loss: spurious retransmissions, lanes vs gap-is-loss",
       scenario_lossy_reorder_only},
      {"path-failure",
       "one of four spines blackholes mid-transfer: lane retirement time, goodput dip, no WR lost",
       scenario_lossy_path_failure},
      {"lane-weights",
       "one of four spines at a fraction of the rate, ECN on: equal spraying vs lane weights",
       scenario_lossy_lane_weights},
      {"trim", "heavy incast on a lossy fabric with switch trimming on and off: RTOs and tail FCT",
       scenario_lossy_trim},
      {"spray-vs-ecmp",
       "permutation traffic on a leaf-spine: one lane (ECMP) vs lanes: p99 FCT, link utilisation",
       scenario_lossy_spray_vs_ecmp},
      {"cc-incast",
       "N-to-1 incast: DCQCN, HPCC, Odin, delay-based and no CC, lossless (PFC) and lossy",
       scenario_cc_incast},
      {"cc-alltoall",
       "MoE-style all-to-all: the four controllers, lossless and lossy, and the Odin ablation",
       scenario_cc_alltoall},
      {"cc-websearch",
       "WebSearch Poisson arrivals at 50 % load: the four controllers, lossless and lossy",
       scenario_cc_websearch},
      {"cc-fbhdp", "FbHdp Poisson arrivals at 50 % load: the four controllers, lossless and lossy",
       scenario_cc_fbhdp},
      {"ltp-eval",
       "LTP (learned, probing) beside HPCC, DCQCN, delay and its two ablations on unseen incasts",
       scenario_ltp_eval},
  };
  return kAll;
}

const Scenario* find_scenario(const std::string& name) {
  for (const auto& s : scenarios())
    if (name == s.name) return &s;
  return nullptr;
}

uint64_t ScenarioOptions::param_u64(const std::string& key, uint64_t def) const {
  auto it = params.find(key);
  if (it == params.end()) return def;
  return std::strtoull(it->second.c_str(), nullptr, 0);
}

double ScenarioOptions::param_f64(const std::string& key, double def) const {
  auto it = params.find(key);
  if (it == params.end()) return def;
  return std::strtod(it->second.c_str(), nullptr);
}

std::string ScenarioOptions::param_str(const std::string& key, const std::string& def) const {
  auto it = params.find(key);
  return it == params.end() ? def : it->second;
}

void Reporter::event(const std::string& kind, Json fields) {
  if (quiet_) return;
  Json j = {{"event", kind}};
  j.update(fields);
  print(j, false);
}

void Reporter::summary(Json fields) {
  Json j = {{"event", "summary"}};
  j.update(fields);
  summary_ = j;
  print(j, true);
}

void Reporter::error(const std::string& what) {
  print({{"event", "error"}, {"error", what}}, false);
}

namespace {
std::string scalar(const Json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_float()) {
    char b[64];
    std::snprintf(b, sizeof b, "%.6g", v.get<double>());
    return b;
  }
  return v.dump();
}

bool is_table(const Json& v) { return v.is_array() && !v.empty() && v.front().is_object(); }

void flatten(const Json& j, const std::string& prefix,
             std::vector<std::pair<std::string, std::string>>& out) {
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it)
      flatten(it.value(), prefix.empty() ? it.key() : prefix + "." + it.key(), out);
  } else {
    out.emplace_back(prefix, scalar(j));
  }
}

// "k=v k=v ..." for one object.
std::string row(const Json& j) {
  std::vector<std::pair<std::string, std::string>> kv;
  flatten(j, "", kv);
  std::string line;
  for (auto& [k, v] : kv) line += (line.empty() ? "" : " ") + k + "=" + v;
  return line;
}
}  // namespace

void Reporter::print(const Json& j, bool is_summary) {
  if (json_) {
    std::fprintf(out_, "%s\n", j.dump().c_str());
    std::fflush(out_);
    return;
  }
  // Text: scalars and small objects flattened to key=value; arrays of
  // objects (per-spine counters, ...) one row per element below.
  Json rest = j;
  const std::string kind = rest.value("event", "");
  rest.erase("event");
  Json tables = Json::object();
  for (auto it = rest.begin(); it != rest.end(); ++it)
    if (is_table(it.value())) tables[it.key()] = it.value();
  for (auto it = tables.begin(); it != tables.end(); ++it) rest.erase(it.key());
  std::vector<std::pair<std::string, std::string>> kv;
  flatten(rest, "", kv);
  if (is_summary) {
    std::fprintf(out_, "== summary ==\n");
    size_t w = 0;
    for (auto& [k, v] : kv) w = std::max(w, k.size());
    for (auto& [k, v] : kv)
      std::fprintf(out_, "  %-*s  %s\n", static_cast<int>(w), k.c_str(), v.c_str());
  } else {
    std::string line = "[" + kind + "]";
    for (auto& [k, v] : kv) line += " " + k + "=" + v;
    std::fprintf(out_, "%s\n", line.c_str());
  }
  for (auto it = tables.begin(); it != tables.end(); ++it) {
    std::fprintf(out_, "  %s:\n", it.key().c_str());
    for (const auto& e : it.value()) std::fprintf(out_, "    %s\n", row(e).c_str());
  }
  std::fflush(out_);
}

}  // namespace sroce::sim
