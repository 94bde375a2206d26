// RNR against Linux rxe's responder (docs/interop.md, "RNR"). rxe 6.1 forgets that it has
// NAKed a PSN gap whenever the packet it expects arrives (rxe_resp.c, check_psn), even when
// it then answers that packet with an RNR NAK. So each time the requester resends its
// window after the RNR timer, rxe answers the first packet with an RNR NAK and the next one
// with a PSN-sequence NAK for the same PSN. sroce's responder NAKs a gap once until it
// accepts a packet; the wire here stands in for rxe and sends the NAK rxe sends instead.
//
// The sequence NAK says nothing the RNR NAK did not: the requester is waiting out the RNR
// timer and resends from the RNR NAKed PSN when it runs out (IBA 9.7.5). Counted
// against retry_cnt, it ended long RNR waits against rxe (a receiver posting late) in
// RETRY_EXC_ERR after retry_cnt rounds, and a finite rnr_retry larger than retry_cnt never
// got to RNR_RETRY_EXC_ERR.
#include "harness.h"

using namespace sroce;
using namespace sroce::test;

namespace {

constexpr uint32_t kLen = 1000;  // one packet per SEND at MTU 1024
constexpr int kSends = 4;

// a sends SENDs to b; b's QP answers as rxe's does. a's packets go out as one window (the
// wire holds them until a has nothing more to send, as on a link with a delay), and b
// answers them one by one.
struct RxeRnr {
  explicit RxeRnr(ConnOpts a_opts) : p({}, a_opts) {
    p.w.filter = [this](const WirePkt& x) {
      if (x.from == 0) {
        if (x.op() != SROCE_OP_ACK && x.psn > high) high = x.psn;
        return Verdict::kHold;
      }
      // b's own sequence NAKs are replaced by rxe's (below): one after every RNR NAK.
      if (x.is_nak() && (x.syndrome & 0x1f) == SROCE_NAK_PSN_SEQ_ERR) return Verdict::kDrop;
      if (x.is_rnr() && high > x.psn) {
        WirePkt nak = x;
        nak.bytes[SROCE_BTH_LEN] =
            std::byte{sroce_aeth_syndrome(SROCE_AETH_NAK, SROCE_NAK_PSN_SEQ_ERR)};
        reicrc(nak.bytes, nak.meta);
        p.w.deliver(x);    // the RNR NAK for the first packet of the window
        p.w.deliver(nak);  // and the sequence NAK for the next, with the PSN rxe expects
        ++seq_naks;
        return Verdict::kDrop;
      }
      return Verdict::kDeliver;
    };
    for (int i = 0; i < kSends; ++i) {
      p.a.mem.fill(p.a.addr(i * 0x1000ull), kLen, 40 + static_cast<uint32_t>(i));
      REQUIRE(post(p.a, p.qa, WrOpcode::kSend, {sge(p.a, i * 0x1000ull, kLen)},
                   static_cast<uint64_t>(i)) == 0);
    }
  }

  // Runs the wire (windows released each round) until done() or `limit` of fake time.
  bool run_until(const std::function<bool()>& done, Duration limit = Duration::millis(10'000)) {
    const Time end = p.w.now + limit;
    for (int guard = 0; guard < 1'000'000; ++guard) {
      p.w.pump();
      if (!p.w.held.empty()) {
        // b answers each packet before the next one arrives, as rxe does (sroce's responder
        // would fold the RNR NAK and the sequence NAK into one pending NAK).
        auto window = std::move(p.w.held);
        p.w.held.clear();
        for (const WirePkt& x : window) {
          p.w.deliver(x);
          p.w.pump();
        }
        continue;
      }
      if (done()) return true;
      const Time d = p.w.next_deadline();
      if (d == Time::never() || d > end) return done();
      if (d > p.w.now) p.w.now = d;
      p.a->on_timer(p.w.now);
      p.b->on_timer(p.w.now);
    }
    FAIL("RxeRnr::run_until: no progress");
    return false;
  }
  // Runs until a's completions polled into `got` number `n`, or `stop()` holds.
  bool run_polling(std::vector<Wc>& got, size_t n, const std::function<bool()>& stop = {}) {
    return run_until([&] {
      auto v = p.a.poll();
      got.insert(got.end(), v.begin(), v.end());
      return got.size() >= n || (stop && stop());
    });
  }
  size_t rnr_naks() const { return p.w.count([](const WirePkt& x) { return x.is_rnr(); }); }

  Pair p;
  uint32_t high = 0;  // the highest request PSN a has sent
  size_t seq_naks = 0;
};

}  // namespace

TEST_CASE("rxe's sequence NAK behind each RNR NAK costs no retry: a late receive completes",
          "[rel][rnr][interop]") {
  // retry_cnt 7 (ibv_rc_pingpong's), rnr_retry 7: retry forever on RNR; 10 us RNR timer.
  RxeRnr r({.retry_cnt = 7, .rnr_retry = 7, .min_rnr_timer = 1});
  std::vector<Wc> wa;
  // 30 RNR rounds, each with rxe's sequence NAK: far more than retry_cnt.
  r.run_polling(wa, 1, [&] { return r.rnr_naks() >= 30; });
  INFO((wa.empty() ? std::string("no completion") : wc_str(wa[0])));
  REQUIRE(wa.empty());  // before the fix: RETRY_EXC_ERR at the 8th round
  CHECK(r.seq_naks >= 29);
  CHECK(qstats(r.p.a, r.p.qa).seq_naks_received == r.seq_naks);
  CHECK(r.p.a->query_qp(r.p.qa)->qp_state == QpState::kRts);
  // The receiver posts at last: every SEND lands, byte for byte.
  for (int i = 0; i < kSends; ++i)
    REQUIRE(post_recv(r.p.b, r.p.qb, {sge(r.p.b, 0x100000 + i * 0x1000ull, 2048)},
                      static_cast<uint64_t>(100 + i)) == 0);
  REQUIRE(r.run_polling(wa, kSends));
  REQUIRE(wa.size() == kSends);
  for (int i = 0; i < kSends; ++i) {
    INFO(wc_str(wa[static_cast<size_t>(i)]));
    CHECK(wa[static_cast<size_t>(i)].wr_id == static_cast<uint64_t>(i));
    CHECK(wa[static_cast<size_t>(i)].status == WcStatus::kSuccess);
    CHECK(r.p.b.mem.same(r.p.b.addr(0x100000 + i * 0x1000ull), r.p.a.mem,
                         r.p.a.addr(i * 0x1000ull), kLen));
  }
  auto wb = r.p.b.poll();
  REQUIRE(wb.size() == kSends);
  for (int i = 0; i < kSends; ++i) {
    CHECK(wb[static_cast<size_t>(i)].status == WcStatus::kSuccess);
    CHECK(wb[static_cast<size_t>(i)].byte_len == kLen);
  }
  CHECK(qstats(r.p.a, r.p.qa).timeouts == 0);
}

TEST_CASE("against rxe a finite rnr_retry ends in RNR_RETRY_EXC_ERR, not RETRY_EXC_ERR",
          "[rel][rnr][interop]") {
  // rnr_retry 5 > retry_cnt 1: the RNR count must be what runs out.
  RxeRnr r({.retry_cnt = 1, .rnr_retry = 5, .min_rnr_timer = 1});
  std::vector<Wc> wa;
  r.run_polling(wa, kSends);
  REQUIRE(wa.size() == kSends);
  INFO(wc_str(wa[0]));
  CHECK(wa[0].wr_id == 0);
  CHECK(wa[0].status == WcStatus::kRnrRetryExcErr);
  for (size_t i = 1; i < wa.size(); ++i) CHECK(wa[i].status == WcStatus::kWrFlushErr);
  CHECK(r.rnr_naks() == 6);  // the first try and 5 retries
  CHECK(r.seq_naks >= 5);
  CHECK(r.p.a->query_qp(r.p.qa)->qp_state == QpState::kErr);
  CHECK(r.p.b.poll().empty());  // the receiver never posted: nothing delivered
}

TEST_CASE("a sequence NAK beyond the RNR NAKed PSN ends the RNR wait", "[rel][rnr]") {
  // An RNR NAK overtaken by the responder's progress: the sequence NAK says it expects PSN
  // 102, so 100 and 101 were executed; the requester resumes there at once instead of
  // waiting out the RNR timer (1.28 ms) and then going back to 100.
  Pair p({}, {.min_rnr_timer = 14}, {.min_rnr_timer = 14});
  std::vector<WirePkt> rnr;
  p.w.filter = [&](const WirePkt& x) {
    if (x.is_rnr()) rnr.push_back(x);
    return x.from == 0 ? Verdict::kHold : Verdict::kDeliver;
  };
  for (int i = 0; i < 3; ++i)
    REQUIRE(post(p.a, p.qa, WrOpcode::kSend, {sge(p.a, 0, 100)}, static_cast<uint64_t>(i)) == 0);
  p.w.pump();  // 100, 101, 102 leave a
  REQUIRE(p.w.held.size() == 3);
  p.w.deliver(p.w.held[0]);  // only 100 reaches b, which has no receive: RNR NAK
  p.w.held.clear();
  p.w.pump();
  REQUIRE(rnr.size() == 1);
  REQUIRE(p.a->next_deadline() == Time{Duration::micros(1280).ps});  // waiting out the RNR timer
  WirePkt nak = rnr[0];
  nak.bytes[SROCE_BTH_LEN] = std::byte{sroce_aeth_syndrome(SROCE_AETH_NAK, SROCE_NAK_PSN_SEQ_ERR)};
  nak.bytes[11] = std::byte{102};  // BTH PSN 102 (bytes 9-11)
  reicrc(nak.bytes, nak.meta);
  p.w.deliver(nak);
  auto wa = p.a.poll();
  REQUIRE(wa.size() == 2);  // 100 and 101 implied acknowledged
  CHECK(wa[0].status == WcStatus::kSuccess);
  CHECK(wa[1].status == WcStatus::kSuccess);
  const size_t before = p.w.log.size();
  p.w.pump();  // at once: 102 goes out again, nothing from 100
  REQUIRE(p.w.log.size() > before);
  CHECK(p.w.log[before].from == 0);
  CHECK(p.w.log[before].psn == 102);
  CHECK(p.w.now == Time::zero());
  // No RNR wait is left: when its time comes, nothing goes back to 100.
  p.w.now = Time{Duration::micros(1280).ps};
  p.a->on_timer(p.w.now);
  p.w.pump();
  for (size_t i = before; i < p.w.log.size(); ++i)
    if (p.w.log[i].from == 0) CHECK(p.w.log[i].psn == 102);
  CHECK(sent_with_psn(p.w, 0, 100) == 1);
}
