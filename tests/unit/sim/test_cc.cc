// Congestion control on the simulated fabric with the real engine
// (scenarios/cc_eval.cc): a small N-to-1 incast must settle at line rate
// with a bounded queue under each controller, and without congestion
// control the same incast must hold a much larger queue (so the bounds
// below can fail). Full-size figures: docs/results/cc.md.
#include <catch2/catch.hpp>
#include <map>
#include <string>

#include "run_scenario.h"
#include "sroce/sim/scenario.h"

using sroce::sim::Json;
using sroce::test::run_scenario;

namespace {

// 7 senders on an 8-host leaf-spine, 1 MiB each into host 0, PFC on.
const std::map<std::string, std::string> kIncast = {{"hosts", "8"},        {"hosts_per_leaf", "4"},
                                                    {"fanin", "7"},        {"bytes", "1048576"},
                                                    {"modes", "lossless"}, {"ablation", "0"}};

}  // namespace

TEST_CASE("cc incast: every controller settles near line rate with a bounded queue", "[sim][cc]") {
  auto [rc, sum] = run_scenario("cc-incast", kIncast);
  INFO(sum.dump());
  REQUIRE(rc == 0);
  const Json& none = sum.at("none");
  // No congestion control: PFC holds the incast's queue at its XOFF level
  // (7 ingress ports x 256 KB at most), pause after pause.
  CHECK(none.at("settled_queue_p99_bytes").get<double>() > 500e3);
  CHECK(none.at("pfc_pauses").get<uint64_t>() > 50);
  for (const char* alg : {"hpcc", "odin", "delay"}) {
    INFO(alg);
    const Json& r = sum.at(alg);
    CHECK(r.at("completed").get<uint64_t>() == 7);
    // The bottleneck stays busy: >= 80 % of line rate over the whole
    // transfer, including the first RTT (all senders start at line rate, the
    // burst is cut hard) and the last stragglers; measured 0.85 (HPCC, Odin)
    // and 0.91 (delay).
    CHECK(r.at("bottleneck_util").get<double>() >= 0.80);
    // Once settled, the queue is a small fraction of the no-CC queue:
    // HPCC/Odin aim at near zero (eta 0.95), Swift at its delay target
    // (a few us of queue at 100 Gb/s).
    const double bound = std::string(alg) == "delay" ? 250e3 : 60e3;
    CHECK(r.at("settled_queue_p99_bytes").get<double>() < bound);
    CHECK(r.at("settled_queue_p99_bytes").get<double>() * 4 <
          none.at("settled_queue_p99_bytes").get<double>());
    CHECK(r.at("pfc_pauses").get<uint64_t>() * 4 < none.at("pfc_pauses").get<uint64_t>());
    // Slowdown of a fair incast is about the fan-in (7 flows share a link).
    CHECK(r.at("p99_slowdown").get<double>() < 7 * 1.5);
  }
  // DCQCN (ConnectX preset) reacts to marks: it completes, with a queue
  // below the no-CC one (it oscillates around Kmax; docs/results/cc.md).
  const Json& d = sum.at("dcqcn");
  CHECK(d.at("completed").get<uint64_t>() == 7);
  CHECK(d.at("settled_queue_p99_bytes").get<double>() <
        none.at("settled_queue_p99_bytes").get<double>());
}

TEST_CASE("cc incast lossy: lanes + selective repeat with HPCC drop far less than without CC",
          "[sim][cc]") {
  auto p = kIncast;
  p["modes"] = "lossy";
  p["algs"] = "hpcc";
  auto [rc, sum] = run_scenario("cc-incast", p);
  INFO(sum.dump());
  REQUIRE(rc == 0);
  const Json& l = sum.at("lossy");
  CHECK(l.at("hpcc").at("completed").get<uint64_t>() == 7);
  CHECK(l.at("hpcc").at("pfc_pauses").get<uint64_t>() == 0);
  // Without CC the incast overflows the buffer (measured ~300 drops); HPCC
  // keeps the queue far below the dynamic threshold.
  CHECK(l.at("none").at("drops").get<uint64_t>() > 50);
  CHECK(l.at("hpcc").at("drops").get<uint64_t>() == 0);
  CHECK(l.at("hpcc").at("settled_queue_p99_bytes").get<double>() < 60e3);
}

TEST_CASE("cc incast: HPCC at maxStage 0 keeps a 15-to-1 bottleneck busier than at 5", "[sim][cc]") {
  // The CI-sized incast (16 hosts, 15 x 512 KiB into host 0), seeds 1-3.
  // maxStage 5 grows only after five quiet updates but cuts on one sample
  // above eta: under per-ACK noise the link sat at 0.76-0.84 busy over 5
  // seeds; with 0 (the default, the HPCC artifact's) at 0.90-0.92
  // (docs/cc/hpcc.md, "maxStage").
  // With INT on the wire (8 + 24 bytes a hop on every request) the gap
  // narrows on seed 3 (0.931 vs 0.891): each seed must order them, the
  // three together must differ by more than 0.05 (measured 0.083).
  double gain = 0;
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    double util[2] = {0, 0};
    for (int i = 0; i < 2; ++i) {
      auto [rc, sum] = run_scenario("cc-incast",
                                    {{"modes", "lossless"},
                                     {"algs", "hpcc"},
                                     {"baseline", "0"},
                                     {"hpcc_max_stage", i == 0 ? "0" : "5"}},
                                    seed);
      INFO("seed " << seed << " maxStage " << (i == 0 ? 0 : 5) << ": " << sum.dump());
      REQUIRE(rc == 0);
      util[i] = sum.at("hpcc").at("bottleneck_util").get<double>();
      // The fluid fair-share bound of 15 equal flows into one link: every
      // flow ends together at ~15 x its own ideal transfer time.
      const double fair = sum.at("fair_share").at("p99_slowdown").get<double>();
      CHECK(fair > 12.0);
      CHECK(fair < 15.0);
      CHECK(sum.at("hpcc").at("p99_slowdown").get<double>() > fair);
    }
    INFO("seed " << seed << " util maxStage 0 " << util[0] << ", 5 " << util[1]);
    CHECK(util[0] >= 0.88);
    CHECK(util[1] < 0.90);
    CHECK(util[0] > util[1] + 0.01);
    gain += util[0] - util[1];
  }
  CHECK(gain / 3 > 0.05);
}
