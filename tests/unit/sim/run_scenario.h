// Runs a registered sroce-sim scenario the way `sroce-sim run NAME --json`
// would, its report going to /dev/null; the tests check its summary line.
#pragma once

#include <catch2/catch.hpp>

#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <utility>

#include "sroce/sim/scenario.h"

namespace sroce::test {

// Scenario `name` with `params` and `seed`; returns its exit status and summary.
inline std::pair<int, sim::Json> run_scenario(const std::string& name, std::map<std::string, std::string> params,
                                              uint64_t seed = 1) {
  const auto* s = sim::find_scenario(name);
  REQUIRE(s != nullptr);
  sim::ScenarioOptions opt;
  opt.seed = seed;
  opt.json = true;
  opt.quiet = true;
  opt.params = std::move(params);
  std::FILE* sink = std::fopen("/dev/null", "w");
  REQUIRE(sink != nullptr);
  sim::Reporter rep(sink, true, true);
  const int rc = s->run(opt, rep);
  std::fclose(sink);
  return {rc, rep.last_summary()};
}

}  // namespace sroce::test
