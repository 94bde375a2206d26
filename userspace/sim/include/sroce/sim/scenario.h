// Scenarios: named, seeded runs of the fabric that print what happened.
// Output is one JSON object per line (the last one is the summary, with
// "event":"summary"), or a readable rendering of the same objects.
#pragma once

#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace sroce::sim {

// Insertion-ordered, so "event" comes first and fields print as written.
using Json = nlohmann::ordered_json;

struct ScenarioOptions {
  uint64_t seed = 1;
  std::string pcap;           // empty: no capture
  bool pcap_edge_only = false;
  bool json = false;
  bool quiet = false;         // only the summary
  // Free-form key=value parameters (--set key=value), scenario-specific.
  std::map<std::string, std::string> params;

  uint64_t param_u64(const std::string& key, uint64_t def) const;
  double param_f64(const std::string& key, double def) const;
  std::string param_str(const std::string& key, const std::string& def) const;
};

class Reporter {
 public:
  Reporter(std::FILE* out, bool json, bool quiet) : out_(out), json_(json), quiet_(quiet) {}
  // A progress/detail record: {"event": kind, ...fields}.
  void event(const std::string& kind, Json fields);
  // The final record: {"event":"summary", "scenario": name, ...}.
  void summary(Json fields);
  // An error record (always printed).
  void error(const std::string& what);

  const Json& last_summary() const { return summary_; }

 private:
  void print(const Json& j, bool is_summary);
  std::FILE* out_;
  bool json_;
  bool quiet_;
  Json summary_;
};

// A scenario returns the process exit status: 0 when every check it makes
// passed, 1 otherwise (the summary says which).
using ScenarioFn = int (*)(const ScenarioOptions&, Reporter&);

struct Scenario {
  const char* name;
  const char* description;
  ScenarioFn run;
};

const std::vector<Scenario>& scenarios();
const Scenario* find_scenario(const std::string& name);

}  // namespace sroce::sim
