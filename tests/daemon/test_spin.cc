// AdaptiveSpin (userspace/daemon/src/spin.h): the loop's spin before sleeping.
#include <catch2/catch.hpp>

#include "spin.h"

using sroce::Duration;
using sroce::daemon::AdaptiveSpin;

namespace {

constexpr int64_t kUs = 1'000'000;  // ps
Duration us(int64_t n) { return Duration{n * kUs}; }

// Idle passes 1 us apart after a pass with work, until the spin gives up or `until` passes;
// returns how long it spun (us).
int64_t spin_for(AdaptiveSpin& s, int64_t until_us, bool crowded = false) {
  s.on_work();
  int64_t t = 0;
  for (; t < until_us; ++t)
    if (!s.keep_spinning(us(t), [&] { return crowded; })) return t;
  return t;
}

}  // namespace

TEST_CASE("an idle daemon stops spinning: each spin that catches nothing halves the next", "[spin]") {
  AdaptiveSpin s(50);
  CHECK(s.spin_ps() == 50 * kUs);
  CHECK(spin_for(s, 1000) == 50);  // the first spin lasts the maximum
  CHECK(spin_for(s, 1000) == 25);
  CHECK(spin_for(s, 1000) == 13);  // 12.5 us: passes at 0..12
  for (int i = 0; i < 40; ++i) spin_for(s, 1000);
  CHECK(s.spin_ps() == 0);
  CHECK(spin_for(s, 1000) == 0);  // sleeps at once
}

TEST_CASE("work that comes while spinning, or soon after falling asleep, lengthens the spin", "[spin]") {
  AdaptiveSpin s(50);
  for (int i = 0; i < 40; ++i) spin_for(s, 1000);
  REQUIRE(s.spin_ps() == 0);
  // Woken 10 us after falling asleep: a spin would have caught that.
  s.on_wake(us(10));
  CHECK(s.spin_ps() == AdaptiveSpin::kMinGrowPs);
  s.on_wake(us(10));
  CHECK(s.spin_ps() == 2 * AdaptiveSpin::kMinGrowPs);
  // A wake-up later than the maximum spin is no reason to spin.
  s.on_wake(us(80));
  CHECK(s.spin_ps() == 2 * AdaptiveSpin::kMinGrowPs);
  // Work arriving 2 us into a spin doubles it, up to the maximum.
  for (int i = 0; i < 10; ++i) {
    s.on_work();
    REQUIRE(s.keep_spinning(us(0), [] { return false; }));
    REQUIRE(s.keep_spinning(us(2), [] { return false; }));
    s.on_work();
  }
  CHECK(s.spin_ps() == 50 * kUs);
}

TEST_CASE("no spin while more tasks are runnable than CPUs, asked once per idle stretch", "[spin]") {
  AdaptiveSpin s(50);
  int asked = 0;
  s.on_work();
  CHECK_FALSE(s.keep_spinning(us(0), [&] { return ++asked, true; }));
  CHECK(asked == 1);
  CHECK(s.spin_ps() == 25 * kUs);  // halved: the spin could not run
  // Not crowded: it spins again, and the question is asked once for the whole spin.
  s.on_work();
  for (int t = 0; t < 25; ++t) REQUIRE(s.keep_spinning(us(t), [&] { return ++asked, false; }));
  CHECK_FALSE(s.keep_spinning(us(25), [&] { return ++asked, false; }));
  CHECK(asked == 2);
  // With nothing left to spend, nobody is asked.
  AdaptiveSpin none(0);
  none.on_work();
  CHECK_FALSE(none.keep_spinning(us(0), [&] { return ++asked, false; }));
  CHECK(asked == 2);
}
