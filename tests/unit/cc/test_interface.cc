// The one interface: names, dispatch through the variant, per-flow state
// size, no allocation on the event path, the pacer and the NIC state.
#include <catch2/catch.hpp>

#include <atomic>
#include <cstdlib>
#include <new>
#include <vector>

#include "cc_test_util.h"
#include "sroce/cc/cc.h"

namespace {
std::atomic<bool> g_counting{false};
std::atomic<uint64_t> g_allocs{0};
}  // namespace

#if defined(__SANITIZE_ADDRESS__)
// Under ASan, count through its allocator hooks (they see operator new too).
extern "C" int __sanitizer_install_malloc_and_free_hooks(void (*malloc_hook)(const volatile void*, size_t),
                                                         void (*free_hook)(const volatile void*));
namespace {
void on_malloc(const volatile void*, size_t) {
  if (g_counting.load(std::memory_order_relaxed)) g_allocs.fetch_add(1, std::memory_order_relaxed);
}
void on_free(const volatile void*) {}
const int g_hooks = __sanitizer_install_malloc_and_free_hooks(on_malloc, on_free);
}  // namespace
#else
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void* operator new(size_t n) {
  if (g_counting.load(std::memory_order_relaxed)) g_allocs.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void* operator new[](size_t n) { return operator new(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t) noexcept { std::free(p); }
#endif

using namespace sroce;
using namespace sroce::cc;
using namespace sroce::cc::test;

TEST_CASE("cc: algorithm names round-trip", "[cc]") {
  for (Algorithm a : {Algorithm::kDcqcn, Algorithm::kHpcc, Algorithm::kOdin, Algorithm::kDelay,
                      Algorithm::kLtp}) {
    const auto back = parse_algorithm(to_string(a));
    REQUIRE(back.has_value());
    CHECK(*back == a);
  }
  CHECK(std::string(to_string(Algorithm::kDelay)) == "delay");
  CHECK_FALSE(parse_algorithm("swift").has_value());
  CHECK_FALSE(parse_algorithm("").has_value());
}

TEST_CASE("cc: the variant builds the chosen algorithm and forwards every event", "[cc]") {
  NicState nic(100'000'000'000);
  for (Algorithm a : {Algorithm::kDcqcn, Algorithm::kHpcc, Algorithm::kOdin, Algorithm::kDelay,
                      Algorithm::kLtp}) {
    CcConfig cfg = with(a);
    cfg.dcqcn = DcqcnConfig::paper();
    CongestionControl cc(cfg, flow100g(), &nic);
    CHECK(cc.algorithm() == a);
    CHECK((cc.get<Dcqcn>() != nullptr) == (a == Algorithm::kDcqcn));
    CHECK((cc.get<Hpcc>() != nullptr) == (a == Algorithm::kHpcc));
    CHECK((cc.get<Odin>() != nullptr) == (a == Algorithm::kOdin));
    CHECK((cc.get<Swift>() != nullptr) == (a == Algorithm::kDelay));
    CHECK((cc.get<Ltp>() != nullptr) == (a == Algorithm::kLtp));
    // Every algorithm starts at the line rate but LTP, which starts at
    // LtpConfig::start_rate (docs/cc/ltp.md, "A start below the line rate").
    CHECK(cc.rate_bps() == (a == Algorithm::kLtp ? 10'000'000'000 : 100'000'000'000));

    // The same events into the variant and into a directly held controller
    // give the same outputs.
    IntFeed f;
    cc.on_send(SendEvent{at_us(0), 4096, false});
    cc.on_cnp(at_us(1));
    for (double u : {1.0, 2.0, 0.5}) {
      const IntHop h = f.next(u, 0);
      cc.on_send(SendEvent{h.ts, 4096, false});
      AckEvent e = ack(h.ts, 4096, std::span<const IntHop>(&h, 1), Duration::micros(30));
      cc.on_ack(e);
    }
    cc.on_loss(LossEvent{at_us(100), LossKind::kTimeout, 4096});
    if (cc.next_timer() != Time::never()) cc.on_timer(cc.next_timer());
    switch (a) {
      case Algorithm::kDcqcn: {
        CHECK(cc.get<Dcqcn>()->cnps() == 1);
        CHECK(cc.window_bytes() == kNoWindow);
        CHECK(cc.rate_bps() == cc.get<Dcqcn>()->rate_bps());
        CHECK(cc.get<Dcqcn>()->timer_stage() == 1);  // on_timer reached it
        break;
      }
      case Algorithm::kHpcc: {
        Hpcc h(cfg.hpcc, flow100g());
        IntFeed g;
        h.on_send(SendEvent{at_us(0), 4096, false});
        for (double u : {1.0, 2.0, 0.5}) {
          const IntHop r = g.next(u, 0);
          h.on_send(SendEvent{r.ts, 4096, false});
          h.on_ack(ack(r.ts, 4096, std::span<const IntHop>(&r, 1), Duration::micros(30)));
        }
        h.on_loss(LossEvent{at_us(100), LossKind::kTimeout, 4096});
        CHECK(cc.window_bytes() == h.window_bytes());
        CHECK(cc.rate_bps() == h.rate_bps());
        CHECK(cc.window_bytes() < 125000);
        break;
      }
      case Algorithm::kOdin:
        CHECK(nic.active_flows() == 1);
        CHECK(cc.window_bytes() < 125000);
        break;
      case Algorithm::kDelay:
        CHECK(cc.get<Swift>()->decreases() >= 1);  // 30 us RTT is above target
        CHECK(cc.window_bytes() < 125000);
        break;
      case Algorithm::kLtp:
        // The timeout put it on its fallback (the delay rule), which cut.
        CHECK(cc.get<Ltp>()->in_fallback());
        CHECK(cc.window_bytes() < 125000);
        break;
    }
    cc.on_idle(at_us(200));
    CHECK(nic.active_flows() == 0);
  }
}

TEST_CASE("cc: per-flow state is small and fixed-size", "[cc]") {
  // No heap behind a controller: the variant is all of it.
  INFO("sizeof(CongestionControl) = " << sizeof(CongestionControl));
  CHECK(sizeof(CongestionControl) <= 1024);
  CHECK(sizeof(Dcqcn) <= 256);
}

TEST_CASE("cc: no allocation on the event path", "[cc][alloc]") {
  NicState nic(100'000'000'000);
  std::vector<CongestionControl> flows;
  flows.reserve(5);
  for (Algorithm a : {Algorithm::kDcqcn, Algorithm::kHpcc, Algorithm::kOdin, Algorithm::kDelay,
                      Algorithm::kLtp})
    flows.emplace_back(with(a), flow100g(), &nic);
  IntFeed f;
  Pacer pacer;
  // The counter sees allocations (so this test can fail).
  g_allocs = 0;
  g_counting = true;
  {
    auto* probe = new std::vector<int>(16);
    asm volatile("" : : "r"(probe) : "memory");
    delete probe;
  }
  g_counting = false;
  REQUIRE(g_allocs > 0);

  g_allocs = 0;
  g_counting = true;
  uint64_t sink = 0;
  for (int i = 0; i < 2000; ++i) {
    const IntHop h = f.next(i % 7 == 0 ? 1.3 : 0.8, i % 3 == 0 ? 20000 : 0, i % 11 == 0);
    for (CongestionControl& cc : flows) {
      cc.on_send(SendEvent{h.ts, 4096, i % 50 == 0});
      if (i % 20 == 0) cc.on_cnp(h.ts);
      cc.on_ack(ack(h.ts, 4096, std::span<const IntHop>(&h, 1), Duration::micros(12)));
      if (i % 100 == 0) cc.on_loss(LossEvent{h.ts, LossKind::kTrim, 4096});
      if (cc.next_timer() <= h.ts) cc.on_timer(h.ts);
      sink += cc.rate_bps() + cc.window_bytes() + pacer.next_send(h.ts, cc.rate_bps()).ps;
      pacer.on_sent(h.ts, 4178);
    }
  }
  g_counting = false;
  CHECK(sink != 0);
  CHECK(g_allocs == 0);
}

TEST_CASE("cc: pacer spaces packets at the current rate", "[cc]") {
  Pacer p;
  CHECK(p.next_send(at_us(5), 1'000'000'000) == at_us(5));  // nothing sent yet
  p.on_sent(at_us(10), 1250);                               // 10 us at 1 Gb/s
  CHECK(p.next_send(at_us(10), 1'000'000'000) == at_us(20));
  CHECK(p.next_send(at_us(25), 1'000'000'000) == at_us(25));  // no credit for idle time
  // A rate change applies to the pending gap at once.
  CHECK(p.next_send(at_us(10), 10'000'000'000) == at_us(11));
  CHECK(p.next_send(at_us(10), 1'000'000) == at_us(10'010));
}

TEST_CASE("cc: NIC state keeps exact integer demand", "[cc]") {
  NicState nic(100);
  CHECK(nic.ratio() == 1.0);
  nic.add_flow(60);
  CHECK(nic.ratio() == 1.0);
  nic.add_flow(90);
  CHECK(nic.ratio() == Approx(100.0 / 150));
  nic.change_demand(90, 40);
  CHECK(nic.ratio() == 1.0);
  nic.remove_flow(60);
  nic.remove_flow(40);
  CHECK(nic.active_flows() == 0);
  CHECK(nic.demand_bps() == 0);
}
