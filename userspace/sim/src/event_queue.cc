#include "sroce/sim/event_queue.h"

#include <algorithm>
#include <cassert>

namespace sroce::sim {

void EventHeap::push(const Event& ev) {
  size_t i = v_.size();
  v_.push_back(ev);
  while (i > 0) {
    const size_t parent = (i - 1) / kArity;
    if (!event_later(v_[parent], ev)) break;
    v_[i] = v_[parent];
    i = parent;
  }
  v_[i] = ev;
}

void EventHeap::pop() {
  const size_t n = v_.size() - 1;
  const Event last = v_[n];
  v_.pop_back();
  if (n == 0) return;
  size_t i = 0;
  for (;;) {
    const size_t first = i * kArity + 1;
    if (first >= n) break;
    size_t best = first;
    const size_t end = std::min(first + kArity, n);
    for (size_t c = first + 1; c < end; ++c)
      if (event_later(v_[best], v_[c])) best = c;
    if (!event_later(last, v_[best])) break;
    v_[i] = v_[best];
    i = best;
  }
  v_[i] = last;
}

EventQueue::EventQueue() : buckets_(kBuckets) {}

void EventQueue::push(const Event& ev) {
  const uint64_t b = bucket_of(ev.at);
  assert(b >= cursor_);
  if (b < cursor_ + kBuckets) {
    // Only an insert into the front's bucket (which may move its storage)
    // or before it changes front_.
    const bool at_front = in_calendar_ == 0 || b <= next_;
    insert(b, ev);
    if (at_front) find_front();
  } else {
    far_.push(ev);
    if (in_calendar_ == 0) find_front();
  }
}

void EventQueue::find_front() {
  if (in_calendar_ > 0)
    front_ = &buckets_[next_ & kMask][next_ == cursor_ ? head_ : 0];
  else
    front_ = far_.empty() ? nullptr : &far_.front();
}

// Sorted insertion from the back: a new event usually has the largest key,
// so it lands at or near the end. In the cursor's bucket it never lands
// before head_. With sequence keys the events popped there are earlier in time
// or in key anyway; with causal keys (simulator.h) a new event at the time of
// the running one may have a smaller key than events already popped, and it
// still runs after them: at head_, the earliest of those not run.
void EventQueue::insert(uint64_t bucket, const Event& ev) {
  const uint64_t slot = bucket & kMask;
  std::vector<Event>& v = buckets_[slot];
  const size_t floor = bucket == cursor_ ? head_ : 0;
  size_t i = v.size();
  v.push_back(ev);
  while (i > floor && event_later(v[i - 1], ev)) {
    v[i] = v[i - 1];
    --i;
  }
  v[i] = ev;
  bits_[slot >> 6] |= uint64_t{1} << (slot & 63);
  summary_ |= uint64_t{1} << (slot >> 6);
  if (in_calendar_ == 0 || bucket < next_) next_ = bucket;
  ++in_calendar_;
}

void EventQueue::advance(uint64_t bucket) {
  // The cursor's old bucket is empty: `bucket` holds the earliest event.
  cursor_ = bucket;
  head_ = 0;
  while (!far_.empty()) {
    const uint64_t b = bucket_of(far_.front().at);
    if (b >= cursor_ + kBuckets) break;
    insert(b, far_.front());
    far_.pop();
  }
}

uint64_t EventQueue::next_after(uint64_t bucket) const {
  const uint64_t from = (bucket + 1) & kMask;
  uint64_t word = from >> 6;
  uint64_t bits = bits_[word] & (~uint64_t{0} << (from & 63));
  if (bits == 0) {
    // A later word, else wrap around to the lowest one.
    const uint64_t above = word == kWords - 1 ? 0 : summary_ & (~uint64_t{0} << (word + 1));
    word = static_cast<uint64_t>(__builtin_ctzll(above != 0 ? above : summary_));
    bits = bits_[word];
  }
  const uint64_t slot = word * 64 + static_cast<uint64_t>(__builtin_ctzll(bits));
  return bucket + ((slot - (bucket & kMask)) & kMask);
}

Event EventQueue::pop() {
  const Event ev = *front_;
  if (in_calendar_ == 0) {
    far_.pop();
    advance(bucket_of(ev.at));
    find_front();
    return ev;
  }
  const uint64_t b = next_;
  if (b != cursor_) advance(b);
  const uint64_t slot = b & kMask;
  std::vector<Event>& v = buckets_[slot];
  --in_calendar_;
  if (++head_ < v.size()) {
    front_ = &v[head_];
    return ev;
  }
  v.clear();
  head_ = 0;
  bits_[slot >> 6] &= ~(uint64_t{1} << (slot & 63));
  if (bits_[slot >> 6] == 0) summary_ &= ~(uint64_t{1} << (slot >> 6));
  if (in_calendar_ > 0) next_ = next_after(b);
  find_front();
  return ev;
}

}  // namespace sroce::sim
