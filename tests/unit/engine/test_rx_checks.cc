// Receive checks: whatever arrives, the engine drops what it must, counts it
// by reason and keeps working. Crafted packets exercise the responder's
// protocol checks (opcode sequence, lengths, alignment) as a non-sroce peer
// could send them.
#include <random>

#include "harness.h"
#include "proto/icrc.h"

using namespace sroce;
using namespace sroce::test;

namespace {

PacketMeta meta_from(const Host& src, const Host& dst) {
  PacketMeta m;
  m.src = src.gid;
  m.dst = dst.gid;
  m.src_port = 0xc123;
  return m;
}

// A packet: BTH, `ext` extension header bytes, `payload` bytes, pad, ICRC.
std::vector<std::byte> craft(sroce_bth bth, std::vector<uint8_t> ext, std::vector<uint8_t> payload,
                             const PacketMeta& m, bool good_icrc = true) {
  bth.pad = static_cast<uint8_t>((4 - (payload.size() & 3)) & 3);
  std::vector<uint8_t> p(SROCE_BTH_LEN);
  sroce_bth_write(p.data(), &bth);
  p.insert(p.end(), ext.begin(), ext.end());
  p.insert(p.end(), payload.begin(), payload.end());
  p.resize(p.size() + bth.pad, 0);
  sroce_icrc_addr a;
  std::memcpy(a.src_gid, m.src.raw, 16);
  std::memcpy(a.dst_gid, m.dst.raw, 16);
  a.src_port = m.src_port;
  a.dst_port = m.dst_port;
  uint32_t crc = sroce_icrc_payload(&a, p.data(), p.size());
  if (!good_icrc) crc ^= 1;
  for (int i = 0; i < 4; ++i) p.push_back(static_cast<uint8_t>(crc >> (8 * i)));
  std::vector<std::byte> out(p.size());
  std::memcpy(out.data(), p.data(), p.size());
  return out;
}

sroce_bth bth_to(Qpn q, uint8_t opcode, uint32_t psn) {
  sroce_bth b{};
  b.opcode = opcode;
  b.pkey = 0xffff;
  b.dqpn = q;
  b.psn = psn;
  b.ack_req = true;
  return b;
}

uint64_t drops(Host& h, RxDropReason r) { return h->stats().rx_drop_reason[r]; }

}  // namespace

TEST_CASE("a bad ICRC is dropped and counted - the transfer still completes", "[rx]") {
  Pair p({}, {.mtu = Mtu::k1024, .timeout = 8});
  bool corrupted = false;
  p.w.filter = [&](const WirePkt& x) {
    if (x.from == 0 && x.psn == 101 && !corrupted) {
      corrupted = true;
      WirePkt bad = x;
      bad.bytes[20] ^= std::byte{0x40};  // one payload bit
      p.w.deliver(bad);
      return Verdict::kDrop;
    }
    return Verdict::kDeliver;
  };
  p.a.mem.fill(p.a.addr(0), 3000, 4);
  REQUIRE(post(p.a, p.qa, WrOpcode::kRdmaWrite, {sge(p.a, 0, 3000)}, 1, kSendSignaled, p.b.addr(0),
               p.b.mr.rkey) == 0);
  auto wa = wait_wc(p.w, p.a, 1);
  REQUIRE(wa.size() == 1);
  CHECK(wa[0].status == WcStatus::kSuccess);
  CHECK(p.b.mem.same(p.b.addr(0), p.a.mem, p.a.addr(0), 3000));
  CHECK(p.b->stats().rx_bad_icrc == 1);
  CHECK(drops(p.b, kRxDropBadIcrc) == 1);
  CHECK(p.b->stats().rx_dropped >= 1);
}

TEST_CASE("malformed packets are dropped by reason", "[rx]") {
  Pair p;
  const PacketMeta m = meta_from(p.a, p.b);
  std::vector<std::byte> empty;
  p.b->on_packet(empty, m, Time::zero());
  std::vector<std::byte> short_pkt(15);
  p.b->on_packet(short_pkt, m, Time::zero());
  CHECK(drops(p.b, kRxDropParseShort) == 2);
  // Reserved opcode.
  p.b->on_packet(craft(bth_to(p.qb, 0x1f, 100), {}, {}, m), m, Time::zero());
  CHECK(drops(p.b, kRxDropParseBadOpcode) == 1);
  // Transport version 1.
  sroce_bth b = bth_to(p.qb, SROCE_OP_SEND_ONLY, 100);
  b.tver = 1;
  p.b->on_packet(craft(b, {}, {1, 2, 3, 4}, m), m, Time::zero());
  CHECK(drops(p.b, kRxDropParseBadTver) == 1);
  // RETH missing on a WRITE_ONLY.
  p.b->on_packet(craft(bth_to(p.qb, SROCE_OP_WRITE_ONLY, 100), {}, {}, m), m, Time::zero());
  CHECK(drops(p.b, kRxDropParseTruncatedHdr) + drops(p.b, kRxDropParseBadLength) >= 1);
  // Unknown QPN, wrong P_Key, UD opcode on an RC QP, CNP.
  p.b->on_packet(craft(bth_to(p.qb ^ 0x800000, SROCE_OP_SEND_ONLY, 100), {}, {}, m), m,
                 Time::zero());
  CHECK(drops(p.b, kRxDropUnknownQp) == 1);
  CHECK(p.b->stats().rx_unknown_qp == 1);
  b = bth_to(p.qb, SROCE_OP_SEND_ONLY, 100);
  b.pkey = 0x7ffe;  // limited member of another partition
  p.b->on_packet(craft(b, {}, {}, m), m, Time::zero());
  b.pkey = 0x8001;
  p.b->on_packet(craft(b, {}, {}, m), m, Time::zero());
  CHECK(drops(p.b, kRxDropBadPkey) == 2);
  std::vector<uint8_t> deth(8);
  sroce_deth d{1, p.qa};
  sroce_deth_write(deth.data(), &d);
  p.b->on_packet(craft(bth_to(p.qb, 0x64 /* UD_SEND_ONLY */, 100), deth, {}, m), m, Time::zero());
  CHECK(drops(p.b, kRxDropWrongTransport) == 1);
  p.b->on_packet(craft(bth_to(p.qb, SROCE_OP_CNP, 0), std::vector<uint8_t>(16), {}, m), m,
                 Time::zero());
  CHECK(drops(p.b, kRxDropCnp) == 1);
  // A wrong ICRC on an otherwise good packet.
  p.b->on_packet(craft(bth_to(p.qb, SROCE_OP_SEND_ONLY, 100), {}, {}, m, false), m, Time::zero());
  CHECK(drops(p.b, kRxDropBadIcrc) == 1);
  // An ACK for something never sent.
  sroce_aeth ack{sroce_aeth_syndrome(SROCE_AETH_ACK, 0x1f), 1};
  std::vector<uint8_t> aeth(4);
  sroce_aeth_write(aeth.data(), &ack);
  p.b->on_packet(craft(bth_to(p.qb, SROCE_OP_ACK, 5000), aeth, {}, m), m, Time::zero());
  CHECK(drops(p.b, kRxDropUnexpectedResponse) == 1);
  // None of that hurt: a real transfer works.
  REQUIRE(post_recv(p.b, p.qb, {sge(p.b, 0, 64)}, 1) == 0);
  REQUIRE(post(p.a, p.qa, WrOpcode::kSend, {sge(p.a, 0, 8)}, 1) == 0);
  auto wa = wait_wc(p.w, p.a, 1);
  REQUIRE(wa.size() == 1);
  CHECK(wa[0].status == WcStatus::kSuccess);
  CHECK(p.b.poll().size() == 1);
}

TEST_CASE("packets to a QP that is not ready to receive are dropped", "[rx]") {
  Host a(0x0a000001), b(0x0a000002);
  const Qpn q = make_qp(b);
  const PacketMeta m = meta_from(a, b);
  b->on_packet(craft(bth_to(q, SROCE_OP_SEND_ONLY, 0), {}, {}, m), m, Time::zero());
  to_init(b, q, QpType::kRc);
  b->on_packet(craft(bth_to(q, SROCE_OP_SEND_ONLY, 0), {}, {}, m), m, Time::zero());
  CHECK(drops(b, kRxDropQpState) == 2);
  CHECK(b->qp_stats(q)->rx_dropped == 2);
  std::vector<std::byte> buf(Engine::kMaxPacket);
  CHECK(!b->poll_transmit(buf, Time::zero()));  // no answer
}

TEST_CASE("responder protocol checks on crafted requests NAK invalid request", "[rx]") {
  auto nak_of = [](Pair& p) -> int {
    std::vector<std::byte> buf(Engine::kMaxPacket);
    auto tx = p.b->poll_transmit(buf, Time::zero());
    if (!tx) return -1;
    WirePkt w = Wire::make(1, std::span(buf.data(), tx->len), tx->meta);
    return w.is_nak() ? (w.syndrome & 0x1f) : -2;
  };
  SECTION("SEND_MIDDLE without a FIRST") {
    Pair p({}, {.mtu = Mtu::k256});
    const PacketMeta m = meta_from(p.a, p.b);
    REQUIRE(post_recv(p.b, p.qb, {sge(p.b, 0, 4096)}, 1) == 0);
    p.b->on_packet(craft(bth_to(p.qb, SROCE_OP_SEND_MIDDLE, 100), {}, std::vector<uint8_t>(256), m),
                   m, Time::zero());
    CHECK(nak_of(p) == SROCE_NAK_INVALID_REQ);
    CHECK(p.b->query_qp(p.qb)->qp_state == QpState::kErr);
  }
  SECTION("SEND_FIRST shorter than the MTU") {
    Pair p({}, {.mtu = Mtu::k256});
    const PacketMeta m = meta_from(p.a, p.b);
    REQUIRE(post_recv(p.b, p.qb, {sge(p.b, 0, 4096)}, 1) == 0);
    p.b->on_packet(craft(bth_to(p.qb, SROCE_OP_SEND_FIRST, 100), {}, std::vector<uint8_t>(200), m),
                   m, Time::zero());
    CHECK(nak_of(p) == SROCE_NAK_INVALID_REQ);
  }
  SECTION("SEND_ONLY longer than the MTU") {
    Pair p({}, {.mtu = Mtu::k256});
    const PacketMeta m = meta_from(p.a, p.b);
    REQUIRE(post_recv(p.b, p.qb, {sge(p.b, 0, 4096)}, 1) == 0);
    p.b->on_packet(craft(bth_to(p.qb, SROCE_OP_SEND_ONLY, 100), {}, std::vector<uint8_t>(300), m),
                   m, Time::zero());
    CHECK(nak_of(p) == SROCE_NAK_INVALID_REQ);
  }
  SECTION("misaligned atomic") {
    Pair p;
    const PacketMeta m = meta_from(p.a, p.b);
    std::vector<uint8_t> at(SROCE_ATMETH_LEN);
    sroce_atmeth a{p.b.addr(0x1004), p.b.mr.rkey, 1, 0};
    sroce_atmeth_write(at.data(), &a);
    p.b->on_packet(craft(bth_to(p.qb, SROCE_OP_FETCH_ADD, 100), at, {}, m), m, Time::zero());
    CHECK(nak_of(p) == SROCE_NAK_INVALID_REQ);
    CHECK(p.b.mem.get64(p.b.addr(0x1000)) == 0);
  }
  SECTION("WRITE whose packets exceed the DMA length") {
    Pair p({}, {.mtu = Mtu::k256});
    const PacketMeta m = meta_from(p.a, p.b);
    std::vector<uint8_t> reth(SROCE_RETH_LEN);
    sroce_reth r{p.b.addr(0), p.b.mr.rkey, 100};
    sroce_reth_write(reth.data(), &r);
    p.b->on_packet(
        craft(bth_to(p.qb, SROCE_OP_WRITE_ONLY, 100), reth, std::vector<uint8_t>(200), m), m,
        Time::zero());
    CHECK(nak_of(p) == SROCE_NAK_INVALID_REQ);
  }
  SECTION("PSN ahead: one sequence NAK per gap") {
    Pair p;
    const PacketMeta m = meta_from(p.a, p.b);
    for (uint32_t psn = 105; psn < 110; ++psn)
      p.b->on_packet(
          craft(bth_to(p.qb, SROCE_OP_WRITE_MIDDLE, psn), {}, std::vector<uint8_t>(1024), m), m,
          Time::zero());
    CHECK(nak_of(p) == SROCE_NAK_PSN_SEQ_ERR);
    CHECK(nak_of(p) == -1);  // only one
    CHECK(drops(p.b, kRxDropOutOfSequence) == 5);
    CHECK(p.b->query_qp(p.qb)->qp_state == QpState::kRts);  // not an error
  }
}

TEST_CASE("fuzz: mutated packets never crash the engine", "[rx][fuzz]") {
  EngineConfig cfg;
  cfg.icrc_offload = true;  // let mutations reach the deeper checks
  Pair p({}, {.mtu = Mtu::k256}, {}, cfg);
  // Collect real traffic of every kind.
  p.a.mem.fill(p.a.addr(0), 4096, 1);
  for (int i = 0; i < 4; ++i) REQUIRE(post_recv(p.b, p.qb, {sge(p.b, 0, 4096)}, i) == 0);
  REQUIRE(post(p.a, p.qa, WrOpcode::kSend, {sge(p.a, 0, 700)}, 1) == 0);
  REQUIRE(post(p.a, p.qa, WrOpcode::kRdmaWrite, {sge(p.a, 0, 700)}, 2, kSendSignaled,
               p.b.addr(0x1000), p.b.mr.rkey) == 0);
  REQUIRE(post(p.a, p.qa, WrOpcode::kRdmaRead, {sge(p.a, 0x2000, 700)}, 3, kSendSignaled,
               p.b.addr(0x1000), p.b.mr.rkey) == 0);
  REQUIRE(post_atomic(p.a, p.qa, WrOpcode::kAtomicFetchAdd, sge(p.a, 0x3000, 8), 4,
                      p.b.addr(0x8000), p.b.mr.rkey, 1, 0) == 0);
  REQUIRE(post(p.a, p.qa, WrOpcode::kSendWithImm, {sge(p.a, 0, 10)}, 5, kSendSignaled, 0, 0, 7) ==
          0);
  wait_wc(p.w, p.a, 5);
  const std::vector<WirePkt> corpus = p.w.log;
  REQUIRE(corpus.size() > 10);
  std::mt19937 rng(1234);
  std::vector<std::byte> out(Engine::kMaxPacket);
  for (int iter = 0; iter < 20000; ++iter) {
    const WirePkt& src = corpus[rng() % corpus.size()];
    std::vector<std::byte> b = src.bytes;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) {
      switch (rng() % 4) {
        case 0:
          b[rng() % b.size()] ^= std::byte(1u << (rng() % 8));
          break;
        case 1:
          b[rng() % std::min<size_t>(b.size(), 12)] = std::byte(rng() & 0xff);
          break;  // BTH
        case 2:
          b.resize(rng() % (b.size() + 1));
          if (b.empty()) b.push_back(std::byte{0});
          break;
        default:
          b.push_back(std::byte(rng() & 0xff));
          break;
      }
    }
    Engine& e = src.from == 0 ? *p.b.eng : *p.a.eng;
    e.on_packet(b, src.meta, p.w.now);
    while (e.poll_transmit(out, p.w.now)) {
    }
    if (iter % 1000 == 0) {
      p.w.now += Duration::millis(1);
      p.a->on_timer(p.w.now);
      p.b->on_timer(p.w.now);
    }
  }
  CHECK(p.a->stats().rx_packets + p.b->stats().rx_packets >= 20000);
}
