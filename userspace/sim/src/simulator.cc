#include "sroce/sim/simulator.h"

#include <algorithm>
#include <utility>

namespace sroce::sim {

Simulator::Simulator(uint64_t seed, EventOrder order) : seed_(seed), rng_(seed), order_(order) {}

uint64_t Simulator::causal_key(uint64_t parent, uint64_t rank, uint32_t kind) {
  const uint64_t h = Rng::mix(Rng::mix(parent) ^ (rank >> 8));
  return (h & ~0xff'ffffull) | (rank & 0xff) << 16 | (kind & 0xffff);
}

void Simulator::schedule(Time at, EventSink* sink, uint32_t kind, uint64_t arg,
                         const void* touch) {
  if (at < now_) {
    ++late_;
    at = now_;
  }
  uint64_t key;
  if (order_ == EventOrder::kCausal) {
    key = in_event_ ? causal_key(running_key_, children_++, kind)
                    : causal_key(kCausalRoot, setup_children_++, kind);
  } else {
    key = next_seq_++ << 16 | (kind & 0xffff);
  }
  queue_.push(Event{at, key, sink, arg, touch});
}

void Simulator::call_at(Time at, std::function<void(Time)> fn) {
  schedule(at, &closures_, 0, closures_.add(std::move(fn)));
}

bool Simulator::step() {
  if (queue_.empty()) return false;
  const Event ev = queue_.pop();
  now_ = ev.at;
  ++events_run_;
  // The next event's sink and memory are likely cold (a link or host among
  // thousands, a packet among tens of thousands): start loading them while
  // this one runs.
  if (!queue_.empty()) {
    const Event& next = queue_.front();
    __builtin_prefetch(next.sink);
    if (next.touch != nullptr) __builtin_prefetch(next.touch);
  }
  running_key_ = ev.key;
  children_ = 0;
  in_event_ = true;
  ev.sink->on_event(ev.kind(), ev.arg, ev.at);
  in_event_ = false;
  running_key_ = 0;
  return true;
}

uint64_t Simulator::run(Time until, uint64_t max_events) {
  stopped_ = false;
  uint64_t n = 0;
  while (!stopped_ && n < max_events && !queue_.empty() && queue_.front().at <= until) {
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
