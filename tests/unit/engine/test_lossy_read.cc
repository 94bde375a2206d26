// Lossy mode, READ responses (docs/lossy.md "READ responses", lossy_read.cc):
// the responder sprays them over lanes with a trailer each, the requester
// places them by PSN whatever their order, and a lost one is asked for
// again alone (a READ request for exactly the missing PSNs), without a
// go-back-N rewind of the response stream.
#include <algorithm>
#include <map>
#include <random>
#include <set>

#include "harness.h"

using namespace sroce;
using namespace sroce::test;

namespace {

bool is_read_resp(const WirePkt& x) {
  return x.from == 1 && x.op() >= SROCE_OP_READ_RESP_FIRST && x.op() <= SROCE_OP_READ_RESP_ONLY;
}
bool is_read_req(const WirePkt& x) { return x.from == 0 && x.op() == SROCE_OP_READ_REQUEST; }

// RETH of a READ request on the wire.
sroce_reth reth_of(const WirePkt& x) {
  sroce_pkt pk;
  const auto* raw = reinterpret_cast<const uint8_t*>(x.bytes.data());
  const size_t plen = x.ext ? x.bytes.size() - SROCE_LEH_LEN : x.bytes.size();
  REQUIRE(sroce_parse(raw, plen, &pk) == SROCE_PARSE_OK);
  return pk.reth;
}

}  // namespace

TEST_CASE("lossy READ: responses are sprayed over the lanes and placed in any lane order",
          "[lossy][read]") {
  Pair p({}, {.mtu = Mtu::k1024}, {}, lossy_cfg(4));
  warm_up(p);
  const size_t before = p.w.log.size();
  p.b.mem.fill(p.b.addr(0x200000), 16384, 5);
  // Hold every response, then deliver them lane by lane, last lane first:
  // across lanes the order is reversed, inside each lane it is kept.
  p.w.filter = [&](const WirePkt& x) { return is_read_resp(x) ? Verdict::kHold : Verdict::kDeliver; };
  REQUIRE(post(p.a, p.qa, WrOpcode::kRdmaRead, {sge(p.a, 0x10000, 16384)}, 1, kSendSignaled,
               p.b.addr(0x200000), p.b.mr.rkey) == 0);
  p.w.pump();
  REQUIRE(p.w.held.size() == 16);
  std::vector<WirePkt> held = std::move(p.w.held);
  p.w.held.clear();
  std::stable_sort(held.begin(), held.end(),
                   [](const WirePkt& x, const WirePkt& y) { return x.req.lane > y.req.lane; });
  CHECK(held.front().psn != held.back().psn);
  p.w.filter = nullptr;
  for (const WirePkt& x : held) p.w.deliver(x);
  auto wc = wait_wc(p.w, p.a, 1);
  REQUIRE(wc.size() == 1);
  CHECK(wc[0].status == WcStatus::kSuccess);
  CHECK(p.a.mem.same(p.a.addr(0x10000), p.b.mem, p.b.addr(0x200000), 16384));
  // Every response carries a trailer; they went out over all 4 lanes (4
  // source ports), each lane's sequence from 0 in order.
  std::set<uint16_t> ports;
  std::map<uint8_t, uint16_t> next_seq;
  for (size_t i = before; i < p.w.log.size(); ++i) {
    const WirePkt& x = p.w.log[i];
    if (!is_read_resp(x)) continue;
    CHECK(x.ext);
    CHECK(x.req.lane < 4);
    CHECK(sroce_leh_flags_lanes(x.req.flags) == 4);
    CHECK(x.req.lane_seq == next_seq[x.req.lane]++);
    ports.insert(x.meta.src_port);
  }
  CHECK(ports.size() == 4);
  // Reordering across lanes is not loss: one READ request, 16 responses.
  CHECK(p.w.count(is_read_req) == 1);
  CHECK(qstats(p.b, p.qb).read_responses_sent == 16);
  CHECK(qstats(p.a, p.qa).timeouts == 0);
}

TEST_CASE("lossy READ: a lost response is asked for alone, without going back N",
          "[lossy][read]") {
  // Which response is lost: one in the middle (the next on its lane shows
  // the gap), the first, or the last (nothing follows it: the response timer).
  const uint32_t lost = GENERATE(5u, 0u, 31u);
  INFO("lost response " << lost);
  Pair p({}, {.mtu = Mtu::k1024, .timeout = 14}, {}, lossy_cfg(4));
  warm_up(p);
  p.b.mem.fill(p.b.addr(0x200000), 32768, 9);
  uint32_t first = 0;
  bool dropped = false;
  p.w.filter = [&](const WirePkt& x) {
    if (is_read_req(x) && first == 0) first = x.psn;
    if (is_read_resp(x) && !dropped && x.psn == first + lost) {
      dropped = true;
      return Verdict::kDrop;
    }
    return Verdict::kDeliver;
  };
  const Time t0 = p.w.now;
  REQUIRE(post(p.a, p.qa, WrOpcode::kRdmaRead, {sge(p.a, 0x10000, 32768)}, 1, kSendSignaled,
               p.b.addr(0x200000), p.b.mr.rkey) == 0);
  auto wc = wait_wc(p.w, p.a, 1);
  REQUIRE(wc.size() == 1);
  CHECK(wc[0].status == WcStatus::kSuccess);
  CHECK(dropped);
  CHECK(p.a.mem.same(p.a.addr(0x10000), p.b.mem, p.b.addr(0x200000), 32768));
  // Exactly one more READ request, for exactly the lost PSN (1 KiB at its
  // offset), and exactly one more response: no rewind of the stream.
  std::vector<WirePkt> reqs;
  for (const auto& x : p.w.log)
    if (is_read_req(x)) reqs.push_back(x);
  REQUIRE(reqs.size() == 2);
  CHECK(reqs[1].psn == first + lost);
  CHECK(reqs[1].ext);
  CHECK((reqs[1].req.flags & SROCE_LEH_F_RETX) != 0);
  const sroce_reth r = reth_of(reqs[1]);
  CHECK(r.dma_len == 1024);
  CHECK(r.va == p.b.addr(0x200000) + 1024ull * lost);
  CHECK(qstats(p.b, p.qb).read_responses_sent == 33);
  CHECK(p.w.count([&](const WirePkt& x) { return is_read_resp(x) && x.psn == first + lost; }) == 2);
  // Recovered by the lanes or the response timer, not the RTO (67 ms here).
  CHECK(qstats(p.a, p.qa).timeouts == 0);
  CHECK(p.w.now - t0 < Duration::millis(1));
}

TEST_CASE("lossy READ: a responder that stalls mid-READ sends no response twice",
          "[lossy][read]") {
  // The responder's loop stops after 8 of 32 responses (descheduled, or paced) for 1 ms:
  // the requester's response timer fires in that silence and asks for the tail (it cannot
  // tell a stall from a lost tail). Those PSNs were never sent: the responder leaves them to
  // its original stream instead of sending them twice (e2e_mpi_rc sent 1 MiB READs twice).
  Pair p({}, {.mtu = Mtu::k1024, .timeout = 14}, {}, lossy_cfg(4));
  warm_up(p);
  p.b.mem.fill(p.b.addr(0x200000), 32768, 7);
  int originals = 0;
  p.w.filter = [&](const WirePkt& x) {
    if (is_read_resp(x) && (x.req.flags & SROCE_LEH_F_RETX) == 0 && ++originals == 8)
      p.w.mute[1] = true;
    return Verdict::kDeliver;
  };
  const size_t reqs0 = p.w.count(is_read_req);
  const Time t0 = p.w.now;
  REQUIRE(post(p.a, p.qa, WrOpcode::kRdmaRead, {sge(p.a, 0x10000, 32768)}, 1, kSendSignaled,
               p.b.addr(0x200000), p.b.mr.rkey) == 0);
  p.w.pump();
  REQUIRE(p.w.mute[1]);
  // 1 ms of silence from the responder, in 10 us steps; both engines' timers run.
  while (p.w.now - t0 < Duration::millis(1)) {
    p.w.now = p.w.now + Duration::micros(10);
    p.a.eng->on_timer(p.w.now);
    p.b.eng->on_timer(p.w.now);
    p.w.pump();
  }
  // The timer asked (the case this test is about).
  const size_t asked = p.w.count(is_read_req) - reqs0 - 1;
  CHECK(asked >= 1);
  p.w.mute[1] = false;
  auto wc = wait_wc(p.w, p.a, 1);
  REQUIRE(wc.size() == 1);
  CHECK(wc[0].status == WcStatus::kSuccess);
  CHECK(p.a.mem.same(p.a.addr(0x10000), p.b.mem, p.b.addr(0x200000), 32768));
  // Each of the 32 responses went out once; the asks for unsent PSNs were counted.
  CHECK(qstats(p.b, p.qb).read_responses_sent == 32);
  CHECK(p.w.count(is_read_resp) == 32);
  CHECK(p.b->stats().read_repair_psns_unsent >= 24);
  CHECK(qstats(p.a, p.qa).timeouts == 0);
}

TEST_CASE("lossy READ: a lost repair is asked for again; the RTO asks for all that is missing",
          "[lossy][read]") {
  Pair p({}, {.mtu = Mtu::k1024, .timeout = 10}, {}, lossy_cfg(4));
  warm_up(p);
  p.b.mem.fill(p.b.addr(0x200000), 8192, 4);
  // Every response of the first transmission from PSN first+2 on is lost,
  // and the first repair of first+3 too.
  uint32_t first = 0;
  int repairs3 = 0;
  p.w.filter = [&](const WirePkt& x) {
    if (is_read_req(x) && first == 0) first = x.psn;
    if (!is_read_resp(x)) return Verdict::kDeliver;
    const bool retx = (x.req.flags & SROCE_LEH_F_RETX) != 0;
    if (!retx && x.psn >= first + 2) return Verdict::kDrop;
    if (retx && x.psn == first + 3 && repairs3++ == 0) return Verdict::kDrop;
    return Verdict::kDeliver;
  };
  REQUIRE(post(p.a, p.qa, WrOpcode::kRdmaRead, {sge(p.a, 0x10000, 8192)}, 1, kSendSignaled,
               p.b.addr(0x200000), p.b.mr.rkey) == 0);
  auto wc = wait_wc(p.w, p.a, 1);
  REQUIRE(wc.size() == 1);
  CHECK(wc[0].status == WcStatus::kSuccess);
  CHECK(p.a.mem.same(p.a.addr(0x10000), p.b.mem, p.b.addr(0x200000), 8192));
  CHECK(repairs3 == 2);
  // PSNs first and first+1 were never sent again.
  CHECK(p.w.count([&](const WirePkt& x) { return is_read_resp(x) && x.psn == first; }) == 1);
  CHECK(p.w.count([&](const WirePkt& x) { return is_read_resp(x) && x.psn == first + 1; }) == 1);
  // 8 originals, 6 repairs of first+2..first+7, one more of first+3.
  CHECK(qstats(p.b, p.qb).read_responses_sent == 8 + 6 + 1);
}

TEST_CASE("lossy READ: READs, WRITEs and atomics under loss, duplication and reordering",
          "[lossy][read]") {
  for (uint32_t seed = 1; seed <= 8; ++seed) {
    DYNAMIC_SECTION("seed " << seed) {
      EngineConfig cfg = lossy_cfg(seed % 2 ? 16 : 4);
      Pair p(QpOpts{.max_send_wr = 128, .max_recv_wr = 128},
             {.mtu = Mtu::k1024, .timeout = 10, .retry_cnt = 7}, {}, cfg);
      warm_up(p);
      std::mt19937 rng(seed * 77);
      std::uniform_int_distribution<int> pct(0, 99);
      // Only the responses suffer (the requests' recovery is tested elsewhere),
      // but all of them: READ responses, ACKs, atomic ACKs.
      p.w.filter = [&](const WirePkt& x) {
        if (x.from == 0) return Verdict::kDeliver;
        const int r = pct(rng);
        if (r < 5) return Verdict::kDrop;
        if (r < 8) return Verdict::kDuplicate;
        if (r < 15) return Verdict::kHold;
        return Verdict::kDeliver;
      };
      p.a.mem.fill(p.a.addr(0), 65536, seed);
      p.b.mem.fill(p.b.addr(0x200000), 65536, seed + 50);
      p.b.mem.put64(p.b.addr(0x700000), 0);
      constexpr int kOps = 40;
      std::vector<int> kind(kOps);
      std::vector<uint32_t> lens(kOps);
      int adds = 0;
      for (int i = 0; i < kOps; ++i) {
        kind[i] = rng() % 4 == 0 ? 1 : 2;  // mostly READs
        lens[i] = 1 + rng() % 16000;
        if (i % 10 == 9) {
          kind[i] = 3;  // fetch-and-add 1
          REQUIRE(post_atomic(p.a, p.qa, WrOpcode::kAtomicFetchAdd, sge(p.a, 0x7f0000 + 8 * i, 8),
                              i, p.b.addr(0x700000), p.b.mr.rkey, 1, 0) == 0);
          ++adds;
          continue;
        }
        post_mixed(p, i, kind[i], lens[i], 0x4000);
      }
      auto got = wait_wc(p.w, p.a, kOps, Duration::millis(5000), [&] { p.w.release(); });
      REQUIRE(got.size() == kOps);
      for (int i = 0; i < kOps; ++i) {
        INFO("wr " << i << " status " << to_string(got[i].status));
        CHECK(got[i].wr_id == static_cast<uint64_t>(i));  // exactly once, in order
        CHECK(got[i].status == WcStatus::kSuccess);
      }
      for (int i = 0; i < kOps; ++i)
        if (kind[i] != 3) {
          if (kind[i] == 2)
            CHECK(p.a.mem.same(p.a.addr(0x20000 + 0x4000ull * i), p.b.mem,
                               p.b.addr(0x200000 + 0x4000ull * (i % 4)), lens[i]));
          else
            CHECK(p.b.mem.same(p.b.addr(0x100000 + 0x4000ull * i), p.a.mem,
                               p.a.addr(0x4000ull * (i % 4)), lens[i]));
        }
      // Each atomic executed exactly once, in order: fetched 0, 1, 2, ...
      CHECK(p.b.mem.get64(p.b.addr(0x700000)) == static_cast<uint64_t>(adds));
      uint64_t n = 0;
      for (int i = 0; i < kOps; ++i)
        if (kind[i] == 3) CHECK(p.a.mem.get64(p.a.addr(0x7f0000 + 8 * i)) == n++);
      CHECK(qstats(p.a, p.qa).mode == QpMode::kLossy);
    }
  }
}

// docs/lossy.md, negotiation: recovery of the compatible PSNs after a
// mid-stream switch, with a READ among them (the READ's request must go
// again, in order, as a compatible packet) must not resend the lossy PSNs
// the receiver already placed. By a NAK sequence error, and by the RTO when
// every NAK is lost.
TEST_CASE("lossy switch: going back over compatible PSNs with a READ resends no lossy PSN",
          "[lossy][read][switch]") {
  const bool by_timeout = GENERATE(false, true);
  INFO((by_timeout ? "RTO" : "NAK"));
  Pair p(QpOpts{}, {.mtu = Mtu::k1024, .timeout = 10, .retry_cnt = 7}, {}, lossy_cfg(4));
  p.a.mem.fill(p.a.addr(0), 65536, 3);
  p.b.mem.fill(p.b.addr(0x200000), 8192, 8);
  // Compatible part: WRITE 4 KiB, WRITE 4 KiB whose middle packet is lost,
  // READ 4 KiB (dropped by b as out of sequence). b's packets are held.
  bool lost_one = false;
  p.w.filter = [&](const WirePkt& x) {
    if (x.from == 1) return Verdict::kHold;
    if (!lost_one && x.op() == SROCE_OP_WRITE_MIDDLE && x.psn == 105) {
      lost_one = true;
      return Verdict::kDrop;
    }
    return Verdict::kDeliver;
  };
  REQUIRE(post(p.a, p.qa, WrOpcode::kRdmaWrite, {sge(p.a, 0, 4096)}, 1, kSendSignaled,
               p.b.addr(0x100000), p.b.mr.rkey) == 0);
  REQUIRE(post(p.a, p.qa, WrOpcode::kRdmaWrite, {sge(p.a, 4096, 4096)}, 2, kSendSignaled,
               p.b.addr(0x110000), p.b.mr.rkey) == 0);
  REQUIRE(post(p.a, p.qa, WrOpcode::kRdmaRead, {sge(p.a, 0x20000, 4096)}, 3, kSendSignaled,
               p.b.addr(0x200000), p.b.mr.rkey) == 0);
  p.w.pump();
  REQUIRE(lost_one);
  CHECK(p.w.count([](const WirePkt& x) { return x.ext; }) == 0);
  // b's first packet (the ACK of the first WRITE, with CAP) gets through:
  // a switches at its next WQE with the rest still unacknowledged.
  std::vector<WirePkt> held = std::move(p.w.held);
  p.w.held.clear();
  REQUIRE(held.size() >= 2);
  REQUIRE(held[0].is_ack());
  p.w.filter = nullptr;
  p.w.deliver(held[0]);
  // Lossy part: four WRITEs; b places them (out of order: it still misses
  // PSN 105) and SACKs them.
  for (int i = 0; i < 4; ++i)
    REQUIRE(post(p.a, p.qa, WrOpcode::kRdmaWrite, {sge(p.a, 0x8000 + 0x2000ull * i, 3000)},
                 10 + i, kSendSignaled, p.b.addr(0x120000 + 0x2000ull * i), p.b.mr.rkey) == 0);
  p.w.filter = [&](const WirePkt& x) {
    if (by_timeout && x.is_nak()) return Verdict::kDrop;  // only the RTO is left
    return Verdict::kDeliver;
  };
  p.w.pump();
  const size_t ext_first = p.w.count([](const WirePkt& x) { return x.from == 0 && x.ext; });
  CHECK(ext_first == 12);  // 4 WRITEs of 3 packets, each once so far
  // Now b's held NAK (PSN 105) arrives, or is lost.
  for (size_t i = 1; i < held.size(); ++i)
    if (!(by_timeout && held[i].is_nak())) p.w.deliver(held[i]);
  auto wc = wait_wc(p.w, p.a, 7);
  REQUIRE(wc.size() == 7);
  for (size_t i = 0; i < wc.size(); ++i) CHECK(wc[i].status == WcStatus::kSuccess);
  CHECK(wc[2].wr_id == 3);
  CHECK(p.b.mem.same(p.b.addr(0x110000), p.a.mem, p.a.addr(4096), 4096));
  CHECK(p.a.mem.same(p.a.addr(0x20000), p.b.mem, p.b.addr(0x200000), 4096));
  for (int i = 0; i < 4; ++i)
    CHECK(p.b.mem.same(p.b.addr(0x120000 + 0x2000ull * i), p.a.mem,
                       p.a.addr(0x8000 + 0x2000ull * i), 3000));
  // The compatible PSNs went back (105 on); no lossy PSN was sent twice.
  CHECK(sent_with_psn(p.w, 0, 105) == 2);
  std::map<uint32_t, int> lossy_sent;
  for (const WirePkt& x : p.w.log)
    if (x.from == 0 && x.ext && x.op() != SROCE_OP_READ_REQUEST) ++lossy_sent[x.psn];
  CHECK(lossy_sent.size() == 12);
  for (const auto& [psn, n] : lossy_sent) {
    INFO("lossy PSN " << psn);
    CHECK(n == 1);
  }
  CHECK(qstats(p.a, p.qa).spurious_retransmits == 0);
  if (by_timeout) CHECK(qstats(p.a, p.qa).timeouts >= 1);
}

// The MR of a lossy READ deregistered while its responses are going out (docs/security.md
// "Memory": the requester may have completed the READ through repairs by then, as Open MPI's
// rendezvous did before deregistering). The responder stops without a NAK and its QP lives;
// this requester really lacks the data, so its repairs go unanswered until retry_cnt runs out.
TEST_CASE("lossy READ: the MR deregistered mid-response, no NAK, the responder QP lives",
          "[lossy][read]") {
  Pair p({}, {.mtu = Mtu::k1024, .timeout = 8, .retry_cnt = 2}, {}, lossy_cfg(4));
  warm_up(p);
  p.b.mem.fill(p.b.addr(0x200000), 16384, 5);
  auto mr2 = p.b->reg_mr(p.b.pd, p.b.addr(0x200000), 16384, kAccessLocalWrite | kAccessRemoteRead);
  REQUIRE(mr2.ok());
  int responses = 0;
  p.w.filter = [&](const WirePkt& x) {
    if (is_read_resp(x) && ++responses == 3) REQUIRE(p.b->dereg_mr(mr2->lkey).ok());
    return Verdict::kDeliver;
  };
  REQUIRE(post(p.a, p.qa, WrOpcode::kRdmaRead, {sge(p.a, 0x10000, 16384)}, 1, kSendSignaled,
               p.b.addr(0x200000), mr2->rkey) == 0);
  auto wc = wait_wc(p.w, p.a, 1);
  REQUIRE(wc.size() == 1);
  CHECK(wc[0].status == WcStatus::kRetryExcErr);
  CHECK(responses == 3);  // nothing sent from the MR after the DEREG
  CHECK(p.b->stats().replays_dropped == 1);
  CHECK(p.b->stats().naks_sent_by_code[kNakRemoteAccess] == 0);
  CHECK(p.b.events().empty());
  for (const WirePkt& x : p.w.log) CHECK_FALSE((x.from == 1 && x.is_nak()));
}

TEST_CASE("lossy READ: early READs beyond the table of deferred requests are dropped, then done",
          "[lossy][read]") {
  // A responder keeps the headers of READs that arrive before its expected
  // PSN in a table of min(max_rd_atomic, 16) entries (qp.h, Deferred). Here
  // the requester may keep 32 READs outstanding (both engines allow it), the
  // first request is lost, and the next 23 arrive early: 16 wait, 7 find the
  // table full and are dropped as if lost. Every READ still completes, in
  // order, with the responder's bytes.
  EngineConfig cfg = lossy_cfg(4);
  cfg.max_rd_atomic = 32;
  ConnOpts co{.mtu = Mtu::k1024, .max_rd_atomic = 32, .max_dest_rd_atomic = 32};
  Pair p({}, co, co, cfg);
  warm_up(p);
  constexpr int kReads = 24;
  p.b.mem.fill(p.b.addr(0x200000), kReads * 512, 9);
  p.a.mem.zero(p.a.addr(0x10000), kReads * 512);
  // The first READ request is lost, and so is every copy of it until the
  // other 23 have arrived (the responder asks for it as soon as a lane shows
  // the gap).
  bool first_seen = false;
  uint32_t first_psn = 0;
  int others = 0;
  p.w.filter = [&](const WirePkt& x) {
    if (!is_read_req(x)) return Verdict::kDeliver;
    if (!first_seen) {
      first_seen = true;
      first_psn = x.psn;
    }
    if (x.psn != first_psn) {
      ++others;
      return Verdict::kDeliver;
    }
    return others < kReads - 1 ? Verdict::kDrop : Verdict::kDeliver;
  };
  const uint64_t dropped_before = p.b->stats().rx_drop_reason[kRxDropOutOfSequence];
  for (int i = 0; i < kReads; ++i)
    REQUIRE(post(p.a, p.qa, WrOpcode::kRdmaRead, {sge(p.a, 0x10000 + 512 * i, 512)},
                 static_cast<uint64_t>(i), kSendSignaled, p.b.addr(0x200000 + 512 * i),
                 p.b.mr.rkey) == 0);
  auto wc = wait_wc(p.w, p.a, kReads);
  REQUIRE(wc.size() == kReads);
  for (int i = 0; i < kReads; ++i) {
    CAPTURE(i, wc_str(wc[i]));
    CHECK(wc[i].status == WcStatus::kSuccess);
    CHECK(wc[i].wr_id == static_cast<uint64_t>(i));
  }
  CHECK(p.a.mem.same(p.a.addr(0x10000), p.b.mem, p.b.addr(0x200000), kReads * 512));
  // 23 early, 16 deferred: 7 dropped (their retransmissions may find room).
  CHECK(p.b->stats().rx_drop_reason[kRxDropOutOfSequence] - dropped_before >= 7);
  CHECK(qstats(p.a, p.qa).mode == QpMode::kLossy);
  // Both QPs live on: one more READ.
  p.w.filter = nullptr;
  REQUIRE(post(p.a, p.qa, WrOpcode::kRdmaRead, {sge(p.a, 0x10000, 512)}, 99, kSendSignaled,
               p.b.addr(0x200000), p.b.mr.rkey) == 0);
  wc = wait_wc(p.w, p.a, 1);
  REQUIRE(wc.size() == 1);
  CHECK(wc[0].status == WcStatus::kSuccess);
}
