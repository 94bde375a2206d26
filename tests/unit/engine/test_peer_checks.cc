// The wire's peer checks (docs/security.md, "The wire"): a connected QP (RC,
// UC) takes packets only from its remote, as Linux rxe's check_addr. Each
// test is an attack by a third host that knows the victim's QPN, PSN and
// R_Key: forged ACKs and NAKs must neither complete nor kill the victim's
// work requests, a forged WRITE must not touch its memory. Each also sends
// the same packet from the real peer, so that it shows the packet itself
// would have worked: the address check is what stops it.
#include "harness.h"

using namespace sroce;
using namespace sroce::test;

namespace {

const Gid kThirdHost = Gid::from_ipv4(0x0a000063);  // 10.0.0.99: neither a (.1) nor b (.2)

uint64_t drops(Host& h, RxDropReason r) { return h->stats().rx_drop_reason[r]; }

// The ICRC covers the IP addresses and ports (Annex A17.3.3): a forger computes it for
// the addresses it puts on the packet (reicrc, harness.h).

// `p` as sent from `src` (and to `dst`, when given), with a valid ICRC.
WirePkt forged(const WirePkt& p, const Gid& src, const Gid* dst = nullptr, uint16_t sport = 0) {
  WirePkt f = p;
  f.meta.src = src;
  if (dst) f.meta.dst = *dst;
  if (sport) f.meta.src_port = sport;
  reicrc(f.bytes, f.meta);
  return f;
}

// BTH, `hdr` (extension headers), payload, pad, ICRC: a compatible-mode RC packet.
std::vector<std::byte> craft(uint8_t opcode, Qpn dqpn, uint32_t psn, const std::vector<uint8_t>& hdr,
                             const std::vector<uint8_t>& payload, const PacketMeta& m) {
  sroce_bth bth{};
  bth.opcode = opcode;
  bth.pkey = 0xffff;
  bth.dqpn = dqpn;
  bth.psn = psn;
  bth.ack_req = true;
  bth.pad = static_cast<uint8_t>((4 - (payload.size() & 3)) & 3);
  std::vector<uint8_t> p(SROCE_BTH_LEN);
  sroce_bth_write(p.data(), &bth);
  p.insert(p.end(), hdr.begin(), hdr.end());
  p.insert(p.end(), payload.begin(), payload.end());
  p.resize(p.size() + bth.pad + SROCE_ICRC_LEN, 0);
  std::vector<std::byte> out(p.size());
  std::memcpy(out.data(), p.data(), p.size());
  reicrc(out, m);
  return out;
}

std::vector<std::byte> nak(Qpn dqpn, uint32_t psn, uint8_t code, const PacketMeta& m) {
  std::vector<uint8_t> aeth(SROCE_AETH_LEN);
  sroce_aeth a{sroce_aeth_syndrome(SROCE_AETH_NAK, code), 0};
  sroce_aeth_write(aeth.data(), &a);
  return craft(static_cast<uint8_t>(SROCE_TRANSPORT_RC) | SROCE_OP_ACK, dqpn, psn, aeth, {}, m);
}

PacketMeta meta(const Gid& src, const Gid& dst, uint16_t sport = 0xc123) {
  PacketMeta m;
  m.src = src;
  m.dst = dst;
  m.src_port = sport;
  return m;
}

QpState state_of(Host& h, Qpn q) { return h->query_qp(q)->qp_state; }

}  // namespace

TEST_CASE("a forged ACK from a third host does not complete the victim's WRITE", "[rx][security]") {
  Pair p({}, {.mtu = Mtu::k1024});
  p.w.filter = [](const WirePkt& x) { return x.from == 1 ? Verdict::kHold : Verdict::kDeliver; };
  p.a.mem.fill(p.a.addr(0), 3000, 7);
  REQUIRE(post(p.a, p.qa, WrOpcode::kRdmaWrite, {sge(p.a, 0, 3000)}, 1, kSendSignaled, p.b.addr(0),
               p.b.mr.rkey) == 0);
  p.w.pump();  // the WRITE reaches b; b's ACKs are held: the WR is outstanding
  REQUIRE_FALSE(p.w.held.empty());
  // The attacker sends exactly b's ACKs (right QPN, PSN, MSN, trailer) from its own address.
  for (const auto& h : p.w.held) p.w.deliver(forged(h, kThirdHost));
  CHECK(p.a.poll().empty());
  CHECK(drops(p.a, kRxDropWrongPeer) == p.w.held.size());
  CHECK(p.a->qp_stats(p.qa)->acks_received == 0);
  CHECK(state_of(p.a, p.qa) == QpState::kRts);
  // The real ACKs complete it, and the data is b's byte for byte.
  p.w.filter = nullptr;
  p.w.release();
  auto wc = wait_wc(p.w, p.a, 1);
  REQUIRE(wc.size() == 1);
  CHECK(wc[0].status == WcStatus::kSuccess);
  CHECK(p.b.mem.same(p.b.addr(0), p.a.mem, p.a.addr(0), 3000));
}

TEST_CASE("a forged NAK from a third host does not kill the victim's QP", "[rx][security]") {
  Pair p({}, {.mtu = Mtu::k1024});
  p.w.filter = [](const WirePkt& x) { return x.from == 1 ? Verdict::kHold : Verdict::kDeliver; };
  p.a.mem.fill(p.a.addr(0), 2048, 9);
  REQUIRE(post(p.a, p.qa, WrOpcode::kRdmaWrite, {sge(p.a, 0, 2048)}, 1, kSendSignaled, p.b.addr(0),
               p.b.mr.rkey) == 0);
  p.w.pump();
  // NAK remote access error for the WRITE's first PSN (100): fatal to the QP if taken.
  for (uint8_t code : {SROCE_NAK_REMOTE_ACCESS, SROCE_NAK_INVALID_REQ, SROCE_NAK_PSN_SEQ_ERR})
    p.a->on_packet(nak(p.qa, 100, code, meta(kThirdHost, p.a.gid)), meta(kThirdHost, p.a.gid), p.w.now);
  CHECK(p.a.poll().empty());
  CHECK(drops(p.a, kRxDropWrongPeer) == 3);
  CHECK(p.a->qp_stats(p.qa)->naks_received == 0);
  CHECK(state_of(p.a, p.qa) == QpState::kRts);
  p.w.filter = nullptr;
  p.w.release();
  auto wc = wait_wc(p.w, p.a, 1);
  REQUIRE(wc.size() == 1);
  CHECK(wc[0].status == WcStatus::kSuccess);
  CHECK(p.b.mem.same(p.b.addr(0), p.a.mem, p.a.addr(0), 2048));
}

TEST_CASE("the same NAK from the real peer is taken: the address is what tells them apart", "[rx][security]") {
  Pair p({}, {.mtu = Mtu::k1024});
  p.w.filter = [](const WirePkt& x) { return x.from == 1 ? Verdict::kHold : Verdict::kDeliver; };
  REQUIRE(post(p.a, p.qa, WrOpcode::kRdmaWrite, {sge(p.a, 0, 2048)}, 1, kSendSignaled, p.b.addr(0),
               p.b.mr.rkey) == 0);
  p.w.pump();
  const PacketMeta m = meta(p.b.gid, p.a.gid);
  p.a->on_packet(nak(p.qa, 100, SROCE_NAK_REMOTE_ACCESS, m), m, p.w.now);
  auto wc = p.a.poll();
  REQUIRE(wc.size() == 1);
  CHECK(wc[0].status == WcStatus::kRemAccessErr);
  CHECK(state_of(p.a, p.qa) == QpState::kErr);
  CHECK(drops(p.a, kRxDropWrongPeer) == 0);
}

TEST_CASE("a forged WRITE from a third host with the right QPN, PSN and R_Key leaves memory untouched",
          "[rx][security]") {
  Pair p;
  p.b.mem.zero(p.b.addr(0), 64);
  std::vector<uint8_t> reth(SROCE_RETH_LEN);
  sroce_reth r{p.b.addr(0), p.b.mr.rkey, 16};
  sroce_reth_write(reth.data(), &r);
  const std::vector<uint8_t> data(16, 0xee);
  const uint8_t op = static_cast<uint8_t>(SROCE_TRANSPORT_RC) | SROCE_OP_WRITE_ONLY;
  auto untouched = [&] {
    for (int i = 0; i < 64; ++i)
      if (p.b.mem.at(p.b.addr(0))[i] != 0) return false;
    return true;
  };
  // From a third host.
  PacketMeta m = meta(kThirdHost, p.b.gid);
  p.b->on_packet(craft(op, p.qb, 100, reth, data, m), m, p.w.now);
  CHECK(untouched());
  CHECK(drops(p.b, kRxDropWrongPeer) == 1);
  // From a's address but to a destination that is not b's GID for this QP.
  m = meta(p.a.gid, kThirdHost);
  p.b->on_packet(craft(op, p.qb, 100, reth, data, m), m, p.w.now);
  CHECK(untouched());
  CHECK(drops(p.b, kRxDropWrongLocal) == 1);
  CHECK(p.b->qp_stats(p.qb)->rx_packets == 0);
  // Control: the same WRITE from a itself lands (and only its 16 bytes).
  m = meta(p.a.gid, p.b.gid);
  p.b->on_packet(craft(op, p.qb, 100, reth, data, m), m, p.w.now);
  CHECK(p.b.mem.at(p.b.addr(0))[0] == 0xee);
  CHECK(p.b.mem.at(p.b.addr(0))[15] == 0xee);
  CHECK(p.b.mem.at(p.b.addr(0))[16] == 0);
  CHECK(drops(p.b, kRxDropWrongPeer) == 1);
  CHECK(drops(p.b, kRxDropWrongLocal) == 1);
}

TEST_CASE("a lossy-mode peer's packets from a port below 49152 are dropped", "[rx][security][lossy]") {
  Pair p({}, {.mtu = Mtu::k1024});
  // A first message negotiates lossy mode (docs/lossy.md): both sides now know a sroce peer.
  REQUIRE(post(p.a, p.qa, WrOpcode::kRdmaWrite, {sge(p.a, 0, 4096)}, 1, kSendSignaled, p.b.addr(0),
               p.b.mr.rkey) == 0);
  REQUIRE(wait_wc(p.w, p.a, 1).size() == 1);
  p.w.filter = [](const WirePkt& x) { return x.from == 1 ? Verdict::kHold : Verdict::kDeliver; };
  REQUIRE(post(p.a, p.qa, WrOpcode::kRdmaWrite, {sge(p.a, 0, 4096)}, 2, kSendSignaled, p.b.addr(0),
               p.b.mr.rkey) == 0);
  p.w.pump();
  REQUIRE_FALSE(p.w.held.empty());
  REQUIRE(p.w.held.back().cap);  // b is a sroce peer
  // The right source address, a port no sroce lane uses: spoofed by someone on b's host.
  for (const auto& h : p.w.held) p.w.deliver(forged(h, p.b.gid, nullptr, 4000));
  CHECK(p.a.poll().empty());
  CHECK(drops(p.a, kRxDropWrongPort) == p.w.held.size());
  p.w.filter = nullptr;
  p.w.release();
  auto wc = wait_wc(p.w, p.a, 1);
  REQUIRE(wc.size() == 1);
  CHECK(wc[0].status == WcStatus::kSuccess);
  CHECK(std::string(to_string(kRxDropWrongPort)) == "wrong_port");
  CHECK(std::string(to_string(kRxDropWrongPeer)) == "wrong_peer");
}

TEST_CASE("UD takes datagrams from any source with the Q_Key", "[rx][security]") {
  Pair p({.type = QpType::kUd});
  REQUIRE(post_recv(p.b, p.qb, {sge(p.b, 0, 256 + 40)}, 5) == 0);
  const uint32_t qkey = 0x11111111;
  std::vector<uint8_t> deth(SROCE_DETH_LEN);
  sroce_deth d{qkey, p.qa};
  sroce_deth_write(deth.data(), &d);
  const PacketMeta m = meta(kThirdHost, p.b.gid);
  p.b->on_packet(craft(static_cast<uint8_t>(SROCE_TRANSPORT_UD) | SROCE_OP_SEND_ONLY, p.qb, 0, deth, std::vector<uint8_t>(32, 1), m), m,
                 p.w.now);
  auto wc = p.b.poll();
  REQUIRE(wc.size() == 1);
  CHECK(wc[0].status == WcStatus::kSuccess);
  CHECK(drops(p.b, kRxDropWrongPeer) == 0);
}

namespace {
// A RandomSource that counts calls and hands out a known sequence.
class FixedRandom : public RandomSource {
 public:
  explicit FixedRandom(uint32_t start) : v_(start) {}
  uint32_t next32() override {
    ++calls;
    return v_++ * 0x01010101u;
  }
  int calls = 0;

 private:
  uint32_t v_;
};
}  // namespace

TEST_CASE("key bytes come from the host's RandomSource, not from the seed", "[objects][security]") {
  // Same seed, different randomness: the index part of the keys is the same,
  // the key bytes follow the source.
  FixedRandom r1(0x10), r2(0x80);
  EngineConfig c1, c2;
  c1.random = &r1;
  c2.random = &r2;
  Host h1(0x0a000001, 5, c1), h2(0x0a000001, 5, c2);
  CHECK(r1.calls == 1);  // the harness's own MR
  CHECK((h1.mr.lkey & 0xff) == 0x10);
  CHECK((h1.mr.rkey & 0xff) == 0x10);
  CHECK((h2.mr.rkey & 0xff) == 0x80);
  CHECK((h1.mr.rkey >> 8) == (h2.mr.rkey >> 8));
  auto k = h1->reg_mr(h1.pd, h1.addr(0), 4096, kAccessLocalWrite | kAccessRemoteWrite);
  REQUIRE(k.ok());
  CHECK((k->rkey & 0xff) == 0x11);
  auto w = h1->alloc_mw(h1.pd, kMwType2);
  REQUIRE(w.ok());
  CHECK((w->rkey & 0xff) == 0x12);
  CHECK(r1.calls == 3);
  // Without a source the engine is reproducible from its seed (the simulator's mode).
  Host s1(0x0a000001, 5), s2(0x0a000001, 5);
  CHECK(s1.mr.rkey == s2.mr.rkey);
  CHECK(s1.mr.lkey == s2.mr.lkey);
}
