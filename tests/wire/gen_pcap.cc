// Writes a pcap of RoCEv2 frames built only with proto/ (header writers, IP/UDP
// builders, ICRC), plus the JSON list of {opcode, dqpn, psn} per frame that
// check_tshark.py --expect compares against. The checkers then decode the
// frames with tools nobody here wrote (tshark, scapy).
//
//   gen_pcap OUT.pcap OUT.json
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "proto/icrc.h"
#include "proto/packet.h"

namespace {

using Bytes = std::vector<uint8_t>;

struct Frame {
  Bytes bytes;
  sroce_pkt pkt;  // from sroce_parse of the RoCE part
};

struct Addr {
  bool v6;
  uint32_t src4, dst4;
  uint8_t src6[16], dst6[16];
  uint16_t sport;
};

// The RoCEv2 part: BTH, extension headers (filled by `ext`), payload, pad.
template <typename Ext>
Bytes roce(uint8_t opcode, uint32_t dqpn, uint32_t psn, size_t payload, Ext ext) {
  const struct sroce_opinfo* op = sroce_opinfo(opcode);
  const uint8_t pad = (uint8_t)(-payload & 3);
  Bytes p(op->hdr_len + payload + pad, 0);
  sroce_bth b{};
  b.opcode = opcode;
  b.pad = pad;
  b.mig = true;  // Linux rxe and RNICs send M=1 (APM not armed)
  b.pkey = 0xffff;
  b.dqpn = dqpn;
  b.ack_req = (op->flags & SROCE_IS_REQUEST) && (op->flags & SROCE_IS_LAST);
  b.psn = psn;
  sroce_bth_write(p.data(), &b);
  ext(p.data() + SROCE_BTH_LEN);
  for (size_t i = 0; i < payload; i++) p[op->hdr_len + i] = (uint8_t)('a' + i % 26);
  return p;
}

Bytes roce_plain(uint8_t opcode, uint32_t dqpn, uint32_t psn, size_t payload) {
  return roce(opcode, dqpn, psn, payload, [](uint8_t*) {});
}

// Ethernet + IP + UDP + RoCE + ICRC, the way sroce puts it on the wire.
Bytes frame(const Addr& a, const Bytes& r) {
  const uint16_t udp_len = (uint16_t)(8 + r.size() + SROCE_ICRC_LEN);
  Bytes f(14, 0);
  const uint8_t dmac[6] = {0x02, 0, 0, 0, 0, 0x02}, smac[6] = {0x02, 0, 0, 0, 0, 0x01};
  for (int i = 0; i < 6; i++) {
    f[i] = dmac[i];
    f[6 + i] = smac[i];
  }
  const size_t ip_len = a.v6 ? 40 : 20;
  f.resize(14 + ip_len + 8);
  uint8_t* ip = f.data() + 14;
  if (a.v6) {
    f[12] = 0x86;
    f[13] = 0xdd;
    sroce_build_ipv6(ip, a.src6, a.dst6, 0x68 /* DSCP 26, ECT(0) */, 0x3a5c1, 64, udp_len);
  } else {
    f[12] = 0x08;
    f[13] = 0x00;
    sroce_build_ipv4(ip, a.src4, a.dst4, 0x6a /* DSCP 26, ECT(0) */, 64, udp_len);
  }
  sroce_build_udp(ip + ip_len, a.sport, SROCE_UDP_PORT, udp_len);
  f.insert(f.end(), r.begin(), r.end());
  uint32_t icrc = 0;
  if (sroce_icrc_ip(f.data() + 14, f.size() - 14, &icrc) != 0) {
    std::fprintf(stderr, "gen_pcap: sroce_icrc_ip failed\n");
    std::exit(1);
  }
  f.resize(f.size() + 4);
  sroce_icrc_put(f.data() + f.size() - 4, icrc);
  // IPv6 receivers drop zero UDP checksums (RFC 8200 8.1); fill it.
  if (a.v6 && sroce_udp_fill_checksum(f.data() + 14, f.size() - 14) != 0) {
    std::fprintf(stderr, "gen_pcap: sroce_udp_fill_checksum failed\n");
    std::exit(1);
  }
  // The payload form must agree (what a socket receiver computes).
  sroce_icrc_addr ia{};
  if (a.v6) {
    for (int i = 0; i < 16; i++) {
      ia.src_gid[i] = a.src6[i];
      ia.dst_gid[i] = a.dst6[i];
    }
  } else {
    ia.src_gid[10] = ia.src_gid[11] = ia.dst_gid[10] = ia.dst_gid[11] = 0xff;
    sroce_put_be32(ia.src_gid + 12, a.src4);
    sroce_put_be32(ia.dst_gid + 12, a.dst4);
  }
  ia.src_port = a.sport;
  ia.dst_port = SROCE_UDP_PORT;
  if (sroce_icrc_payload(&ia, r.data(), r.size()) != icrc) {
    std::fprintf(stderr, "gen_pcap: sroce_icrc_payload disagrees with sroce_icrc_ip\n");
    std::exit(1);
  }
  return f;
}

void put_le32(FILE* f, uint32_t v) {
  const uint8_t b[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
  std::fwrite(b, 1, 4, f);
}

void put_le16(FILE* f, uint16_t v) {
  const uint8_t b[2] = {(uint8_t)v, (uint8_t)(v >> 8)};
  std::fwrite(b, 1, 2, f);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s OUT.pcap OUT.json\n", argv[0]);
    return 2;
  }
  Addr v4{};
  v4.src4 = 0x0a000001;  // 10.0.0.1
  v4.dst4 = 0x0a000002;
  v4.sport = 0xc123;
  Addr v4back = v4;
  v4back.src4 = v4.dst4;
  v4back.dst4 = v4.src4;
  Addr v6{};
  v6.v6 = true;
  const uint8_t s6[16] = {0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  const uint8_t d6[16] = {0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};
  for (int i = 0; i < 16; i++) {
    v6.src6[i] = s6[i];
    v6.dst6[i] = d6[i];
  }
  v6.sport = 0xd00d;

  std::vector<Frame> frames;
  auto add = [&](const Addr& a, const Bytes& r) {
    Frame fr{frame(a, r), {}};
    // Parse what was built: the JSON expectations come from our parser, and
    // tshark must read the same values from the same bytes.
    const size_t roce_off = 14 + (a.v6 ? 40u : 20u) + 8;
    const sroce_parse_err e =
        sroce_parse(fr.bytes.data() + roce_off, fr.bytes.size() - roce_off, &fr.pkt);
    if (e != SROCE_PARSE_OK) {
      std::fprintf(stderr, "gen_pcap: frame %zu does not parse: %s\n", frames.size() + 1,
                   sroce_parse_err_name(e));
      std::exit(1);
    }
    frames.push_back(fr);
  };

  // RC SEND ONLY, 13 bytes (pad 3).
  add(v4, roce_plain(SROCE_OP_SEND_ONLY, 0x000011, 0x000100, 13));
  // RC RDMA WRITE FIRST with RETH, then MIDDLE and LAST with immediate.
  add(v4, roce(SROCE_OP_WRITE_FIRST, 0x000011, 0x000101, 256, [](uint8_t* p) {
        const sroce_reth r{0x00007f1234560000ull, 0x00c0ffee, 700};
        sroce_reth_write(p, &r);
      }));
  add(v4, roce_plain(SROCE_OP_WRITE_MIDDLE, 0x000011, 0x000102, 256));
  add(v4, roce(SROCE_OP_WRITE_LAST_IMM, 0x000011, 0x000103, 188,
               [](uint8_t* p) { sroce_put_be32(p, 0x12345678); }));
  // ACK with AETH (credit count invalid), coming back.
  add(v4back, roce(SROCE_OP_ACK, 0x000022, 0x000103, 0, [](uint8_t* p) {
        const sroce_aeth a{sroce_aeth_syndrome(SROCE_AETH_ACK, SROCE_AETH_CREDIT_INVALID),
                           0x000002};
        sroce_aeth_write(p, &a);
      }));
  // NAK: PSN sequence error.
  add(v4back, roce(SROCE_OP_ACK, 0x000022, 0x000104, 0, [](uint8_t* p) {
        const sroce_aeth a{sroce_aeth_syndrome(SROCE_AETH_NAK, SROCE_NAK_PSN_SEQ_ERR), 0x000002};
        sroce_aeth_write(p, &a);
      }));
  // ATOMIC CmpSwap with AtomicETH, and its ATOMIC ACK.
  add(v4, roce(SROCE_OP_CMP_SWAP, 0x000011, 0xfffffe, 0, [](uint8_t* p) {
        const sroce_atmeth a{0x00007f0000001000ull, 0x00c0ffee, 0x1111, 0x2222};
        sroce_atmeth_write(p, &a);
      }));
  add(v4back, roce(SROCE_OP_ATOMIC_ACK, 0x000022, 0xfffffe, 0, [](uint8_t* p) {
        const sroce_aeth a{sroce_aeth_syndrome(SROCE_AETH_ACK, SROCE_AETH_CREDIT_INVALID), 3};
        sroce_aeth_write(p, &a);
        sroce_put_be64(p + SROCE_AETH_LEN, 0x2222);
      }));
  // RDMA READ request (PSN wrap) and its only response.
  add(v4, roce(SROCE_OP_READ_REQUEST, 0x000011, 0xffffff, 0, [](uint8_t* p) {
        const sroce_reth r{0x00007f0000002000ull, 0x00c0ffee, 64};
        sroce_reth_write(p, &r);
      }));
  add(v4back, roce(SROCE_OP_READ_RESP_ONLY, 0x000022, 0xffffff, 64, [](uint8_t* p) {
        const sroce_aeth a{sroce_aeth_syndrome(SROCE_AETH_ACK, SROCE_AETH_CREDIT_INVALID), 4};
        sroce_aeth_write(p, &a);
      }));
  // UD SEND ONLY with DETH.
  add(v4, roce((uint8_t)(SROCE_TRANSPORT_UD | (unsigned)SROCE_OP_SEND_ONLY), 0x000033, 0x000007, 50,
               [](uint8_t* p) {
                 const sroce_deth d{0x11111111, 0x000044};
                 sroce_deth_write(p, &d);
               }));
  // SEND ONLY with invalidate (IETH).
  add(v4, roce(SROCE_OP_SEND_ONLY_INV, 0x000011, 0x000108, 8,
               [](uint8_t* p) { sroce_put_be32(p, 0x00abcdef); }));
  // CNP (Annex A17.9.3).
  {
    Bytes c(SROCE_BTH_LEN + SROCE_CNP_RESV_LEN);
    sroce_cnp_write(c.data(), 0x000011, 0xffff);
    add(v4back, c);
  }
  // IPv6: RC SEND ONLY with immediate, and a UD SEND ONLY with immediate.
  add(v6, roce(SROCE_OP_SEND_ONLY_IMM, 0x000055, 0x00abcd, 30,
               [](uint8_t* p) { sroce_put_be32(p, 0xdeadbeef); }));
  add(v6, roce((uint8_t)(SROCE_TRANSPORT_UD | (unsigned)SROCE_OP_SEND_ONLY_IMM), 0x000066, 0x000001,
               5, [](uint8_t* p) {
                 const sroce_deth d{0x80010000, 0x000077};
                 sroce_deth_write(p, &d);
                 sroce_put_be32(p + SROCE_DETH_LEN, 7);
               }));
  // UC RDMA WRITE ONLY over IPv6.
  add(v6, roce((uint8_t)(SROCE_TRANSPORT_UC | (unsigned)SROCE_OP_WRITE_ONLY), 0x000088, 0x000010,
               12, [](uint8_t* p) {
                 const sroce_reth r{0x1000, 0x42, 12};
                 sroce_reth_write(p, &r);
               }));

  FILE* pc = std::fopen(argv[1], "wb");
  if (!pc) {
    std::perror(argv[1]);
    return 1;
  }
  // pcap global header: magic, v2.4, tz 0, sigfigs 0, snaplen, LINKTYPE_ETHERNET.
  put_le32(pc, 0xa1b2c3d4);
  put_le16(pc, 2);
  put_le16(pc, 4);
  put_le32(pc, 0);
  put_le32(pc, 0);
  put_le32(pc, 65535);
  put_le32(pc, 1);
  uint32_t usec = 0;
  for (const Frame& fr : frames) {
    put_le32(pc, 1700000000);
    put_le32(pc, usec += 10);
    put_le32(pc, (uint32_t)fr.bytes.size());
    put_le32(pc, (uint32_t)fr.bytes.size());
    std::fwrite(fr.bytes.data(), 1, fr.bytes.size(), pc);
  }
  if (std::fclose(pc) != 0) {
    std::perror(argv[1]);
    return 1;
  }

  FILE* js = std::fopen(argv[2], "w");
  if (!js) {
    std::perror(argv[2]);
    return 1;
  }
  std::fprintf(js, "[\n");
  for (size_t i = 0; i < frames.size(); i++) {
    const sroce_pkt& k = frames[i].pkt;
    std::fprintf(js, "  {\"opcode\": %u, \"dqpn\": %u, \"psn\": %u, \"fields\": {", k.bth.opcode,
                 k.bth.dqpn, k.bth.psn);
    // tshark field names (tshark -G fields) and the values sroce_parse read.
    std::fprintf(js,
                 "\"infiniband.bth.padcnt\": %u, \"infiniband.bth.p_key\": %u, "
                 "\"infiniband.bth.a\": %u, \"infiniband.bth.m\": %u",
                 k.bth.pad, k.bth.pkey, k.bth.ack_req, k.bth.mig);
    const uint32_t f = k.op->flags;
    if (f & SROCE_HAS_RETH)
      std::fprintf(js,
                   ", \"infiniband.reth.va\": %llu, \"infiniband.reth.r_key\": %u, "
                   "\"infiniband.reth.dmalen\": %u",
                   (unsigned long long)k.reth.va, k.reth.rkey, k.reth.dma_len);
    if (f & SROCE_HAS_AETH)
      std::fprintf(js, ", \"infiniband.aeth.syndrome\": %u, \"infiniband.aeth.msn\": %u",
                   k.aeth.syndrome, k.aeth.msn);
    if (f & SROCE_HAS_ATMETH)
      std::fprintf(js,
                   ", \"infiniband.reth.va\": %llu, \"infiniband.reth.r_key\": %u, "
                   "\"infiniband.atomiceth.swapdt\": %llu, "
                   "\"infiniband.atomiceth.cmpdt\": %llu",
                   (unsigned long long)k.atmeth.va, k.atmeth.rkey,
                   (unsigned long long)k.atmeth.swap_add, (unsigned long long)k.atmeth.compare);
    if (f & SROCE_HAS_ATMACK)
      std::fprintf(js, ", \"infiniband.atomicacketh.origremdt\": %llu",
                   (unsigned long long)k.atmack);
    if (f & SROCE_HAS_IMMDT) std::fprintf(js, ", \"infiniband.immdt\": %u", k.imm);
    if (f & SROCE_HAS_IETH) std::fprintf(js, ", \"infiniband.ieth\": %u", k.ieth_rkey);
    if (f & SROCE_HAS_DETH)
      std::fprintf(js, ", \"infiniband.deth.q_key\": %u, \"infiniband.deth.srcqp\": %u",
                   k.deth.qkey, k.deth.sqpn);
    std::fprintf(js, "}}%s\n", i + 1 < frames.size() ? "," : "");
  }
  std::fprintf(js, "]\n");
  std::fclose(js);
  std::printf("gen_pcap: %zu frames -> %s, %s\n", frames.size(), argv[1], argv[2]);
  return 0;
}
