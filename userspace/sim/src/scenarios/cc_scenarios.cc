// The congestion-control scenarios of issue 5 (docs/results/cc.md): DCQCN,
// HPCC, Odin and the delay-based controller side by side on the same
// traffic, lossless (PFC, compatible mode) and lossy (no PFC, lanes +
// selective repeat), plus the no-CC baseline and, for all-to-all, the Odin
// ablation. Parameters: cc_eval.cc.
#include "sroce/sim/cc_eval.h"

namespace sroce::sim {

int scenario_cc_incast(const ScenarioOptions& opt, Reporter& rep) {
  return run_cc_scenario(opt, rep, "cc-incast", "incast", false);
}
int scenario_cc_alltoall(const ScenarioOptions& opt, Reporter& rep) {
  return run_cc_scenario(opt, rep, "cc-alltoall", "alltoall", true);
}
int scenario_cc_websearch(const ScenarioOptions& opt, Reporter& rep) {
  return run_cc_scenario(opt, rep, "cc-websearch", "websearch", false);
}
int scenario_cc_fbhdp(const ScenarioOptions& opt, Reporter& rep) {
  return run_cc_scenario(opt, rep, "cc-fbhdp", "fbhdp", false);
}

}  // namespace sroce::sim
