// Lane trains (docs/lossy.md "Lane trains", LossyConfig::train_bytes): a lane
// carries a train of consecutive new packets of the QP, then the next lane
// takes the next train. Checked here: the lane choice (runs of exactly the
// train's packets, round robin over the lanes, weights choosing per train),
// the per-lane sequence (every packet its lane's next number, prev_psn the
// lane's previous packet, also across train boundaries), and that the
// receiver still tells reordering from loss when whole trains arrive late or
// a packet inside a train is lost.
#include <map>
#include <random>
#include <vector>

#include "harness.h"

using namespace sroce;
using namespace sroce::test;

namespace {

// 4 lanes, round robin (no weights: the choice is deterministic), trains of
// `train` bytes; the tests run at MTU 1024.
EngineConfig train_cfg(uint32_t train, uint16_t lanes = 4) {
  EngineConfig c = lossy_cfg(lanes);
  c.lossy.lane_weights = false;
  c.lossy.train_bytes = train;
  return c;
}

// The lanes of a's new (first-sent, trailer-carrying) requests from log index `from` on.
std::vector<uint8_t> new_request_lanes(const Wire& w, size_t from) {
  std::vector<uint8_t> v;
  for (size_t i = from; i < w.log.size(); ++i) {
    const WirePkt& x = w.log[i];
    if (x.from == 0 && x.ext && x.op() != SROCE_OP_ACK && !(x.req.flags & SROCE_LEH_F_RETX))
      v.push_back(x.req.lane);
  }
  return v;
}

// Lengths of the runs of equal values.
std::vector<size_t> runs(const std::vector<uint8_t>& v) {
  std::vector<size_t> r;
  for (size_t i = 0; i < v.size(); ++i) {
    if (i == 0 || v[i] != v[i - 1]) r.push_back(0);
    ++r.back();
  }
  return r;
}

}  // namespace

TEST_CASE("lane trains: a lane takes train_bytes of packets, then the next lane", "[lossy][trains]") {
  for (const uint32_t train : {0u, 1024u, 4096u, 6000u, 16384u}) {
    DYNAMIC_SECTION("train_bytes " << train) {
      Pair p({}, {.mtu = Mtu::k1024, .timeout = 14}, {}, train_cfg(train));
      warm_up(p);
      p.a.mem.fill(p.a.addr(0), 131072, 3);
      const size_t before = p.w.log.size();
      REQUIRE(post(p.a, p.qa, WrOpcode::kRdmaWrite, {sge(p.a, 0, 65536)}, 1, kSendSignaled,
                   p.b.addr(0x10000), p.b.mr.rkey) == 0);
      REQUIRE(post(p.a, p.qa, WrOpcode::kRdmaWrite, {sge(p.a, 65536, 65536)}, 2, kSendSignaled,
                   p.b.addr(0x30000), p.b.mr.rkey) == 0);
      auto wa = wait_wc(p.w, p.a, 2);
      REQUIRE(wa.size() == 2);
      CHECK(wa[0].status == WcStatus::kSuccess);
      CHECK(wa[1].status == WcStatus::kSuccess);
      CHECK(p.b.mem.same(p.b.addr(0x10000), p.a.mem, p.a.addr(0), 65536));
      CHECK(p.b.mem.same(p.b.addr(0x30000), p.a.mem, p.a.addr(65536), 65536));
      const auto lanes = new_request_lanes(p.w, before);
      REQUIRE(lanes.size() == 128);
      // Whole packets per train, at least one; trains run over message boundaries.
      const size_t per = std::max<size_t>(train / 1024, 1);
      const auto r = runs(lanes);
      for (size_t i = 0; i + 1 < r.size(); ++i) CHECK(r[i] == per);
      CHECK(r.back() <= per);
      // Round robin: train k on lane (first + k) % 4.
      for (size_t i = 0; i < lanes.size(); ++i) CHECK(lanes[i] == (lanes[0] + i / per) % 4);
      CHECK(qstats(p.a, p.qa).retransmits == 0);
    }
  }
}

TEST_CASE("lane trains: per-lane sequence and prev_psn across train boundaries", "[lossy][trains]") {
  Pair p({}, {.mtu = Mtu::k1024, .timeout = 14}, {}, train_cfg(3072));
  warm_up(p);
  p.a.mem.fill(p.a.addr(0), 65536, 4);
  const size_t before = p.w.log.size();
  REQUIRE(post(p.a, p.qa, WrOpcode::kRdmaWrite, {sge(p.a, 0, 65536)}, 1, kSendSignaled,
               p.b.addr(0x10000), p.b.mr.rkey) == 0);
  auto wa = wait_wc(p.w, p.a, 1);
  REQUIRE(wa.size() == 1);
  CHECK(p.b.mem.same(p.b.addr(0x10000), p.a.mem, p.a.addr(0), 65536));
  std::map<uint8_t, std::pair<uint16_t, uint32_t>> last;  // lane -> (seq, psn)
  size_t checked = 0;
  for (size_t i = before; i < p.w.log.size(); ++i) {
    const WirePkt& x = p.w.log[i];
    if (x.from != 0 || !x.ext || x.op() == SROCE_OP_ACK) continue;
    auto it = last.find(x.req.lane);
    if (it != last.end()) {
      CHECK(x.req.lane_seq == static_cast<uint16_t>(it->second.first + 1));
      REQUIRE((x.req.prev_psn & SROCE_LEH_PSN_VALID) != 0);
      CHECK((x.req.prev_psn & 0xffffff) == it->second.second);
      ++checked;
    }
    last[x.req.lane] = {x.req.lane_seq, x.psn};
  }
  CHECK(last.size() == 4);
  CHECK(checked == 64 - 4);
}

TEST_CASE("lane trains: a whole train arriving late is reordering, not loss", "[lossy][trains]") {
  EngineConfig cfg = train_cfg(4096);
  cfg.lossy.reorder_timeout = Duration::millis(1);
  Pair p({}, {.mtu = Mtu::k1024, .timeout = 14}, {}, cfg);
  warm_up(p);
  p.a.mem.fill(p.a.addr(0), 65536, 5);
  // Lane 3 is a slow path: its trains are held and delivered after the others.
  p.w.filter = [&](const WirePkt& x) {
    if (x.from == 0 && x.ext && x.req.lane == 3) return Verdict::kHold;
    return Verdict::kDeliver;
  };
  REQUIRE(post(p.a, p.qa, WrOpcode::kRdmaWrite, {sge(p.a, 0, 65536)}, 1, kSendSignaled,
               p.b.addr(0x10000), p.b.mr.rkey) == 0);
  std::vector<Wc> wa;
  p.w.run_until(
      [&] {
        p.w.release();
        auto v = p.a.poll();
        wa.insert(wa.end(), v.begin(), v.end());
        return !wa.empty();
      },
      Duration::millis(100));
  REQUIRE(wa.size() == 1);
  CHECK(wa[0].status == WcStatus::kSuccess);
  CHECK(p.b.mem.same(p.b.addr(0x10000), p.a.mem, p.a.addr(0), 65536));
  const QpStats sa = qstats(p.a, p.qa), sb = qstats(p.b, p.qb);
  CHECK(sb.max_reorder_depth >= 4);  // a train of 4 overtaken
  CHECK(sa.retransmits == 0);
  CHECK(sb.losses_detected == 0);
}

TEST_CASE("lane trains: a packet lost inside a train is a loss at once, resent alone", "[lossy][trains]") {
  for (const int pos : {0, 1, 3}) {  // first, middle, last packet of its train
    DYNAMIC_SECTION("position " << pos) {
      EngineConfig cfg = train_cfg(4096);
      cfg.lossy.reorder_timeout = Duration::millis(5);  // not the timer
      Pair p({}, {.mtu = Mtu::k1024, .timeout = 18}, {}, cfg);
      warm_up(p);
      p.a.mem.fill(p.a.addr(0), 65536, 6);
      int seen_on_2 = 0;
      uint32_t victim = 0;
      bool dropped = false;
      p.w.filter = [&](const WirePkt& x) {
        if (x.from == 0 && x.ext && x.req.lane == 2 && !(x.req.flags & SROCE_LEH_F_RETX) && !dropped &&
            seen_on_2++ == pos) {
          dropped = true;
          victim = x.psn;
          return Verdict::kDrop;
        }
        return Verdict::kDeliver;
      };
      const Time t0 = p.w.now;
      REQUIRE(post(p.a, p.qa, WrOpcode::kRdmaWrite, {sge(p.a, 0, 65536)}, 1, kSendSignaled,
                   p.b.addr(0x10000), p.b.mr.rkey) == 0);
      auto wa = wait_wc(p.w, p.a, 1);
      REQUIRE(wa.size() == 1);
      CHECK(wa[0].status == WcStatus::kSuccess);
      CHECK(p.b.mem.same(p.b.addr(0x10000), p.a.mem, p.a.addr(0), 65536));
      REQUIRE(dropped);
      CHECK(p.w.now - t0 < Duration::millis(1));  // neither the reorder timer nor the RTO
      CHECK(sent_with_psn(p.w, 0, victim) == 2);
      const QpStats sa = qstats(p.a, p.qa), sb = qstats(p.b, p.qb);
      CHECK(sa.retransmits == 1);
      CHECK(sa.spurious_retransmits == 0);
      CHECK(sa.timeouts == 0);
      CHECK(sb.losses_detected == 1);
      LaneStats ls[4];
      REQUIRE(p.b->lane_stats(p.qb, ls) == 4);
      CHECK(ls[2].losses_detected == 1);
    }
  }
}

TEST_CASE("lane trains: weighted spraying chooses per train", "[lossy][trains]") {
  EngineConfig cfg = train_cfg(4096);
  cfg.lossy.lane_weights = true;
  Pair p({}, {.mtu = Mtu::k1024, .timeout = 14}, {}, cfg);
  warm_up(p);
  p.a.mem.fill(p.a.addr(0), 65536, 7);
  const size_t before = p.w.log.size();
  REQUIRE(post(p.a, p.qa, WrOpcode::kRdmaWrite, {sge(p.a, 0, 65536)}, 1, kSendSignaled,
               p.b.addr(0x10000), p.b.mr.rkey) == 0);
  auto wa = wait_wc(p.w, p.a, 1);
  REQUIRE(wa.size() == 1);
  CHECK(p.b.mem.same(p.b.addr(0x10000), p.a.mem, p.a.addr(0), 65536));
  const auto lanes = new_request_lanes(p.w, before);
  const auto r = runs(lanes);
  // Equal weights (nothing cut them): trains of 4 over all four lanes, equally.
  for (size_t i = 0; i + 1 < r.size(); ++i) CHECK(r[i] == 4);
  size_t per_lane[4] = {};
  for (uint8_t l : lanes) ++per_lane[l % 4];
  for (size_t n : per_lane) CHECK(n == 16);
}

TEST_CASE("lane trains: random loss / duplication / reordering: exactly-once, in order", "[lossy][trains][random]") {
  for (uint32_t seed = 1; seed <= 6; ++seed) {
    DYNAMIC_SECTION("seed " << seed) {
      EngineConfig cfg = lossy_cfg(seed % 2 ? 4 : 16);
      cfg.lossy.train_bytes = 1024u << (seed % 4);  // 2, 4, 8, 1 packets
      cfg.lossy.reorder_timeout = Duration::micros(200);
      Pair p(QpOpts{.max_send_wr = 128, .max_recv_wr = 128},
             {.mtu = Mtu::k1024, .timeout = 10, .retry_cnt = 7}, {}, cfg);
      warm_up(p);
      std::mt19937 rng(seed);
      std::uniform_int_distribution<int> pct(0, 99);
      p.w.filter = [&](const WirePkt&) {
        const int r = pct(rng);
        if (r < 5) return Verdict::kDrop;
        if (r < 8) return Verdict::kDuplicate;
        if (r < 13) return Verdict::kHold;
        return Verdict::kDeliver;
      };
      p.a.mem.fill(p.a.addr(0), 65536, seed);
      p.b.mem.fill(p.b.addr(0x200000), 65536, seed + 50);
      constexpr int kOps = 30;
      std::vector<int> kind(kOps);
      std::vector<uint32_t> lens(kOps);
      for (int i = 0; i < kOps; ++i) {
        kind[i] = static_cast<int>(rng() % 3);
        lens[i] = 1 + rng() % 12000;
        post_mixed(p, i, kind[i], lens[i], 0x4000);
      }
      auto got = wait_wc(p.w, p.a, kOps, Duration::millis(5000), [&] { p.w.release(); });
      REQUIRE(got.size() == kOps);
      for (int i = 0; i < kOps; ++i) {
        CHECK(got[i].wr_id == static_cast<uint64_t>(i));
        CHECK(got[i].status == WcStatus::kSuccess);
      }
      auto wb = wait_wc(p.w, p.b, static_cast<size_t>(std::count(kind.begin(), kind.end(), 0)));
      CHECK(wb.size() == static_cast<size_t>(std::count(kind.begin(), kind.end(), 0)));
      check_mixed_data(p, kind, lens, 0x4000);
      CHECK(qstats(p.a, p.qa).mode == QpMode::kLossy);
    }
  }
}

TEST_CASE("scheduler quantum: many QPs take turns of train_bytes, equal shares", "[lossy][trains][fairness]") {
  for (const bool lossy : {true, false}) {
    DYNAMIC_SECTION((lossy ? "lossy" : "compatible")) {
      EngineConfig cfg = train_cfg(4096);
      cfg.lossy.enable = lossy;
      Host a(0x0a000001, 11, cfg), b(0x0a000002, 22, cfg);
      Wire w(a, b);
      constexpr int kQps = 5;
      std::vector<Qpn> qa, qb;
      for (int i = 0; i < kQps; ++i) {
        qa.push_back(make_qp(a));
        qb.push_back(make_qp(b));
        connect(a, qa[i], QpType::kRc, b, qb[i], {.mtu = Mtu::k1024});
        connect(b, qb[i], QpType::kRc, a, qa[i], {.mtu = Mtu::k1024});
      }
      a.mem.fill(a.addr(0), 65536, 9);
      // A warm-up WRITE per QP (lossy mode switches at the next WQE), then
      // 64 KiB on every QP at once.
      for (int i = 0; i < kQps; ++i)
        REQUIRE(post(a, qa[i], WrOpcode::kRdmaWrite, {sge(a, 0, 8)}, 100 + i, kSendSignaled,
                     b.addr(0x7f0000), b.mr.rkey) == 0);
      REQUIRE(wait_wc(w, a, kQps).size() == kQps);
      const size_t before = w.log.size();
      for (int i = 0; i < kQps; ++i)
        REQUIRE(post(a, qa[i], WrOpcode::kRdmaWrite, {sge(a, 0, 65536)}, i, kSendSignaled,
                     b.addr(0x10000 + 0x10000 * static_cast<uint64_t>(i)), b.mr.rkey) == 0);
      auto wa = wait_wc(w, a, kQps);
      REQUIRE(wa.size() == kQps);
      for (int i = 0; i < kQps; ++i) {
        CHECK(wa[i].status == WcStatus::kSuccess);
        CHECK(b.mem.same(b.addr(0x10000 + 0x10000 * static_cast<uint64_t>(i)), a.mem, a.addr(0), 65536));
      }
      // The requests in sending order, by destination QP.
      std::vector<uint8_t> order;
      for (size_t i = before; i < w.log.size(); ++i) {
        const WirePkt& x = w.log[i];
        if (x.from != 0 || x.op() == SROCE_OP_ACK) continue;
        for (int q = 0; q < kQps; ++q)
          if (x.dqpn == qb[q]) order.push_back(static_cast<uint8_t>(q));
      }
      REQUIRE(order.size() == kQps * 64);
      // Runs of 4 packets (the quantum), the QPs in turn: after every round
      // of kQps quanta each QP has sent the same number of packets.
      const auto r = runs(order);
      for (size_t i = 0; i < r.size(); ++i) CHECK(r[i] == 4);
      size_t sent[kQps] = {};
      for (size_t i = 0; i < order.size(); ++i) {
        ++sent[order[i]];
        if ((i + 1) % (4 * kQps) == 0)
          for (int q = 0; q < kQps; ++q) CHECK(sent[q] == (i + 1) / kQps);
      }
    }
  }
}

TEST_CASE("lane trains: adaptive, packet by packet for a while after a loss", "[lossy][trains]") {
  EngineConfig cfg = train_cfg(4096);
  cfg.lossy.reorder_timeout = Duration::millis(5);
  Pair p({}, {.mtu = Mtu::k1024, .timeout = 18}, {}, cfg);
  warm_up(p);
  p.a.mem.fill(p.a.addr(0), 65536, 8);
  bool dropped = false;
  p.w.filter = [&](const WirePkt& x) {
    if (x.from == 0 && x.ext && !dropped && x.req.lane == 1 && x.req.lane_seq >= 1) {
      dropped = true;  // the second packet of lane 1's first train
      return Verdict::kDrop;
    }
    return Verdict::kDeliver;
  };
  REQUIRE(post(p.a, p.qa, WrOpcode::kRdmaWrite, {sge(p.a, 0, 65536)}, 1, kSendSignaled,
               p.b.addr(0x10000), p.b.mr.rkey) == 0);
  auto wa = wait_wc(p.w, p.a, 1);
  REQUIRE(wa.size() == 1);
  REQUIRE(dropped);
  CHECK(qstats(p.a, p.qa).retransmits == 1);
  // Posted right after the loss was reported: packet by packet.
  size_t before = p.w.log.size();
  REQUIRE(post(p.a, p.qa, WrOpcode::kRdmaWrite, {sge(p.a, 0, 16384)}, 2, kSendSignaled,
               p.b.addr(0x30000), p.b.mr.rkey) == 0);
  REQUIRE(wait_wc(p.w, p.a, 1).size() == 1);
  for (size_t r : runs(new_request_lanes(p.w, before))) CHECK(r == 1);
  // Long after the loss (more than 16 srtts): trains again.
  p.w.now = p.w.now + Duration::millis(20);
  before = p.w.log.size();
  REQUIRE(post(p.a, p.qa, WrOpcode::kRdmaWrite, {sge(p.a, 0, 16384)}, 3, kSendSignaled,
               p.b.addr(0x40000), p.b.mr.rkey) == 0);
  REQUIRE(wait_wc(p.w, p.a, 1).size() == 1);
  const auto r = runs(new_request_lanes(p.w, before));
  REQUIRE(r.size() >= 2);
  for (size_t i = 0; i + 1 < r.size(); ++i) CHECK(r[i] == 4);
  CHECK(p.b.mem.same(p.b.addr(0x10000), p.a.mem, p.a.addr(0), 65536));
  CHECK(p.b.mem.same(p.b.addr(0x30000), p.a.mem, p.a.addr(0), 16384));
  CHECK(p.b.mem.same(p.b.addr(0x40000), p.a.mem, p.a.addr(0), 16384));
}
