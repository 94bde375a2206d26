// The lab model itself (userspace/cc/lab): it must be right before its
// numbers mean anything.
#include <catch2/catch.hpp>

#include <vector>

#include "cc_test_util.h"

using namespace sroce;
using namespace sroce::cc;
using namespace sroce::cc::test;
using namespace sroce::cc::lab;

namespace {

// A controller that never limits: DCQCN without ECN marks stays at line rate.
LabConfig open_loop() {
  LabConfig cfg;
  cfg.cc = with(Algorithm::kDcqcn);
  cfg.ecn = false;
  cfg.pfc = false;
  return cfg;
}

}  // namespace

TEST_CASE("lab: one flow alone fills the port, base RTT and FCT are exact", "[lab]") {
  LabConfig cfg = open_loop();
  cfg.hosts = 1;
  cfg.end = at_us(1000);
  const uint64_t bytes = 4096 * 100;
  const std::vector<LabFlowSpec> specs = {{0, 0, Time::zero(), bytes}};
  const LabResult r = run_lab(cfg, specs);
  // 4 x 2 us propagation + one serialisation of 4178 B at each of the NIC and the port.
  const Duration ser = tx_time(4178, 100e9);
  CHECK(r.base_rtt == Duration::micros(8) + ser * 2);
  REQUIRE(r.flows[0].finish != Time::never());
  CHECK(r.flows[0].delivered == bytes);
  // The last packet leaves the NIC after 100 serialisations, then travels one
  // base RTT less its NIC serialisation (already counted) plus jitter < one packet.
  const Time expect = Time::zero() + ser * 100 + r.base_rtt - ser;
  CHECK(r.flows[0].finish >= expect);
  CHECK(r.flows[0].finish <= expect + ser);
  // No competing traffic: the queue never holds more than one packet behind another.
  CHECK(percentile(r.queue_samples, 100) <= 2 * 4178);
}

TEST_CASE("lab: two unlimited flows overload the port, PFC bounds the pool", "[lab]") {
  LabConfig cfg = open_loop();
  cfg.pfc = true;
  cfg.xoff_bytes = 500'000;
  cfg.end = at_us(2000);
  const std::vector<LabFlowSpec> specs = {{0, 0, Time::zero(), 0}, {1, 0, Time::zero(), 0}};
  const LabResult r = run_lab(cfg, specs);
  CHECK(r.xoff_crossings > 0);
  CHECK(r.paused > Duration::micros(500));  // half the offered load must wait
  // XOFF plus what was already on its way: per host the packet being sent,
  // the ~6 on the 2 us link and one of jitter.
  CHECK(r.max_pool <= cfg.xoff_bytes + 2 * 9 * 4178);
  CHECK(utilisation(r, cfg, 0, at_us(100), cfg.end) > 0.99);
  CHECK(jain(r, cfg, at_us(100), cfg.end) > 0.99);  // the NICs are paused alike
}

TEST_CASE("lab: runs are a pure function of their inputs", "[lab]") {
  LabConfig cfg;
  cfg.cc = with(Algorithm::kDcqcn);
  cfg.end = at_us(1500);
  const std::vector<LabFlowSpec> specs = {{0, 0, Time::zero(), 0}, {1, 0, at_us(300), 0}};
  const LabResult a = run_lab(cfg, specs);
  const LabResult b = run_lab(cfg, specs);
  CHECK(a.events == b.events);
  CHECK(a.queue_samples == b.queue_samples);
  CHECK(a.flows[1].bins == b.flows[1].bins);
  cfg.seed = 2;  // another marking / jitter stream: another run
  const LabResult c = run_lab(cfg, specs);
  CHECK(c.queue_samples != a.queue_samples);
}

TEST_CASE("lab: metrics", "[lab]") {
  CHECK(percentile({}, 99) == 0);
  std::vector<uint32_t> v;
  for (uint32_t i = 1; i <= 100; ++i) v.push_back(i);
  CHECK(percentile(v, 99) == 99);
  CHECK(percentile(v, 50) == 50);
  CHECK(percentile(v, 100) == 100);

  // Jain and the convergence time on a hand-made timeline.
  LabConfig cfg;
  cfg.end = at_us(100);
  cfg.bin = Duration::micros(10);
  LabResult r;
  r.flows.resize(2);
  r.flows[0].bins.assign(11, 1000);
  r.flows[1].bins.assign(11, 0);
  for (int i = 5; i < 11; ++i) r.flows[1].bins[i] = 1000;  // flow 1 from 50 us on
  const std::vector<int> ids = {0, 1};
  CHECK(jain(r, cfg, at_us(0), at_us(50)) == Approx(0.5));
  CHECK(jain(r, cfg, at_us(50), at_us(100)) == Approx(1.0));
  const double cap = rate_of(2000, Duration::micros(10));
  CHECK(convergence_time(r, cfg, ids, cap, at_us(20), Duration::micros(20), 0.99, 0.8) == Duration::micros(30));
  r.flows[1].bins[9] = 0;  // unfair at the end: never converged
  CHECK(convergence_time(r, cfg, ids, cap, at_us(20), Duration::micros(20), 0.99, 0.8).ps < 0);
}
