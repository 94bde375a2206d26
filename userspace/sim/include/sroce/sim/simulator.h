// The discrete-event core: integer picosecond time, one event queue, one seeded
// RNG. No wall clock anywhere: the same seed gives the same run, event for
// event and byte for byte.
//
// Events are ordered by (time, key). By default the key is the insertion
// sequence, so two events at the same picosecond run in the order they were
// scheduled. That tie-break is what makes the run deterministic without
// relying on the queue's internals (event_queue.h: a calendar queue with a
// heap behind it). EventOrder::kCausal is the other tie-break (below).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "sroce/engine/types.h"
#include "sroce/sim/event_queue.h"
#include "sroce/sim/rng.h"

namespace sroce::sim {

// Anything that receives events: links, hosts, the closure table.
// `kind` and `arg` are the sink's own (e.g. a link's "serialization done" with
// a packet index).
class EventSink {
 public:
  virtual void on_event(uint32_t kind, uint64_t arg, Time now) = 0;

 protected:
  ~EventSink() = default;
};

// How events at the same picosecond are ordered. The low 16 bits of the key
// are the sink's kind in both.
//  - kScheduleOrder (the default): one global sequence, the order of the
//    schedule() calls. Every digest and figure in docs/ was made with it.
//  - kCausal: the key is made from the key of the event that was running when
//    the event was scheduled (its parent) and the event's rank among that
//    parent's children. Events scheduled outside any event (set-up, or code
//    between run() calls) are the children of a fixed root. A key then depends
//    only on the event's ancestors, never on what unrelated events ran in
//    between: the order a run split across threads can reproduce in every
//    partition (docs/sim.md, "The parallel run's design", item 1).
//    Layout: bits 63-24 a hash of (parent key, rank / 256), bits 23-16 the
//    rank % 256, bits 15-0 the kind. So up to 256 siblings at one picosecond
//    run in the order they were scheduled (then blocks of 256 by hash), and
//    events of different parents in an order that is arbitrary but fixed.
//    Two keys collide only if 40 hash bits, the rank byte and the kind all
//    agree; then the queue's own order decides (still deterministic in one
//    thread). A child at its parent's picosecond whose key is below keys
//    that already ran runs next: nothing runs before the event that made it.
enum class EventOrder : uint8_t { kScheduleOrder, kCausal };

class Simulator {
 public:
  explicit Simulator(uint64_t seed, EventOrder order = EventOrder::kScheduleOrder);
  Simulator(const Simulator&) = delete;
  Simulator& operator=(const Simulator&) = delete;

  Time now() const { return now_; }
  uint64_t seed() const { return seed_; }
  Rng& rng() { return rng_; }

  // Schedules `sink->on_event(kind, arg, at)`. `at` before now() is a caller
  // bug; it is clamped to now() and counted (late_schedules()).
  // `kind` must be below 65536. `touch`: optional memory to prefetch before
  // the event runs (no effect on what happens).
  void schedule(Time at, EventSink* sink, uint32_t kind, uint64_t arg = 0,
                const void* touch = nullptr);
  void schedule_in(Duration d, EventSink* sink, uint32_t kind, uint64_t arg = 0) {
    schedule(now_ + d, sink, kind, arg);
  }
  // A closure event, for control-path and application logic (not the packet path).
  void call_at(Time at, std::function<void(Time)> fn);

  // Runs the earliest event; false if there is none.
  bool step();
  // Runs events while the earliest is at or before `until`, at most
  // `max_events`, until stop(). Afterwards now() is the time of the last event
  // run (or `until` if the queue emptied before it and until is finite).
  // Returns the number of events run.
  uint64_t run(Time until = Time::never(), uint64_t max_events = UINT64_MAX);
  void stop() { stopped_ = true; }
  bool stopped() const { return stopped_; }

  Time next_event_time() const { return queue_.empty() ? Time::never() : queue_.front().at; }
  size_t pending() const { return queue_.size(); }
  uint64_t events_run() const { return events_run_; }
  uint64_t late_schedules() const { return late_; }
  EventOrder event_order() const { return order_; }
  // The key of the event running now (0 outside an event): for tests.
  uint64_t running_key() const { return running_key_; }
  // The key kCausal gives the `rank`-th child (from 0) of the event keyed
  // `parent`, with the sink's `kind`.
  static uint64_t causal_key(uint64_t parent, uint64_t rank, uint32_t kind);
  // The parent of set-up's events in kCausal.
  static constexpr uint64_t kCausalRoot = 0x5352'4f43'4530'0001ull;

 private:
  class Closures : public EventSink {
   public:
    void on_event(uint32_t kind, uint64_t arg, Time now) override;
    uint64_t add(std::function<void(Time)> fn);

   private:
    std::vector<std::function<void(Time)>> fns_;
    std::vector<uint64_t> free_;
  };

  Time now_;
  uint64_t seed_;
  Rng rng_;
  EventQueue queue_;
  EventOrder order_;
  uint64_t next_seq_ = 0;  // kScheduleOrder's sequence
  // kCausal: the running event's key and how many children it has scheduled;
  // outside an event, set-up's count under kCausalRoot.
  uint64_t running_key_ = 0;
  uint64_t children_ = 0;
  uint64_t setup_children_ = 0;
  bool in_event_ = false;
  uint64_t events_run_ = 0;
  uint64_t late_ = 0;
  bool stopped_ = false;
  Closures closures_;
};

}  // namespace sroce::sim
