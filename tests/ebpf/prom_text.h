// A strict parser of the Prometheus text exposition format 0.0.4, written
// from the format's specification, to check what `sroce telemetry serve`
// prints. Strict: what the spec leaves out is an error (unknown escapes, a
// TYPE after its samples, a family split in two, a duplicate series, a
// histogram whose buckets are not cumulative or lack +Inf, ...).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "sroce/engine/result.h"

namespace sroce::tmtest {

struct PromSample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

struct PromFamily {
  std::string name;
  std::string type = "untyped";
  std::string help;
  bool has_help = false;
  bool has_type = false;
  std::vector<PromSample> samples;
};

struct PromDoc {
  std::vector<PromFamily> families;

  const PromFamily* family(const std::string& name) const;
  // The sample with exactly these labels, or null.
  const PromSample* find(const std::string& name,
                         const std::map<std::string, std::string>& labels) const;
  std::vector<const PromSample*> all(const std::string& name) const;
};

Result<PromDoc> parse_prometheus(const std::string& text);

// Naming conventions (https://prometheus.io/docs/practices/naming/), beyond
// the grammar: counters end in _total and nothing else does; every family
// has HELP and TYPE. Empty when all is well.
std::vector<std::string> prometheus_convention_problems(const PromDoc& d);

}  // namespace sroce::tmtest
