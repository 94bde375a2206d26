// Crafted Ethernet frames carrying RoCEv2, for BPF_PROG_TEST_RUN and the live
// tests. IP, UDP, BTH and AETH are written by proto/'s own builders
// (sroce_build_ipv4/ipv6/udp, sroce_bth_write, sroce_aeth_write), so the tc
// programs are checked against the project's one definition of the wire.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace sroce::tmtest {

using Addr = std::array<uint8_t, 16>;

Addr v4(const char* dotted);  // IPv4-mapped ::ffff:a.b.c.d
Addr v6(const char* text);
uint32_t v4_host(const Addr& a);  // the IPv4 address, host order

// One RoCEv2 packet: the UDP payload BTH [+ AETH] + payload + ICRC.
struct Roce {
  uint8_t opcode = 0x04;  // RC SEND_ONLY
  uint32_t dqpn = 0x12;
  uint32_t psn = 0;
  bool ack_req = false;
  uint8_t tver = 0;
  uint8_t syndrome = 0;  // AETH syndrome, written for opcodes that carry an AETH
  size_t payload = 0;    // bytes after the headers, before the ICRC
};

bool has_aeth(uint8_t opcode);
size_t roce_len(const Roce& r);  // UDP payload bytes of the packet
void write_roce(uint8_t* p, const Roce& r);

struct Ipv6Ext {
  uint8_t type;               // 0 hop-by-hop, 43 routing, 44 fragment, 60 dest opts, 51 AH, ...
  std::vector<uint8_t> body;  // the header's bytes; byte 0 (next header) is filled in
};

struct Frame {
  std::vector<uint16_t> vlan_tpids;  // outer first: {0x88a8, 0x8100} is QinQ
  bool ipv6 = false;
  Addr src = v4("10.0.0.1");
  Addr dst = v4("10.0.0.2");
  uint8_t ecn = 0;              // 3 = CE
  uint16_t ipv4_frag = 0x4000;  // the flags+offset field: DF
  uint8_t ip_proto = 17;        // UDP
  std::vector<Ipv6Ext> ipv6_ext;
  uint16_t sport = 50000;
  uint16_t dport = 4791;
};

// A frame with the segments' RoCEv2 packets back to back as the UDP payload
// (one segment: an ordinary datagram; several: the layout of a UDP GSO/GRO
// skb, whose gso_size is roce_len of the first).
std::vector<uint8_t> build(const Frame& f, const std::vector<Roce>& segments);
// Offset of the UDP payload in a frame build() made.
size_t payload_offset(const Frame& f);

}  // namespace sroce::tmtest
