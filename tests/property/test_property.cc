// Property tests of the engine on the impaired simulated fabric: thousands of
// seeded random cases (see sroce/sim/property.h for what each checks).
//
// Environment:
//   SROCE_SEED=N               run only seed N, with a full trace on failure
//   SROCE_PROPERTY_CASES=N     number of cases (default 2000)
//   SROCE_PROPERTY_SEED=N      first seed (default 1)
//   SROCE_PROPERTY_OPS=list    operation classes, e.g. "send,write,atomic"
// A failing seed replays with `sroce-sim run property --seed N` (add
// `--set verbose=1` for every post and completion).
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "sroce/sim/property.h"

using namespace sroce;
using namespace sroce::sim;

namespace {
uint64_t env_u64(const char* name, uint64_t def) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtoull(v, nullptr, 0) : def;
}

PropertyConfig env_config() {
  PropertyConfig cfg;
  if (const char* ops = std::getenv("SROCE_PROPERTY_OPS"); ops && *ops) {
    cfg.ops = PropertyConfig::parse_ops(ops);
    if (cfg.ops == 0) FAIL("SROCE_PROPERTY_OPS: want a comma list of send,write,read,atomic");
  }
  return cfg;
}

void report_failure(const PropertyResult& r) {
  std::string msg = "seed " + std::to_string(r.seed) + " failed: " + r.description;
  if (!r.fault.empty()) msg += " fault=" + r.fault;
  for (const auto& f : r.failures) msg += "\n  - " + f;
  msg += "\n  " + property_replay_hint(r.seed);
  for (const auto& t : r.trace) msg += "\n    " + t;
  UNSCOPED_INFO(msg);
}
}  // namespace

TEST_CASE("random RC workloads over the impaired fabric keep every property", "[property]") {
  PropertyConfig cfg = env_config();
  if (const char* one = std::getenv("SROCE_SEED"); one && *one) {
    cfg.verbose = true;
    const PropertyResult r = run_property_case(std::strtoull(one, nullptr, 0), cfg);
    if (!r.ok) report_failure(r);
    CHECK(r.ok);
    return;
  }
  const uint64_t first = env_u64("SROCE_PROPERTY_SEED", 1);
  const uint64_t cases = env_u64("SROCE_PROPERTY_CASES", 2000);
  uint64_t failed = 0, ops = 0, bytes = 0, lost = 0, corrupted = 0, faults = 0;
  std::string seeds;
  for (uint64_t seed = first; seed < first + cases; ++seed) {
    const PropertyResult r = run_property_case(seed, cfg);
    ops += r.ops;
    bytes += r.bytes;
    lost += r.frames_lost;
    corrupted += r.frames_corrupted;
    faults += !r.fault.empty();
    if (!r.ok) {
      if (failed < 5) report_failure(r);
      seeds += (failed ? "," : "") + std::to_string(seed);
      ++failed;
    }
  }
  std::printf("property: %llu cases from seed %llu: %llu ops, %llu bytes, %llu frames lost, "
              "%llu corrupted, %llu protection faults; %llu failed%s%s\n",
              static_cast<unsigned long long>(cases), static_cast<unsigned long long>(first),
              static_cast<unsigned long long>(ops), static_cast<unsigned long long>(bytes),
              static_cast<unsigned long long>(lost), static_cast<unsigned long long>(corrupted),
              static_cast<unsigned long long>(faults), static_cast<unsigned long long>(failed),
              failed ? ": seeds " : "", seeds.c_str());
  INFO("failing seeds: " << seeds);
  CHECK(failed == 0);
  // The generator must actually exercise the fabric.
  CHECK(lost > 0);
  CHECK(corrupted > 0);
  CHECK(faults > 0);
}

TEST_CASE("a property case is a pure function of its seed", "[property][determinism]") {
  for (uint64_t seed : {3u, 17u, 101u}) {
    const PropertyResult a = run_property_case(seed);
    const PropertyResult b = run_property_case(seed);
    CHECK(a.description == b.description);
    CHECK(a.events == b.events);
    CHECK(a.completions == b.completions);
    CHECK(a.sim_time_us == b.sim_time_us);
    CHECK(a.frames_lost == b.frames_lost);
    CHECK(a.failures == b.failures);
  }
  CHECK(run_property_case(3).description != run_property_case(4).description);
}

// The checkers must be able to fail: each deliberate harness-side fault is
// caught, on cases that otherwise pass.
TEST_CASE("the property oracle catches planted faults", "[property][oracle]") {
  using S = PropertyConfig::Sabotage;
  PropertyConfig base;
  base.ops = PropertyConfig::kOpSend | PropertyConfig::kOpWrite | PropertyConfig::kOpAtomic;
  base.faults = false;
  base.max_ops = 20;
  struct Plant {
    S s;
    const char* expect;  // substring of some failure message
  };
  const Plant plants[] = {
      {S::kCorruptWrite, "differs from the model"},
      {S::kDropCompletion, "missing"},
      {S::kDuplicateCompletion, "completion"},
      {S::kWriteOutside, "outside every registered region"},
  };
  for (const Plant& p : plants) {
    int caught = 0, tried = 0;
    for (uint64_t seed = 1; seed <= 12; ++seed) {
      if (!run_property_case(seed, base).ok) continue;  // only judge on clean cases
      PropertyConfig cfg = base;
      cfg.sabotage = p.s;
      const PropertyResult r = run_property_case(seed, cfg);
      ++tried;
      bool found = false;
      for (const auto& f : r.failures) found = found || f.find(p.expect) != std::string::npos;
      caught += !r.ok && found;
    }
    INFO("sabotage " << static_cast<int>(p.s) << ": caught " << caught << " of " << tried);
    CHECK(tried >= 8);
    CHECK(caught >= tried - 1);  // a planted write can land on an all-zero-length case
  }
}

// READ-heavy mixes (READs and atomics only, then READs only): in lossy mode
// the READ responses are sprayed over the lanes and recovered selectively
// (docs/lossy.md, READ responses), so loss, duplication, reordering and
// trimming hit them as they hit requests; every property must still hold.
TEST_CASE("READ-heavy workloads over the impaired fabric keep every property", "[property][read]") {
  const uint64_t first = env_u64("SROCE_PROPERTY_SEED", 1);
  const uint64_t cases = std::max<uint64_t>(env_u64("SROCE_PROPERTY_CASES", 2000) / 16, 1);
  for (const uint32_t ops : {PropertyConfig::kOpRead | PropertyConfig::kOpAtomic,
                             PropertyConfig::kOpRead}) {
    PropertyConfig cfg;
    cfg.ops = ops;
    uint64_t failed = 0, lossy = 0, lost = 0;
    std::string seeds;
    for (uint64_t seed = first; seed < first + cases; ++seed) {
      const PropertyResult r = run_property_case(seed, cfg);
      lossy += r.lossy ? 1 : 0;
      lost += r.frames_lost;
      if (!r.ok) {
        if (failed < 5) report_failure(r);
        seeds += (failed ? "," : "") + std::to_string(seed);
        ++failed;
      }
    }
    std::printf("property READ-heavy (ops %u): %llu cases, %llu lossy, %llu frames lost; %llu failed%s%s\n",
                ops, static_cast<unsigned long long>(cases), static_cast<unsigned long long>(lossy),
                static_cast<unsigned long long>(lost), static_cast<unsigned long long>(failed),
                failed ? ": seeds " : "", seeds.c_str());
    INFO("ops " << ops << " failing seeds: " << seeds);
    CHECK(failed == 0);
    CHECK(lossy > 0);
    CHECK(lost > 0);
  }
}
