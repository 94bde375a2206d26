// Congestion control at very low rates (issue 17): with the pacer spacing
// packets by more than the local ACK timeout, the timer must run from the
// send of the oldest unacknowledged packet, never from an ACK that came
// before the pacer let that packet out (a timeout for a packet not yet sent
// used up retry_cnt: "transport retry counter exceeded" on the fabric).
#include <algorithm>
#include <deque>

#include "harness.h"

using namespace sroce;
using namespace sroce::test;

namespace {

EngineConfig slow_cfg(cc::Algorithm alg, uint64_t line_bps, Duration base_rtt) {
  EngineConfig c;
  c.lossy.enable = false;  // compatible mode: one path, go-back-N
  c.cc.enable = true;
  c.cc.config.algorithm = alg;
  c.cc.line_rate_bps = line_bps;
  c.cc.base_rtt = base_rtt;
  return c;
}

// The wire of harness.h with a one-way delay: every packet arrives `delay`
// after it left. Runs until a has `n` completions or `limit` of fake time.
std::vector<Wc> run_delayed(Pair& p, Duration delay, size_t n, Duration limit) {
  std::deque<std::pair<Time, WirePkt>> q;  // in send order = arrival order
  p.w.filter = [&](const WirePkt& pk) {
    q.emplace_back(p.w.now + delay, pk);
    return Verdict::kDrop;  // delivered later, below
  };
  std::vector<Wc> got;
  const Time end = p.w.now + limit;
  while (got.size() < n) {
    p.w.pump();
    auto v = p.a.poll();
    got.insert(got.end(), v.begin(), v.end());
    if (got.size() >= n) break;
    Time t = p.w.next_deadline();
    if (!q.empty()) t = std::min(t, q.front().first);
    if (t == Time::never() || t > end) break;
    if (t > p.w.now) p.w.now = t;
    while (!q.empty() && q.front().first <= p.w.now) {
      p.w.deliver(q.front().second);
      q.pop_front();
    }
    p.a->on_timer(p.w.now);
    p.b->on_timer(p.w.now);
  }
  p.w.filter = nullptr;
  return got;
}

}  // namespace

TEST_CASE("cc: the ACK timer runs from the send of a paced packet, not from the ACK before it",
          "[cc]") {
  // 100 kb/s: one 1 KiB packet every ~87 ms, more than the 67 ms ACK
  // timeout; 40 ms RTT. Each ACK comes while the next packet waits in the
  // pacer; a timer armed at that ACK would fire 27 ms after that packet left,
  // before its ACK could come back.
  ConnOpts co;
  co.retry_cnt = 1;
  Pair p({}, co, co, slow_cfg(cc::Algorithm::kDcqcn, 100'000, Duration::micros(40'000)));
  const uint32_t len = 6 * 1024;
  p.a.mem.fill(p.a.addr(0), len, 17);
  p.b.mem.zero(p.b.addr(0x400000), len);
  REQUIRE(post(p.a, p.qa, WrOpcode::kRdmaWrite, {sge(p.a, 0, len)}, 1, kSendSignaled,
               p.b.addr(0x400000), p.b.mr.rkey) == 0);
  auto wc = run_delayed(p, Duration::micros(20'000), 1, Duration::millis(20'000));
  REQUIRE(wc.size() == 1);
  INFO(wc_str(wc[0]));
  CHECK(wc[0].status == WcStatus::kSuccess);
  CHECK(p.a.mem.same(p.a.addr(0), p.b.mem, p.b.addr(0x400000), len));
  const QpStats s = qstats(p.a, p.qa);
  CHECK(s.timeouts == 0);
  CHECK(s.retransmits == 0);
  CHECK(s.cc_paced > 0);
}
