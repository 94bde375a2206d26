// Congestion-control experiments (docs/results/cc.md): one run of a traffic
// pattern on a leaf-spine of engine-driven hosts with one controller
// configuration, and the metrics the cc-* scenarios compare.
#pragma once

#include <string>
#include <vector>

#include "sroce/cc/cc.h"
#include "sroce/sim/scenario.h"

namespace sroce::sim {

// One configuration to compare.
struct CcCase {
  std::string name;  // JSON key: dcqcn, hpcc, odin, delay, none, odin_no_flag ...
  bool cc = true;    // false: no congestion control (the engine as before)
  cc::Algorithm alg = cc::Algorithm::kHpcc;
  bool lossless = true;    // PFC on, compatible mode; false: no PFC, lossy mode (lanes + SR)
  bool odin_flag = true;   // Odin part 1: shared-buffer flag
  bool odin_ratio = true;  // Odin part 2: NIC-level ratio
  bool odin_comp = true;   // Odin part 3: compensation step
  cc::LtpVariant ltp = cc::LtpVariant::kFull;  // LTP: full or an ablation (docs/cc/ltp.md)
  const cc::LtpNet* ltp_net = nullptr;  // LTP: these weights instead of the shipped ones (ltp-train)
  bool ltp_info_gain = false;           // LTP: track the filter's information gain (JSON ltp_info_gain_per_mi)
};

// What one case measured (also the JSON object of the summary).
struct CcResult {
  Json json;
  bool ok = false;
  double p99 = 0, p50 = 0;
  uint64_t queue_p99 = 0;
  uint64_t pfc = 0;
  double goodput_gbps = 0;
  // The same flows under ideal max-min fair sharing of the NICs (fluid;
  // cc_eval.cc): p50/p95/p99 slowdown. Null with --set fair_share=0.
  Json fair_share;
};

// traffic: incast | alltoall | websearch | fbhdp (| permutation). Reads the
// fabric and traffic parameters from opt.params (cc_eval.cc lists them).
CcResult run_cc_case(const ScenarioOptions& opt, const std::string& traffic, const CcCase& c);

// The cases the cc-* scenarios run: the four algorithms (lossless and, with
// modes=both|lossy, lossy), the no-CC baseline, and with `ablation` Odin with
// each part off.
std::vector<CcCase> cc_cases(const ScenarioOptions& opt, bool ablation_default);

// Runs `cases` and prints the summary line (one object per case name; the
// lossy ones under "lossy").
int run_cc_scenario(const ScenarioOptions& opt, Reporter& rep, const std::string& scenario,
                    const std::string& traffic, bool ablation_default);

}  // namespace sroce::sim
