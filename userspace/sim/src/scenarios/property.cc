// property: one seeded random property case (see sroce/sim/property.h); the
// replay target for failing seeds of tests/property. --set verbose=1 prints
// every post and completion; --set count=N runs N consecutive seeds;
// --set ops=send,write,atomic limits the operation classes.
#include "sroce/sim/property.h"

#include "sroce/sim/pcap.h"
#include "util.h"

namespace sroce::sim {

int scenario_property(const ScenarioOptions& opt, Reporter& rep) {
  PropertyConfig cfg;
  cfg.verbose = opt.param_u64("verbose", 0) != 0;
  cfg.max_ops = static_cast<uint32_t>(opt.param_u64("max_ops", cfg.max_ops));
  cfg.faults = opt.param_u64("faults", 1) != 0;
  if (auto it = opt.params.find("ops"); it != opt.params.end()) {
    cfg.ops = PropertyConfig::parse_ops(it->second);
    if (cfg.ops == 0) {
      rep.error("--set ops= takes a comma list of send,write,read,atomic; got '" + it->second + "'");
      return 2;
    }
  }
  const uint64_t count = opt.param_u64("count", 1);
  // --pcap captures the (first) case: the fabric is built inside the harness.
  std::unique_ptr<PcapWriter> pcap;
  if (!opt.pcap.empty()) {
    pcap = std::make_unique<PcapWriter>();
    if (!pcap->open(opt.pcap)) {
      rep.error("cannot open pcap file " + opt.pcap);
      return 1;
    }
    pcap->set_edge_only(opt.pcap_edge_only);
    cfg.tap = pcap.get();
  }
  uint64_t failed = 0, events = 0, ops = 0;
  Json failing = Json::array();
  for (uint64_t i = 0; i < count; ++i) {
    const uint64_t seed = opt.seed + i;
    const PropertyResult r = run_property_case(seed, cfg);
    cfg.tap = nullptr;
    for (const auto& line : r.trace) rep.event("trace", {{"seed", seed}, {"line", line}});
    Json j = {{"seed", seed},           {"ok", r.ok},
              {"case", r.description},  {"fault", r.fault},
              {"ops", r.ops},           {"bytes", r.bytes},
              {"completions", r.completions},
              {"sim_time_us", r.sim_time_us},
              {"events", r.events},     {"frames_lost", r.frames_lost},
              {"frames_corrupted", r.frames_corrupted},
              {"frames_duplicated", r.frames_duplicated},
              {"retransmits", r.retransmits},
              {"naks", r.naks},         {"rnr_naks", r.rnr_naks},
              {"timeouts", r.timeouts}};
    if (!r.ok) {
      j["failures"] = r.failures;
      j["replay"] = property_replay_hint(seed);
      ++failed;
      failing.push_back(seed);
    }
    events += r.events;
    ops += r.ops;
    if (count == 1) {
      Json sum = {{"scenario", "property"}};
      sum.update(j);
      rep.summary(sum);
    } else {
      rep.event("case", j);
    }
  }
  if (count > 1)
    rep.summary({{"scenario", "property"}, {"ok", failed == 0}, {"seed", opt.seed}, {"cases", count},
                 {"failed", failed}, {"failing_seeds", failing}, {"ops", ops}, {"events", events}});
  return failed == 0 ? 0 : 1;
}

}  // namespace sroce::sim
