// BPF_PROG_TEST_RUN on crafted frames: every counted field, IPv4 and IPv6,
// VLAN tags, GSO-sized skbs (gso_segs/gso_size through ctx_in), and malformed
// input. The verifier accepting the programs is the proof that nothing is
// read out of bounds; these tests check that nothing is miscounted.
#include <catch2/catch.hpp>
#include <random>

#include "frames.h"
#include "progs.h"
#include "proto/roce.h"
#include "telemetry/telemetry.h"

using namespace sroce::tmtest;
using sroce::telemetry::format_addr;

namespace {

constexpr int kUnspec = -1;  // TC_ACT_UNSPEC: the programs only observe

Roce send(uint32_t psn, size_t payload = 64, uint32_t dqpn = 0x12) {
  Roce r;
  r.opcode = SROCE_OP_SEND_ONLY;
  r.psn = psn;
  r.payload = payload;
  r.dqpn = dqpn;
  return r;
}

Roce aeth_pkt(uint8_t opcode, uint32_t psn, uint8_t syndrome, uint32_t dqpn = 0x34) {
  Roce r;
  r.opcode = opcode;
  r.psn = psn;
  r.syndrome = syndrome;
  r.dqpn = dqpn;
  return r;
}

}  // namespace

TEST_CASE("IPv4: packets and bytes per path and direction, exactly") {
  Progs p;
  Frame f;
  f.sport = 50001;
  const auto a = build(f, {send(1, 0)});
  const auto b = build(f, {send(2, 100)});
  const auto c = build(f, {send(3, 1000)});
  REQUIRE(p.run(Dir::kEgress, a) == kUnspec);
  REQUIRE(p.run(Dir::kEgress, b) == kUnspec);
  REQUIRE(p.run(Dir::kEgress, c) == kUnspec);
  REQUIRE(p.run(Dir::kIngress, a) == kUnspec);

  const Snapshot s = p.snap();
  REQUIRE(s.paths.size() == 2);
  const PathRow* eg = find(s, Dir::kEgress, 50001, 0x12);
  const PathRow* in = find(s, Dir::kIngress, 50001, 0x12);
  REQUIRE(eg);
  REQUIRE(in);
  CHECK(eg->c.packets == 3);
  CHECK(eg->c.bytes == a.size() + b.size() + c.size());
  CHECK(in->c.packets == 1);
  CHECK(in->c.bytes == a.size());
  // Egress: we are the source; ingress: we are the destination.
  CHECK(format_addr(eg->local) == "10.0.0.1");
  CHECK(format_addr(eg->peer) == "10.0.0.2");
  CHECK(format_addr(in->local) == "10.0.0.2");
  CHECK(format_addr(in->peer) == "10.0.0.1");
  for (const PathRow* r : {eg, in}) {
    CHECK(r->c.ce == 0);
    CHECK(r->c.cnp == 0);
    CHECK(r->c.retx == 0);
    CHECK(r->c.ooo == 0);
    CHECK(r->c.acks == 0);
    CHECK(r->c.naks() == 0);
    CHECK(r->c.rtt_samples() == 0);
    CHECK(r->first_ns > 0);
    CHECK(r->last_ns >= r->first_ns);
  }
  CHECK(stat(s, SROCE_TM_STAT_SKBS) == 4);
  CHECK(stat(s, SROCE_TM_STAT_ROCE_SKBS) == 4);
  CHECK(stat(s, SROCE_TM_STAT_ROCE_PKTS) == 4);
  CHECK(stat(s, SROCE_TM_STAT_PATH_INSERT) == 2);
  CHECK(result_sum(s) == 4);
}

TEST_CASE("IPv6: addresses, counts and the traffic class ECN field") {
  Progs p;
  Frame f;
  f.ipv6 = true;
  f.src = v6("fd00::1");
  f.dst = v6("fd00::2");
  f.sport = 50002;
  const auto plain = build(f, {send(10)});
  f.ecn = 3;
  const auto ce = build(f, {send(11)});
  f.ecn = 2;  // ECT(0): not a mark
  const auto ect = build(f, {send(12)});
  for (const auto* fr : {&plain, &ce, &ect}) REQUIRE(p.run(Dir::kEgress, *fr) == kUnspec);

  const Snapshot s = p.snap();
  REQUIRE(s.paths.size() == 1);
  const PathRow& r = s.paths[0];
  CHECK(r.dir == Dir::kEgress);
  CHECK(format_addr(r.local) == "fd00::1");
  CHECK(format_addr(r.peer) == "fd00::2");
  CHECK(r.sport == 50002);
  CHECK(r.c.packets == 3);
  CHECK(r.c.bytes == plain.size() + ce.size() + ect.size());
  CHECK(r.c.ce == 1);
}

TEST_CASE("IPv4 ECN: only CE counts as a mark") {
  Progs p;
  Frame f;
  for (uint8_t ecn : {0, 1, 2, 3, 3}) {
    f.ecn = ecn;
    REQUIRE(p.run(Dir::kIngress, build(f, {send(ecn + 100u)})) == kUnspec);
  }
  const Snapshot s = p.snap();
  REQUIRE(s.paths.size() == 1);
  CHECK(s.paths[0].c.packets == 5);
  CHECK(s.paths[0].c.ce == 2);
}

TEST_CASE("VLAN: 802.1Q and QinQ tags are walked and their bytes counted") {
  Progs p;
  Frame f;
  f.sport = 50003;
  f.vlan_tpids = {0x8100};
  const auto one = build(f, {send(1)});
  f.vlan_tpids = {0x88a8, 0x8100};
  f.ipv6 = true;
  f.src = v6("fd00::a");
  f.dst = v6("fd00::b");
  const auto two = build(f, {send(1)});
  f.vlan_tpids = {0x88a8, 0x8100, 0x8100};  // three tags: more than we walk
  const auto three = build(f, {send(1)});
  REQUIRE(p.run(Dir::kEgress, one) == kUnspec);
  REQUIRE(p.run(Dir::kEgress, two) == kUnspec);
  REQUIRE(p.run(Dir::kEgress, three) == kUnspec);

  const Snapshot s = p.snap();
  REQUIRE(s.paths.size() == 2);
  for (const PathRow& r : s.paths) {
    CHECK(r.c.packets == 1);
    CHECK(r.c.bytes == (r.local[10] == 0xff ? one.size() : two.size()));
  }
  CHECK(stat(s, SROCE_TM_STAT_NOT_IP) == 1);
}

TEST_CASE("CNPs are counted and do not take part in PSN tracking") {
  Progs p;
  Frame f;
  Roce cnp;
  cnp.opcode = SROCE_OP_CNP;
  cnp.psn = 0;
  cnp.payload = 16;  // Annex A17.9.3: 16 reserved bytes
  for (int i = 0; i < 3; ++i) REQUIRE(p.run(Dir::kIngress, build(f, {cnp})) == kUnspec);
  const Snapshot s = p.snap();
  REQUIRE(s.paths.size() == 1);
  CHECK(s.paths[0].c.cnp == 3);
  CHECK(s.paths[0].c.packets == 3);
  CHECK(s.paths[0].c.retx == 0);
}

TEST_CASE("ACKs and NAKs by AETH syndrome") {
  Progs p;
  Frame f;
  f.sport = 50004;
  struct Case {
    uint8_t syndrome;
    int slot;  // -1: ACK
  };
  const Case cases[] = {
      {sroce_aeth_syndrome(SROCE_AETH_ACK, SROCE_AETH_CREDIT_INVALID), -1},
      {sroce_aeth_syndrome(SROCE_AETH_NAK, SROCE_NAK_PSN_SEQ_ERR), SROCE_TM_NAK_PSN_SEQ},
      {sroce_aeth_syndrome(SROCE_AETH_NAK, SROCE_NAK_PSN_SEQ_ERR), SROCE_TM_NAK_PSN_SEQ},
      {sroce_aeth_syndrome(SROCE_AETH_NAK, SROCE_NAK_INVALID_REQ), SROCE_TM_NAK_INVALID_REQ},
      {sroce_aeth_syndrome(SROCE_AETH_NAK, SROCE_NAK_REMOTE_ACCESS), SROCE_TM_NAK_REMOTE_ACCESS},
      {sroce_aeth_syndrome(SROCE_AETH_NAK, SROCE_NAK_REMOTE_OP), SROCE_TM_NAK_REMOTE_OP},
      {sroce_aeth_syndrome(SROCE_AETH_NAK, SROCE_NAK_INVALID_RD_REQ), SROCE_TM_NAK_INVALID_RD},
      {sroce_aeth_syndrome(SROCE_AETH_RNR_NAK, 0x0e), SROCE_TM_NAK_RNR},
      {sroce_aeth_syndrome(SROCE_AETH_NAK, 9), SROCE_TM_NAK_OTHER},  // reserved NAK code
      {sroce_aeth_syndrome(SROCE_AETH_RESERVED, 0), SROCE_TM_NAK_OTHER},
  };
  std::array<uint64_t, SROCE_TM_NAK_SLOTS> want{};
  uint64_t acks = 0;
  uint32_t psn = 5;
  for (const Case& c : cases) {
    REQUIRE(p.run(Dir::kIngress, build(f, {aeth_pkt(SROCE_OP_ACK, psn++, c.syndrome)})) == kUnspec);
    if (c.slot < 0) {
      ++acks;
    } else {
      ++want[static_cast<size_t>(c.slot)];
    }
  }
  // Atomic ACK and read responses carry an AETH too (IBA table 38).
  for (uint8_t op : {SROCE_OP_ATOMIC_ACK, SROCE_OP_READ_RESP_FIRST, SROCE_OP_READ_RESP_ONLY}) {
    Roce r = aeth_pkt(op, psn++, 0);
    if (op == SROCE_OP_ATOMIC_ACK) r.payload = SROCE_ATMACK_LEN;
    REQUIRE(p.run(Dir::kIngress, build(f, {r})) == kUnspec);
    ++acks;
  }
  // The same ACK twice (a duplicate ACK) is not a retransmission.
  REQUIRE(p.run(Dir::kIngress, build(f, {aeth_pkt(SROCE_OP_ACK, 5, 0)})) == kUnspec);
  ++acks;

  const Snapshot s = p.snap();
  REQUIRE(s.paths.size() == 1);
  const PathRow& r = s.paths[0];
  CHECK(r.c.acks == acks);
  for (size_t i = 0; i < want.size(); ++i) {
    INFO("NAK slot " << i);
    CHECK(r.c.nak[i] == want[i]);
  }
  CHECK(r.c.packets == std::size(cases) + 4);
  CHECK(r.c.retx == 0);
  CHECK(r.c.ooo == 0);
}

TEST_CASE("PSN regressions are retransmissions, late PSNs are out of order") {
  Progs p;
  Frame f;
  f.sport = 50005;
  // 1 2 3 5 | 4 late | 3 again | 6 | 4 again | 100 | 10: beyond the window
  for (uint32_t psn : {1u, 2u, 3u, 5u, 4u, 3u, 6u, 4u, 100u, 10u}) {
    REQUIRE(p.run(Dir::kIngress, build(f, {send(psn)})) == kUnspec);
  }
  // A second QP on the same 5-tuple has its own sequence.
  for (uint32_t psn : {4u, 3u}) {
    REQUIRE(p.run(Dir::kIngress, build(f, {send(psn, 64, 0x99)})) == kUnspec);
  }
  // 24-bit wrap (IBA 9.7.1): 0xfffffe 0xffffff 0 1 are in order; 0xffffff again is not.
  f.sport = 50006;
  for (uint32_t psn : {0xfffffeu, 0xffffffu, 0u, 1u, 0xffffffu, 0xfffffdu}) {
    REQUIRE(p.run(Dir::kEgress, build(f, {send(psn)})) == kUnspec);
  }

  const Snapshot s = p.snap();
  const PathRow* a = find(s, Dir::kIngress, 50005, 0x12);
  const PathRow* q = find(s, Dir::kIngress, 50005, 0x99);
  const PathRow* w = find(s, Dir::kEgress, 50006, 0x12);
  REQUIRE(a);
  REQUIRE(q);
  REQUIRE(w);
  CHECK(a->c.packets == 10);
  CHECK(a->c.retx == 3);
  CHECK(a->c.ooo == 1);
  CHECK(q->c.retx == 0);
  CHECK(q->c.ooo == 1);  // 3 after 4: never seen, below the highest
  CHECK(w->c.retx == 1);
  CHECK(w->c.ooo == 1);  // 0xfffffd: below the highest, never carried
}

TEST_CASE("request -> ACK round-trip time, Karn's rule, unmatched ACKs") {
  Progs p;
  // Requester A sends from port 50007 to B's QP 0x12; B's ACKs come back from
  // another source port to A's QP 0x77: matched by (A, B, PSN).
  Frame req;
  req.sport = 50007;
  Frame ack;
  ack.src = req.dst;
  ack.dst = req.src;
  ack.sport = 61000;
  const uint8_t kAck = sroce_aeth_syndrome(SROCE_AETH_ACK, SROCE_AETH_CREDIT_INVALID);

  Roce r = send(7);
  r.ack_req = true;
  REQUIRE(p.run(Dir::kEgress, build(req, {r})) == kUnspec);
  Roce no_ackreq = send(8);  // no AckReq: nothing to time
  REQUIRE(p.run(Dir::kEgress, build(req, {no_ackreq})) == kUnspec);
  REQUIRE(p.run(Dir::kIngress, build(ack, {aeth_pkt(SROCE_OP_ACK, 7, kAck, 0x77)})) == kUnspec);
  // The same ACK again, and an ACK of PSN 8 (never AckReq'd): no samples.
  REQUIRE(p.run(Dir::kIngress, build(ack, {aeth_pkt(SROCE_OP_ACK, 7, kAck, 0x77)})) == kUnspec);
  REQUIRE(p.run(Dir::kIngress, build(ack, {aeth_pkt(SROCE_OP_ACK, 8, kAck, 0x77)})) == kUnspec);

  // Karn: PSN 9 sent twice, then ACKed: ambiguous, no sample.
  Roce k = send(9);
  k.ack_req = true;
  REQUIRE(p.run(Dir::kEgress, build(req, {k})) == kUnspec);
  REQUIRE(p.run(Dir::kEgress, build(req, {k})) == kUnspec);
  REQUIRE(p.run(Dir::kIngress, build(ack, {aeth_pkt(SROCE_OP_ACK, 9, kAck, 0x77)})) == kUnspec);

  // RDMA READ: the first response packet carries the request's PSN.
  Roce rd;
  rd.opcode = SROCE_OP_READ_REQUEST;
  rd.psn = 20;
  rd.ack_req = true;
  rd.payload = SROCE_RETH_LEN;
  REQUIRE(p.run(Dir::kEgress, build(req, {rd})) == kUnspec);
  Roce resp = aeth_pkt(SROCE_OP_READ_RESP_FIRST, 20, kAck, 0x77);
  resp.payload = 256;
  REQUIRE(p.run(Dir::kIngress, build(ack, {resp})) == kUnspec);

  // A NAK does not end a sample (its PSN is the expected one, IBA 9.7.5.2.8).
  Roce r2 = send(30);
  r2.ack_req = true;
  REQUIRE(p.run(Dir::kEgress, build(req, {r2})) == kUnspec);
  REQUIRE(p.run(Dir::kIngress,
                build(ack, {aeth_pkt(SROCE_OP_ACK, 30, sroce_aeth_syndrome(SROCE_AETH_NAK, 0),
                                     0x77)})) == kUnspec);

  const Snapshot s = p.snap();
  const PathRow* eg = find(s, Dir::kEgress, 50007, 0x12);
  const PathRow* in = find(s, Dir::kIngress, 61000, 0x77);
  REQUIRE(eg);
  REQUIRE(in);
  CHECK(eg->c.rtt_samples() == 2);  // PSN 7 and the READ
  CHECK(in->c.rtt_samples() == 0);  // samples go to the request's path
  CHECK(eg->c.retx == 1);
  CHECK(in->c.acks == 5);
  CHECK(in->c.nak[SROCE_TM_NAK_PSN_SEQ] == 1);
  CHECK(stat(s, SROCE_TM_STAT_RTT_SAMPLES) == 2);
  CHECK(stat(s, SROCE_TM_STAT_RTT_UNMATCHED) == 3);  // 7 again, 8, 9
  CHECK(stat(s, SROCE_TM_STAT_RTT_KARN) == 1);
  // The histogram and the sum agree: each sample lies inside its bucket.
  uint64_t lo = 0, hi = 0;
  for (size_t b = 0; b < eg->c.rtt_hist.size(); ++b) {
    lo += eg->c.rtt_hist[b] * (b ? (1ull << b) : 0);
    hi += eg->c.rtt_hist[b] * (1ull << (b + 1));
  }
  CHECK(eg->c.rtt_sum_ns >= lo);
  CHECK(eg->c.rtt_sum_ns < hi);
  CHECK(eg->c.rtt_sum_ns > 0);
}

TEST_CASE("GSO: every segment of a UDP GSO skb is counted with its own PSN") {
  Progs p;
  Frame f;
  f.sport = 50008;
  f.ecn = 3;
  std::vector<Roce> segs;
  for (uint32_t i = 0; i < 8; ++i) segs.push_back(send(100 + i, 200));
  segs.back().ack_req = true;  // sroce asks for an ACK on the batch's last packet
  const uint32_t gso_size = static_cast<uint32_t>(roce_len(segs[0]));
  const auto frame = build(f, segs);
  const size_t hdr = payload_offset(f);
  REQUIRE(p.run(Dir::kEgress, frame, 8, gso_size) == kUnspec);

  // The next batch overlaps four PSNs (104..107 again) and has a short tail.
  std::vector<Roce> segs2;
  for (uint32_t i = 0; i < 8; ++i) segs2.push_back(send(104 + i, 200));
  segs2.back().payload = 50;
  const auto frame2 = build(f, segs2);
  REQUIRE(p.run(Dir::kEgress, frame2, 8, gso_size) == kUnspec);

  Snapshot s = p.snap();
  const PathRow* r = find(s, Dir::kEgress, 50008, 0x12);
  REQUIRE(r);
  CHECK(r->c.packets == 16);
  CHECK(r->c.bytes == frame.size() + 7 * hdr + frame2.size() + 7 * hdr);
  CHECK(r->c.ce == 16);
  CHECK(r->c.retx == 4);
  CHECK(r->c.ooo == 0);
  CHECK(stat(s, SROCE_TM_STAT_ROCE_PKTS) == 16);
  CHECK(stat(s, SROCE_TM_STAT_ROCE_SKBS) == 2);
  CHECK(stat(s, SROCE_TM_STAT_GSO_SKBS) == 2);

  // Only the AckReq'd segment (PSN 107) waits for an ACK; it was retransmitted
  // in the second batch, so Karn drops it.
  CHECK(stat(s, SROCE_TM_STAT_RTT_KARN) == 1);

  // GRO on ingress: PSNs need not be consecutive; each segment is judged.
  std::vector<Roce> gro = {send(1, 100), send(2, 100), send(2, 100), send(4, 100), send(3, 100)};
  Frame g;
  g.sport = 50009;
  REQUIRE(p.run(Dir::kIngress, build(g, gro), 5, static_cast<uint32_t>(roce_len(gro[0]))) ==
          kUnspec);
  s = p.snap();
  const PathRow* gr = find(s, Dir::kIngress, 50009, 0x12);
  REQUIRE(gr);
  CHECK(gr->c.packets == 5);
  CHECK(gr->c.retx == 1);
  CHECK(gr->c.ooo == 1);
}

TEST_CASE("GSO: inconsistent sizes and cut-short segments are not miscounted") {
  Progs p;
  Frame f;
  std::vector<Roce> segs;
  for (uint32_t i = 0; i < 4; ++i) segs.push_back(send(i, 100));
  const auto frame = build(f, segs);
  const auto gso = static_cast<uint32_t>(roce_len(segs[0]));

  // gso_segs claims more segments than the skb holds, or fewer.
  REQUIRE(p.run(Dir::kEgress, frame, 8, gso) == kUnspec);
  REQUIRE(p.run(Dir::kEgress, frame, 2, gso) == kUnspec);
  Snapshot s = p.snap();
  CHECK(s.paths.empty());
  CHECK(stat(s, SROCE_TM_STAT_BAD_GSO) == 2);

  // Segment 2 is not a BTH of version 0: segments 0 and 1 count, 2 and 3 do not.
  segs[2].tver = 1;
  REQUIRE(p.run(Dir::kEgress, build(f, segs), 4, gso) == kUnspec);
  s = p.snap();
  REQUIRE(s.paths.size() == 1);
  CHECK(s.paths[0].c.packets == 2);
  CHECK(stat(s, SROCE_TM_STAT_SEG_TRUNC) == 2);
  CHECK(stat(s, SROCE_TM_STAT_ROCE_PKTS) == 2);
  CHECK(result_sum(s) == stat(s, SROCE_TM_STAT_SKBS));
}

TEST_CASE("malformed and foreign input is classified, never counted as RoCEv2") {
  Progs p;
  Frame f;
  f.sport = 50010;
  const auto good = build(f, {send(1, 32)});
  uint64_t runs = 0;
  auto run = [&](const std::vector<uint8_t>& fr) {
    REQUIRE(p.run(Dir::kIngress, fr) == kUnspec);
    ++runs;
  };

  SECTION("runts and cut headers") {
    // BPF_PROG_TEST_RUN refuses frames under 14 bytes; a VLAN tag cut short
    // is the runt the programs can meet.
    auto runt = std::vector<uint8_t>(good.begin(), good.begin() + 16);
    sroce_put_be16(runt.data() + 12, 0x8100);
    run(runt);
    // The test runner refuses an untagged frame whose IP header is cut (it
    // reads the addresses); behind a VLAN tag it lets it through.
    Frame tagged = f;
    tagged.vlan_tpids = {0x8100};
    const auto tg = build(tagged, {send(1, 32)});
    run(std::vector<uint8_t>(tg.begin(), tg.begin() + 18 + 19));          // IPv4 cut
    run(std::vector<uint8_t>(good.begin(), good.begin() + 14 + 20 + 7));  // UDP cut
    auto bad_ihl = good;
    bad_ihl[14] = 0x44;  // IHL 4 < 5
    run(bad_ihl);
    auto udp_long = good;
    sroce_put_be16(udp_long.data() + 14 + 20 + 4, static_cast<uint16_t>(good.size()));  // > frame
    run(udp_long);
    const Snapshot s = p.snap();
    CHECK(stat(s, SROCE_TM_STAT_RUNT) == 1);
    CHECK(stat(s, SROCE_TM_STAT_TRUNC_IP) == 2);
    CHECK(stat(s, SROCE_TM_STAT_TRUNC_UDP) == 2);
  }
  SECTION("truncated BTH, AETH missing, bad TVer") {
    Frame t = f;
    auto short_bth = build(t, {send(1, 0)});
    // UDP payload of 11 bytes: not even a BTH.
    short_bth.resize(payload_offset(t) + 11);
    sroce_put_be16(short_bth.data() + 14 + 20 + 4, 8 + 11);
    sroce_put_be16(short_bth.data() + 14 + 2, 20 + 8 + 11);
    run(short_bth);
    // BTH + ICRC but no room for the AETH an ACK needs.
    auto ack = build(t, {aeth_pkt(SROCE_OP_ACK, 1, 0)});
    ack.resize(ack.size() - 4);
    sroce_put_be16(ack.data() + 14 + 20 + 4, static_cast<uint16_t>(ack.size() - 14 - 20));
    sroce_put_be16(ack.data() + 14 + 2, static_cast<uint16_t>(ack.size() - 14));
    run(ack);
    Roce v = send(1);
    v.tver = 2;
    run(build(t, {v}));
    const Snapshot s = p.snap();
    CHECK(stat(s, SROCE_TM_STAT_TRUNC_BTH) == 2);
    CHECK(stat(s, SROCE_TM_STAT_BAD_TVER) == 1);
  }
  SECTION("not RoCEv2: other UDP ports, TCP, ARP, IPv4 fragments") {
    Frame o = f;
    o.dport = 4792;
    run(build(o, {send(1)}));
    o.dport = 4791;
    o.ip_proto = 6;
    run(build(o, {send(1)}));
    auto arp = good;
    sroce_put_be16(arp.data() + 12, 0x0806);
    run(arp);
    Frame fr = f;
    fr.ipv4_frag = 0x2000;  // more fragments
    run(build(fr, {send(1)}));
    fr.ipv4_frag = 0x0010;  // offset 128: no UDP header here
    run(build(fr, {send(1)}));
    const Snapshot s = p.snap();
    CHECK(stat(s, SROCE_TM_STAT_NOT_ROCE) == 1);
    CHECK(stat(s, SROCE_TM_STAT_NOT_UDP) == 1);
    CHECK(stat(s, SROCE_TM_STAT_NOT_IP) == 1);
    CHECK(stat(s, SROCE_TM_STAT_IP_FRAG) == 2);
  }
  SECTION("IPv6 extension headers: walked, refused or cut") {
    Frame x = f;
    x.ipv6 = true;
    x.src = v6("fd00::1");
    x.dst = v6("fd00::2");
    const Ipv6Ext hbh{0, {0, 0, 1, 4, 0, 0, 0, 0}};  // PadN
    const Ipv6Ext dst16{60, {0, 1, 1, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}};
    const Ipv6Ext rt{43, {0, 0, 4, 0, 0, 0, 0, 0}};             // routing, segments left 0
    const Ipv6Ext atomic_frag{44, {0, 0, 0, 0, 0, 0, 0, 1}};    // offset 0, M 0
    const Ipv6Ext frag_later{44, {0, 0, 0, 0x08, 0, 0, 0, 1}};  // offset 1
    x.ipv6_ext = {hbh, dst16, rt};
    const auto walked = build(x, {send(1)});
    run(walked);
    x.ipv6_ext = {atomic_frag};
    const auto atomic = build(x, {send(2)});
    run(atomic);
    x.ipv6_ext = {frag_later};
    run(build(x, {send(3)}));
    x.ipv6_ext = {hbh, hbh, hbh, hbh, hbh};  // more than we walk
    run(build(x, {send(4)}));
    x.ipv6_ext = {dst16};
    auto cut = build(x, {send(5)});
    cut.resize(14 + 40 + 1);  // the extension header's length byte is missing
    run(cut);
    Frame esp = x;
    esp.ipv6_ext = {};
    esp.ip_proto = 50;
    run(build(esp, {send(6)}));
    const Snapshot s = p.snap();
    REQUIRE(s.paths.size() == 1);
    CHECK(s.paths[0].c.packets == 2);  // the walked one and the atomic fragment
    CHECK(s.paths[0].c.bytes == walked.size() + atomic.size());
    CHECK(stat(s, SROCE_TM_STAT_IP_FRAG) == 1);
    CHECK(stat(s, SROCE_TM_STAT_IPV6_EXT) == 1);
    CHECK(stat(s, SROCE_TM_STAT_TRUNC_IP) == 1);
    CHECK(stat(s, SROCE_TM_STAT_NOT_UDP) == 1);
    CHECK(stat(s, SROCE_TM_STAT_ROCE_SKBS) == 2);
  }
  SECTION("Ethernet padding after a short datagram is charged, not parsed") {
    Frame t = f;
    auto small = build(t, {send(1, 0)});  // 14 + 20 + 8 + 16 = 58 bytes
    small.resize(60, 0);                  // padded to the Ethernet minimum
    run(small);
    const Snapshot s = p.snap();
    REQUIRE(s.paths.size() == 1);
    CHECK(s.paths[0].c.packets == 1);
    CHECK(s.paths[0].c.bytes == 60);
  }
  SECTION("every prefix of a valid frame: counted only when whole") {
    // Untagged prefixes from a whole IP header on (the runner refuses less);
    // VLAN-tagged ones from the Ethernet header on.
    Frame tagged = f;
    tagged.vlan_tpids = {0x8100};
    const auto tg = build(tagged, {send(1, 32)});
    for (size_t n = 14 + 20; n < good.size(); ++n) {
      run(std::vector<uint8_t>(good.begin(), good.begin() + n));
    }
    for (size_t n = 14; n < tg.size(); ++n) run(std::vector<uint8_t>(tg.begin(), tg.begin() + n));
    run(good);
    run(tg);
    const Snapshot s = p.snap();
    REQUIRE(s.paths.size() == 1);
    CHECK(s.paths[0].c.packets == 2);
    CHECK(s.paths[0].c.bytes == good.size() + tg.size());
  }
  SECTION("random bytes") {
    std::mt19937 rng(6);
    for (int i = 0; i < 2000; ++i) {
      std::vector<uint8_t> fr(14 + 40 + rng() % 200);
      for (auto& b : fr) b = static_cast<uint8_t>(rng());
      if (i % 2) {  // often IPv4/UDP/4791 so the deeper parsers get exercised
        sroce_put_be16(fr.data() + 12, 0x0800);
        fr[14] = 0x45;
        fr[14 + 6] = fr[14 + 7] = 0;
        fr[14 + 9] = 17;
        sroce_put_be16(fr.data() + 14 + 22, 4791);
      } else if (i % 4 == 0) {
        sroce_put_be16(fr.data() + 12, 0x86dd);
        fr[14] = 0x60;
      }
      run(fr);
    }
    const Snapshot s = p.snap();
    // Whatever was counted, was counted once per skb and adds up.
    uint64_t pkts = 0;
    for (const PathRow& r : s.paths) pkts += r.c.packets;
    CHECK(pkts == stat(s, SROCE_TM_STAT_ROCE_PKTS));
    CHECK(pkts <= stat(s, SROCE_TM_STAT_ROCE_SKBS));
  }
  const Snapshot s = p.snap();
  CHECK(stat(s, SROCE_TM_STAT_SKBS) == runs);
  CHECK(result_sum(s) == runs);
}

TEST_CASE("a full LRU paths map evicts, and the evictions are visible") {
  Progs p(/*max_paths=*/4, /*max_pending=*/4);
  Frame f;
  for (uint16_t i = 0; i < 16; ++i) {
    f.sport = static_cast<uint16_t>(51000 + i);
    REQUIRE(p.run(Dir::kEgress, build(f, {send(1)})) == kUnspec);
  }
  const Snapshot s = p.snap();
  CHECK(s.paths.size() <= 4);
  CHECK(stat(s, SROCE_TM_STAT_PATH_INSERT) + stat(s, SROCE_TM_STAT_PATH_FULL) == 16);
  CHECK(s.evicted() + s.paths.size() == stat(s, SROCE_TM_STAT_PATH_INSERT));
  CHECK(s.evicted() >= 12 - stat(s, SROCE_TM_STAT_PATH_FULL));
  for (const PathRow& r : s.paths) CHECK(r.c.packets == 1);
  // Every packet is either on a path or lost with the eviction / map-full count.
  CHECK(stat(s, SROCE_TM_STAT_ROCE_PKTS) + stat(s, SROCE_TM_STAT_PATH_FULL) == 16);
}
