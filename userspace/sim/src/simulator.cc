#include "sroce/sim/simulator.h"

#include <algorithm>
#include <utility>

namespace sroce::sim {

Simulator::Simulator(uint64_t seed) : seed_(seed), rng_(seed) { heap_.reserve(1024); }

void Simulator::schedule(Time at, EventSink* sink, uint32_t kind, uint64_t arg) {
  if (at < now_) {
    ++late_;
    at = now_;
  }
  heap_.push_back(Event{at, next_seq_++, sink, arg, kind});
  std::push_heap(heap_.begin(), heap_.end(), later);
}

void Simulator::call_at(Time at, std::function<void(Time)> fn) {
  schedule(at, &closures_, 0, closures_.add(std::move(fn)));
}

bool Simulator::step() {
  if (heap_.empty()) return false;
  std::pop_heap(heap_.begin(), heap_.end(), later);
  const Event ev = heap_.back();
  heap_.pop_back();
  now_ = ev.at;
  ++events_run_;
  ev.sink->on_event(ev.kind, ev.arg, ev.at);
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
