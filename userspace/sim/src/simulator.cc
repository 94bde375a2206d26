#include "sroce/sim/simulator.h"

#include <algorithm>
#include <utility>

namespace sroce::sim {

Simulator::Simulator(uint64_t seed) : seed_(seed), rng_(seed) { heap_.reserve(1024); }

// The queue is a 4-ary min-heap on (at, seq): half the depth of a binary
// heap, and a node's four children share a cache line or two, so a pop
// touches fewer lines. Sifts move a hole instead of swapping. (at, seq) is a
// strict total order, so the run order is exactly that of any other correct
// priority queue: the heap's shape never shows in a result.
void Simulator::schedule(Time at, EventSink* sink, uint32_t kind, uint64_t arg,
                         const void* touch) {
  if (at < now_) {
    ++late_;
    at = now_;
  }
  const Event ev{at, next_seq_++ << 16 | (kind & 0xffff), sink, arg, touch};
  size_t i = heap_.size();
  heap_.push_back(ev);
  while (i > 0) {
    const size_t parent = (i - 1) / kArity;
    if (!later(heap_[parent], ev)) break;
    heap_[i] = heap_[parent];
    i = parent;
  }
  heap_[i] = ev;
}

void Simulator::pop_front() {
  const size_t n = heap_.size() - 1;
  if (n == 0) {
    heap_.pop_back();
    return;
  }
  const Event last = heap_[n];
  heap_.pop_back();
  size_t i = 0;
  for (;;) {
    const size_t first = i * kArity + 1;
    if (first >= n) break;
    size_t best = first;
    const size_t end = std::min(first + kArity, n);
    for (size_t c = first + 1; c < end; ++c)
      if (later(heap_[best], heap_[c])) best = c;
    if (!later(last, heap_[best])) break;
    heap_[i] = heap_[best];
    i = best;
  }
  heap_[i] = last;
}

void Simulator::call_at(Time at, std::function<void(Time)> fn) {
  schedule(at, &closures_, 0, closures_.add(std::move(fn)));
}

bool Simulator::step() {
  if (heap_.empty()) return false;
  const Event ev = heap_.front();
  pop_front();
  now_ = ev.at;
  ++events_run_;
  // The next event's sink and memory are likely cold (a link or host among
  // thousands, a packet among tens of thousands): start loading them while
  // this one runs.
  if (!heap_.empty()) {
    __builtin_prefetch(heap_.front().sink);
    if (heap_.front().touch != nullptr) __builtin_prefetch(heap_.front().touch);
  }
  ev.sink->on_event(ev.kind(), ev.arg, ev.at);
  return true;
}

uint64_t Simulator::run(Time until, uint64_t max_events) {
  stopped_ = false;
  uint64_t n = 0;
  while (!stopped_ && n < max_events && !heap_.empty() && heap_.front().at <= until) {
    step();
    ++n;
  }
  // Time passes up to `until` even when nothing happens in between.
  if (!stopped_ && n < max_events && until != Time::never() && now_ < until) now_ = until;
  return n;
}

void Simulator::Closures::on_event(uint32_t, uint64_t arg, Time now) {
  // Move the closure out first: it may schedule more closures (growing fns_).
  auto fn = std::move(fns_[arg]);
  fns_[arg] = nullptr;
  free_.push_back(arg);
  fn(now);
}

uint64_t Simulator::Closures::add(std::function<void(Time)> fn) {
  if (!free_.empty()) {
    const uint64_t i = free_.back();
    free_.pop_back();
    fns_[i] = std::move(fn);
    return i;
  }
  fns_.push_back(std::move(fn));
  return fns_.size() - 1;
}

}  // namespace sroce::sim
