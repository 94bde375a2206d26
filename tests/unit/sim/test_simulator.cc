// The discrete-event core: ordering, time, determinism of the RNG.
#include <catch2/catch.hpp>
#include <algorithm>
#include <functional>
#include <queue>
#include <tuple>
#include <vector>

#include "sroce/sim/event_queue.h"
#include "sroce/sim/rng.h"
#include "sroce/sim/simulator.h"

using namespace sroce;
using namespace sroce::sim;

namespace {
struct Recorder : EventSink {
  std::vector<std::pair<int64_t, uint64_t>> seen;  // (time, arg)
  void on_event(uint32_t, uint64_t arg, Time now) override { seen.emplace_back(now.ps, arg); }
};

// Events that schedule events, as the fabric does: each one run adds 0-2
// more at now + [0, max_delay) ps until `limit` were scheduled. Keeps what
// ran and what a sorted reference says should have run.
struct Chain : EventSink {
  Chain(Simulator& s, Rng& r, uint64_t max_delay, uint64_t limit)
      : sim(&s), rng(&r), max_delay(max_delay), limit(limit) {}
  Simulator* sim;
  Rng* rng;
  uint64_t max_delay, limit;
  std::vector<std::pair<int64_t, uint64_t>> seen;             // (time, id)
  std::vector<std::tuple<int64_t, uint64_t, uint64_t>> want;  // (time, seq, id)
  uint64_t next_id = 0, seq = 0;
  bool kinds_ok = true;
  void add(Time at) {
    want.emplace_back(std::max(at, sim->now()).ps, seq++, next_id);
    sim->schedule(at, this, 1, next_id++);
  }
  void on_event(uint32_t kind, uint64_t id, Time now) override {
    kinds_ok = kinds_ok && kind == 1;
    seen.emplace_back(now.ps, id);
    if (next_id < limit)
      for (uint32_t k = rng->below(3); k > 0; --k)
        add(now + Duration::picos(static_cast<int64_t>(rng->below(max_delay))));
  }
  // Every event ran once, in (time, scheduling) order.
  bool ran_in_order() {
    std::sort(want.begin(), want.end());
    if (seen.size() != want.size() || !kinds_ok) return false;
    for (size_t i = 0; i < seen.size(); ++i)
      if (seen[i].first != std::get<0>(want[i]) || seen[i].second != std::get<2>(want[i])) return false;
    return true;
  }
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
  // The event queue against a sorted reference: random times with many ties,
  // scheduled both up front and from inside events, as the fabric does.
  Simulator sim(1);
  Rng rng(7);
  Chain c(sim, rng, 50, 20000);
  for (int i = 0; i < 3000; ++i) c.add(Time{static_cast<int64_t>(rng.below(1000))});
  sim.run();
  CHECK(c.seen.size() > 10000);
  CHECK(c.ran_in_order());
  CHECK(sim.pending() == 0);
}

namespace {
constexpr int64_t kBucketPs = int64_t{1} << EventQueue::kBucketShift;
constexpr int64_t kWindowPs = kBucketPs * static_cast<int64_t>(EventQueue::kBuckets);

Event event_at(int64_t ps, uint64_t seq) { return Event{Time{ps}, seq << 16, nullptr, seq, nullptr}; }

// Pops everything, returning the sequence numbers in pop order.
std::vector<uint64_t> drain(EventQueue& q) {
  std::vector<uint64_t> out;
  while (!q.empty()) {
    out.push_back(q.front().arg);
    q.pop();
  }
  return out;
}
}  // namespace

TEST_CASE("the calendar queue orders equal times by key, in one bucket and across buckets", "[sim][des]") {
  EventQueue q;
  // Pushed out of key order on purpose: the queue sorts by (at, key), not by
  // arrival. Times 5 and 7 share bucket 0; 2000 is in a later one.
  q.push(event_at(7, 4));
  q.push(event_at(5, 3));
  q.push(event_at(2000, 0));
  q.push(event_at(5, 1));
  q.push(event_at(7, 2));
  q.push(event_at(5, 5));
  CHECK(q.in_calendar() == 6);
  CHECK(q.in_heap() == 0);
  CHECK(drain(q) == std::vector<uint64_t>{1, 3, 5, 2, 4, 0});
  CHECK(q.size() == 0);
}

TEST_CASE("the calendar queue keeps events past its window in the heap and moves them in", "[sim][des]") {
  EventQueue q;
  // The window is [bucket 0, bucket kBuckets): the last bucket in it and the
  // first past it, then far away (several windows, so slots wrap around).
  q.push(event_at(kWindowPs - 1, 1));
  q.push(event_at(kWindowPs, 2));
  q.push(event_at(10 * kWindowPs + 3, 3));
  q.push(event_at(10 * kWindowPs + 3 - kWindowPs, 4));  // same slot as 3, one window earlier
  q.push(event_at(0, 5));
  CHECK(q.in_calendar() == 2);
  CHECK(q.in_heap() == 3);
  CHECK(q.front().arg == 5);
  q.pop();  // cursor stays at bucket 0
  CHECK(q.front().arg == 1);
  q.pop();  // cursor at the window's last bucket: event 2 is in the window now
  CHECK(q.in_heap() == 2);
  CHECK(q.in_calendar() == 1);
  // An event at the time just popped (the cursor's bucket) goes first.
  q.push(event_at(kWindowPs - 1, 6));
  CHECK(q.front().arg == 6);
  q.pop();
  CHECK(q.front().arg == 2);
  q.pop();
  // The calendar is empty: the next pop comes from the heap and jumps.
  CHECK(q.in_calendar() == 0);
  CHECK(q.front().arg == 4);
  q.pop();
  // Event 3 is exactly one window after the cursor: just past the window.
  CHECK(q.in_heap() == 1);
  CHECK(q.in_calendar() == 0);
  q.push(event_at(10 * kWindowPs - 1, 9));  // the window's last picosecond
  CHECK(q.in_calendar() == 1);
  q.push(event_at(10 * kWindowPs + 3, 7));  // same time as 3, later key
  q.push(event_at(10 * kWindowPs + 2, 8));
  CHECK(q.in_heap() == 3);
  CHECK(drain(q) == std::vector<uint64_t>{9, 8, 3, 7});
}

TEST_CASE("the calendar queue finds the next bucket across bitmap words and around the ring", "[sim][des]") {
  // The bitmap has a bit per bucket and a summary bit per 64-bucket word:
  // the next non-empty bucket may be in a later word far in the window, or
  // (wrapping) in the first; an event one window and more ahead waits in the
  // heap meanwhile.
  EventQueue q;
  const auto at_bucket = [](int64_t b, int64_t off) { return b * kBucketPs + off; };
  const auto last = static_cast<int64_t>(EventQueue::kBuckets) - 1;
  q.push(event_at(at_bucket(10, 0), 1));
  // Far in the window, in a later bitmap word (word 64 when the bitmap has
  // more than 64 words, i.e. beyond one summary word).
  const int64_t far = last > 64 * 64 + 7 ? 64 * 64 + 7 : last / 2 + 7;
  q.push(event_at(at_bucket(far, 0), 2));
  q.push(event_at(at_bucket(far, 1), 3));
  q.push(event_at(at_bucket(last, 5), 4));          // the window's last bucket
  q.push(event_at(at_bucket(65, 0), 5));            // the next bitmap word
  CHECK(q.in_heap() == 0);
  CHECK(q.front().arg == 1);
  q.pop();
  CHECK(q.front().arg == 5);
  q.pop();
  CHECK(q.front().arg == 2);
  q.pop();
  CHECK(q.front().arg == 3);
  q.pop();
  // From the window's last bucket, the next events sit in slots before it:
  // the search wraps around to the first words.
  q.push(event_at(at_bucket(last + 20, 0), 6));
  q.push(event_at(at_bucket(last + 64 * 64 + 1, 0), 7));
  CHECK(q.front().arg == 4);
  q.pop();
  CHECK(q.size() == 2);
  CHECK(q.front().arg == 6);
  q.pop();
  CHECK(q.front().arg == 7);
  q.pop();
  CHECK(q.empty());
}

TEST_CASE("the calendar queue pops what std::priority_queue pops, pushes and pops interleaved", "[sim][des]") {
  // Times from the same picosecond to many windows ahead, pushed relative to
  // the last popped time as the simulator does, with runs of pops that empty
  // the calendar and runs of pushes that fill buckets.
  const auto later = [](const Event& a, const Event& b) { return event_later(a, b); };
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    Rng rng(seed);
    EventQueue q;
    std::priority_queue<Event, std::vector<Event>, decltype(later)> ref(later);
    uint64_t seq = 0;
    int64_t now = 0;
    uint64_t pops = 0, mismatches = 0, jumps = 0;
    for (int round = 0; round < 200000; ++round) {
      const bool push = ref.empty() || rng.below(100) < (round % 20000 < 10000 ? 55u : 45u);
      if (push) {
        int64_t d = 0;
        switch (rng.below(6)) {
          case 0: d = 0; break;
          case 1: d = static_cast<int64_t>(rng.below(kBucketPs)); break;
          case 2: d = static_cast<int64_t>(rng.below(8 * kBucketPs)); break;
          case 3: d = static_cast<int64_t>(rng.below(kWindowPs)); break;
          case 4: d = kWindowPs - kBucketPs + static_cast<int64_t>(rng.below(2 * kBucketPs)); break;
          default: d = static_cast<int64_t>(rng.below(static_cast<uint64_t>(50 * kWindowPs))); break;
        }
        const Event ev = event_at(now + d, seq++);
        q.push(ev);
        ref.push(ev);
      } else {
        REQUIRE_FALSE(q.empty());
        if (q.in_calendar() == 0) ++jumps;
        const Event got = q.front();
        const Event want = ref.top();
        mismatches += got.at != want.at || got.key != want.key || got.arg != want.arg;
        q.pop();
        ref.pop();
        now = want.at.ps;
        ++pops;
      }
      REQUIRE(q.size() == ref.size());
    }
    while (!ref.empty()) {
      mismatches += q.front().key != ref.top().key;
      q.pop();
      ref.pop();
      ++pops;
    }
    CHECK(q.empty());
    CHECK(mismatches == 0);
    CHECK(pops == seq);
    CHECK(jumps > 0);  // the calendar ran empty and refilled from the heap
  }
}

TEST_CASE("a simulator run through the calendar's window and past it keeps (time, scheduling) order", "[sim][des]") {
  // Events scheduled from events at delays around the window, with
  // run(until) steps that leave time where no event is.
  Simulator sim(1);
  Rng rng(11);
  Chain c(sim, rng, static_cast<uint64_t>(3 * kWindowPs), 30000);
  for (int i = 0; i < 2000; ++i) c.add(Time{static_cast<int64_t>(rng.below(static_cast<uint64_t>(4 * kWindowPs)))});
  for (Time t{}; sim.pending() > 0; t = t + Duration::picos(kWindowPs / 3)) {
    sim.run(t);
    CHECK(sim.now() == t);
    if (t.ps % (7 * kWindowPs) < kWindowPs / 3) c.add(t);  // at now, after a jump of time
  }
  CHECK(c.seen.size() > 20000);
  CHECK(c.ran_in_order());
  CHECK(sim.late_schedules() == 0);
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

namespace {
// A Chain (above) that also keeps the key of every event it ran.
struct KeyedChain : Chain {
  using Chain::Chain;
  std::vector<std::pair<int64_t, uint64_t>> keys;  // (time, key)
  void on_event(uint32_t kind, uint64_t id, Time now) override {
    keys.emplace_back(now.ps, sim->running_key());
    Chain::on_event(kind, id, now);
  }
};

// Chain A's (time, key) sequence, run alone or beside a chain B that shares
// no state with it but schedules 10 times as many events at the same
// picoseconds (max_delay 4 ps: many ties). B's set-up comes after A's.
std::vector<std::pair<int64_t, uint64_t>> chain_a_keys(EventOrder order, bool with_b,
                                                       std::vector<std::pair<int64_t, uint64_t>>* ids) {
  Simulator sim(1, order);
  Rng ra(11), rb(12);
  KeyedChain a(sim, ra, 4, 2'000);
  Chain b(sim, rb, 4, 20'000);
  for (int i = 0; i < 200; ++i) a.add(Time{i % 8});
  if (with_b)
    for (int i = 0; i < 2'000; ++i) b.add(Time{i % 8});
  sim.run();
  *ids = a.seen;
  return a.keys;
}
}  // namespace

TEST_CASE("causal order: an event's key and place depend on its ancestors only", "[sim][des]") {
  std::vector<std::pair<int64_t, uint64_t>> alone_ids, beside_ids;
  const auto alone = chain_a_keys(EventOrder::kCausal, false, &alone_ids);
  const auto beside = chain_a_keys(EventOrder::kCausal, true, &beside_ids);
  REQUIRE(alone.size() >= 1'000);
  CHECK(alone == beside);
  CHECK(alone_ids == beside_ids);  // A's events ran in the same order among themselves
  // What the default order does instead: B's events take sequence numbers
  // between A's, so A's keys change (this is what a partitioned run cannot
  // reproduce).
  std::vector<std::pair<int64_t, uint64_t>> s_alone_ids, s_beside_ids;
  CHECK(chain_a_keys(EventOrder::kScheduleOrder, false, &s_alone_ids) !=
        chain_a_keys(EventOrder::kScheduleOrder, true, &s_beside_ids));
}

TEST_CASE("causal order: every event runs once, in time order; siblings keep their order", "[sim][des]") {
  Simulator sim(1, EventOrder::kCausal);
  CHECK(sim.event_order() == EventOrder::kCausal);
  Rng rng(5);
  KeyedChain c(sim, rng, 1'000, 20'000);
  for (int i = 0; i < 400; ++i) c.add(Time{0});
  // One event with 300 children at one picosecond: the first 256 run in the
  // order they were scheduled (rank byte), all 300 run.
  std::vector<int> order;
  sim.call_at(Time{5'000'000}, [&](Time now) {
    for (int i = 0; i < 300; ++i) sim.call_at(now, [&order, i](Time) { order.push_back(i); });
  });
  sim.run();
  std::vector<uint64_t> ids;
  bool times_sorted = true;
  for (size_t i = 0; i < c.seen.size(); ++i) {
    ids.push_back(c.seen[i].second);
    if (i > 0 && c.seen[i].first < c.seen[i - 1].first) times_sorted = false;
  }
  CHECK(c.seen.size() >= 1'000);
  CHECK(times_sorted);
  std::sort(ids.begin(), ids.end());
  CHECK(ids.size() == c.next_id);
  CHECK(std::adjacent_find(ids.begin(), ids.end()) == ids.end());
  REQUIRE(order.size() == 300);
  // Within each block of 256 ranks (0-255, 256-299) the children ran in
  // rank order; the blocks themselves in the order of their hashes.
  std::vector<int> block0, block1;
  for (int v : order) (v < 256 ? block0 : block1).push_back(v);
  CHECK(std::is_sorted(block0.begin(), block0.end()));
  CHECK(std::is_sorted(block1.begin(), block1.end()));
  std::sort(order.begin(), order.end());
  CHECK(std::adjacent_find(order.begin(), order.end()) == order.end());
  CHECK(sim.running_key() == 0);  // outside an event
}

TEST_CASE("causal keys: the kind in the low 16 bits, the rank's low byte above it", "[sim][des]") {
  const uint64_t k = Simulator::causal_key(0x1234, 0x305, 0xbeef);
  CHECK((k & 0xffff) == 0xbeef);
  CHECK((k >> 16 & 0xff) == 0x05);
  // The same (parent, rank) always gives the same key; another parent, or
  // another block of 256 ranks, another hash.
  CHECK(k == Simulator::causal_key(0x1234, 0x305, 0xbeef));
  CHECK(k >> 24 != Simulator::causal_key(0x1235, 0x305, 0xbeef) >> 24);
  CHECK(k >> 24 != Simulator::causal_key(0x1234, 0x405, 0xbeef) >> 24);
  CHECK(k >> 24 == Simulator::causal_key(0x1234, 0x3ff, 0xbeef) >> 24);
}
