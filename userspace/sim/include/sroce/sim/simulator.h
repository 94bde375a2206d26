// The discrete-event core: integer picosecond time, one event queue, one seeded
// RNG. No wall clock anywhere: the same seed gives the same run, event for
// event and byte for byte.
//
// Events are ordered by (time, insertion sequence), so two events at the same
// picosecond run in the order they were scheduled. That tie-break is what makes
// the run deterministic without relying on the queue's internals
// (event_queue.h: a calendar queue with a heap behind it).
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

class Simulator {
 public:
  explicit Simulator(uint64_t seed);
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
  uint64_t next_seq_ = 0;
  uint64_t events_run_ = 0;
  uint64_t late_ = 0;
  bool stopped_ = false;
  Closures closures_;
};

}  // namespace sroce::sim
