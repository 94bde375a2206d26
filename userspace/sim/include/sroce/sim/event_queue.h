// The simulator's pending events: a calendar queue in front of a 4-ary heap.
//
// Order is (at, key), a strict total order (keys are unique), so this queue
// pops exactly what any correct priority queue would: its structure never
// shows in a result, only in the time a run takes.
//
// Most events of a fabric run are due within a few microseconds (a frame's
// serialization, a link's propagation delay, a host's next poll). They go
// into a calendar of kBuckets buckets of 2^kBucketShift ps each, indexed by
// `at >> kBucketShift` modulo kBuckets, covering [cursor, cursor + kBuckets)
// buckets from the bucket of the last event popped. A bucket is a short
// vector sorted by (at, key); a two-level bitmap finds the next non-empty
// one. Events past the window (retransmission timers, flow arrivals) wait in
// a 4-ary min-heap and move into the calendar as the cursor reaches them.
// Invariant: every calendar event is in the window, every heap event past it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "sroce/engine/types.h"

namespace sroce::sim {

class EventSink;

// 40 bytes: the scheduling sequence and the sink's kind share one word
// (seq << 16 | kind; seqs are unique, so ordering by the word is ordering by
// seq). `touch` is memory the event will read first (a packet), prefetched
// while the event before it runs.
struct Event {
  Time at;
  uint64_t key = 0;
  EventSink* sink = nullptr;
  uint64_t arg = 0;
  const void* touch = nullptr;
  uint32_t kind() const { return static_cast<uint32_t>(key & 0xffff); }
};

// True when `a` runs after `b`.
inline bool event_later(const Event& a, const Event& b) {
  return a.at != b.at ? a.at > b.at : a.key > b.key;
}

// A 4-ary min-heap of events: half the depth of a binary heap, and a node's
// four children share a cache line or two. Sifts move a hole, not swaps.
class EventHeap {
 public:
  void push(const Event& ev);
  void pop();
  const Event& front() const { return v_.front(); }
  bool empty() const { return v_.empty(); }
  size_t size() const { return v_.size(); }

 private:
  static constexpr size_t kArity = 4;
  std::vector<Event> v_;
};

class EventQueue {
 public:
  // 1.024 ns buckets x 4096: a 4.19 us window, a few link delays.
  static constexpr int kBucketShift = 10;
  static constexpr size_t kBuckets = 4096;

  EventQueue();

  // `ev.at` must not be before the last event popped (the simulator clamps).
  void push(const Event& ev);
  // The earliest event; the queue must not be empty.
  const Event& front() const { return *front_; }
  // Removes front() and returns it.
  Event pop();
  bool empty() const { return front_ == nullptr; }
  size_t size() const { return in_calendar_ + far_.size(); }
  // Events in the calendar and in the heap behind it (for tests).
  size_t in_calendar() const { return in_calendar_; }
  size_t in_heap() const { return far_.size(); }

 private:
  static constexpr uint64_t kMask = kBuckets - 1;
  static constexpr size_t kWords = kBuckets / 64;
  static_assert(kWords <= 64, "one summary word");

  static uint64_t bucket_of(Time t) { return static_cast<uint64_t>(t.ps) >> kBucketShift; }
  void insert(uint64_t bucket, const Event& ev);
  // Moves the cursor to `bucket` and the heap's events now in the window in.
  void advance(uint64_t bucket);
  // The first non-empty bucket after `bucket` (absolute index); the calendar
  // must not be empty.
  uint64_t next_after(uint64_t bucket) const;
  void find_front();

  std::vector<std::vector<Event>> buckets_;
  uint64_t bits_[kWords] = {};  // bucket slot non-empty
  uint64_t summary_ = 0;        // bits_ word non-zero
  uint64_t cursor_ = 0;         // absolute bucket of the last pop; window starts here
  size_t head_ = 0;             // events already popped from the cursor's bucket
  uint64_t next_ = 0;           // absolute bucket of the earliest calendar event
  size_t in_calendar_ = 0;
  EventHeap far_;
  // The earliest event, kept so front() is one load (the run loop asks for
  // it two or three times per event); null when empty.
  const Event* front_ = nullptr;
};

}  // namespace sroce::sim
