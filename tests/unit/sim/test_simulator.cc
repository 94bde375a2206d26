// The discrete-event core: ordering, time, determinism of the RNG.
#include <catch2/catch.hpp>
#include <algorithm>
#include <tuple>
#include <vector>

#include "sroce/sim/rng.h"
#include "sroce/sim/simulator.h"

using namespace sroce;
using namespace sroce::sim;

namespace {
struct Recorder : EventSink {
  std::vector<std::pair<int64_t, uint64_t>> seen;  // (time, arg)
  void on_event(uint32_t, uint64_t arg, Time now) override { seen.emplace_back(now.ps, arg); }
};
}  // namespace

TEST_CASE("events run in time order, ties in scheduling order", "[sim][des]") {
  Simulator sim(1);
  Recorder r;
  sim.schedule(Time{300}, &r, 0, 1);
  sim.schedule(Time{100}, &r, 0, 2);
  sim.schedule(Time{200}, &r, 0, 3);
  sim.schedule(Time{100}, &r, 0, 4);  // same time as arg 2, scheduled later
  sim.schedule(Time{100}, &r, 0, 5);
  CHECK(sim.run() == 5);
  const std::vector<std::pair<int64_t, uint64_t>> want = {{100, 2}, {100, 4}, {100, 5}, {200, 3}, {300, 1}};
  CHECK(r.seen == want);
  CHECK(sim.now() == Time{300});
}

TEST_CASE("the event queue runs many interleaved events in (time, scheduling) order", "[sim][des]") {
  // The 4-ary heap against a sorted reference: random times with many ties,
  // scheduled both up front and from inside events, as the fabric does.
  Simulator sim(1);
  Rng rng(7);
  struct Chain : EventSink {
    Simulator* sim = nullptr;
    Rng* rng = nullptr;
    std::vector<std::pair<int64_t, uint64_t>> seen;  // (time, id)
    std::vector<std::tuple<int64_t, uint64_t, uint64_t>> want;  // (time, seq, id)
    uint64_t next_id = 0, seq = 0;
    void add(Time at) {
      want.emplace_back(at.ps, seq++, next_id);
      sim->schedule(at, this, 0, next_id++);
    }
    void on_event(uint32_t, uint64_t id, Time now) override {
      seen.emplace_back(now.ps, id);
      if (next_id < 20000)
        for (uint32_t k = rng->below(3); k > 0; --k) add(now + Duration::picos(static_cast<int64_t>(rng->below(50))));
    }
  } c;
  c.sim = &sim;
  c.rng = &rng;
  for (int i = 0; i < 3000; ++i) c.add(Time{static_cast<int64_t>(rng.below(1000))});
  sim.run();
  std::sort(c.want.begin(), c.want.end());
  REQUIRE(c.seen.size() == c.want.size());
  CHECK(c.seen.size() > 10000);
  bool same = true;
  for (size_t i = 0; i < c.seen.size(); ++i)
    same = same && c.seen[i].first == std::get<0>(c.want[i]) && c.seen[i].second == std::get<2>(c.want[i]);
  CHECK(same);
  CHECK(sim.pending() == 0);
}

TEST_CASE("events scheduled from events keep the order", "[sim][des]") {
  Simulator sim(1);
  std::vector<int> order;
  sim.call_at(Time{10}, [&](Time now) {
    order.push_back(1);
    sim.call_at(now, [&](Time) { order.push_back(3); });  // same time: after already-queued ties
    sim.call_at(now + Duration::picos(1), [&](Time) { order.push_back(4); });
  });
  sim.call_at(Time{10}, [&](Time) { order.push_back(2); });
  sim.run();
  CHECK(order == std::vector<int>{1, 2, 3, 4});
}

TEST_CASE("run(until) stops at the horizon and advances time to it", "[sim][des]") {
  Simulator sim(1);
  Recorder r;
  for (int i = 1; i <= 10; ++i) sim.schedule(Time{i * 1000}, &r, 0, static_cast<uint64_t>(i));
  CHECK(sim.run(Time{5500}) == 5);
  CHECK(sim.now() == Time{5500});
  CHECK(sim.pending() == 5);
  CHECK(sim.next_event_time() == Time{6000});
  CHECK(sim.run(Time::never(), 2) == 2);
  CHECK(sim.now() == Time{7000});
  CHECK(sim.run() == 3);
  CHECK(r.seen.size() == 10);
}

TEST_CASE("stop() ends run() after the current event", "[sim][des]") {
  Simulator sim(1);
  int n = 0;
  for (int i = 0; i < 10; ++i)
    sim.call_at(Time{i}, [&](Time) {
      if (++n == 4) sim.stop();
    });
  sim.run();
  CHECK(n == 4);
  CHECK(sim.pending() == 6);
}

TEST_CASE("scheduling in the past is clamped to now and counted", "[sim][des]") {
  Simulator sim(1);
  Recorder r;
  sim.call_at(Time{1000}, [&](Time) { sim.schedule(Time{10}, &r, 0, 7); });
  sim.run();
  REQUIRE(r.seen.size() == 1);
  CHECK(r.seen[0].first == 1000);
  CHECK(sim.late_schedules() == 1);
}

TEST_CASE("the RNG is deterministic per seed and its helpers stay in range", "[sim][rng]") {
  Rng a(42), b(42), c(43);
  bool differs = false;
  for (int i = 0; i < 1000; ++i) {
    const uint64_t x = a.next();
    CHECK(x == b.next());
    differs = differs || x != c.next();
  }
  CHECK(differs);
  Rng r(7);
  std::vector<int> hist(10);
  for (int i = 0; i < 100000; ++i) {
    const uint64_t v = r.below(10);
    REQUIRE(v < 10);
    ++hist[v];
    const int64_t s = r.range(-3, 3);
    REQUIRE(s >= -3);
    REQUIRE(s <= 3);
    const double d = r.real();
    REQUIRE(d >= 0.0);
    REQUIRE(d < 1.0);
  }
  for (int h : hist) CHECK(std::abs(h - 10000) < 500);  // ~5 sigma
  CHECK_FALSE(r.chance(0.0));
  CHECK(r.chance(1.0));
  int hits = 0;
  for (int i = 0; i < 100000; ++i) hits += r.chance(0.01);
  CHECK(std::abs(hits - 1000) < 160);  // ~5 sigma
}
