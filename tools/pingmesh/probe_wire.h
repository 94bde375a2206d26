// The payload of pingmesh's UD datagrams (docs/pingmesh.md). A probe, the responder's first
// ACK (sent at once on receive) and its second ACK (carrying T3 and T4, known only after the
// first ACK's send completed), as in R-Pingmesh (SIGCOMM 2024). Fixed-width fields, little
// endian on the wire (put/get below), so a prober and a responder of any build agree.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace sroce::pingmesh {

inline constexpr uint32_t kProbeMagic = 0x4d505253;  // "SRPM"
inline constexpr uint8_t kProbeVersion = 1;
inline constexpr uint32_t kProbeQkey = 0x50494e47;  // "PING": every agent's UD Q_Key
inline constexpr size_t kProbeLen = 48;              // bytes of payload (no GRH)
inline constexpr size_t kGrhLen = 40;                // a UD receive's first 40 bytes (IBA 11.4.1.1)

enum class MsgType : uint8_t { kProbe = 1, kAck1 = 2, kAck2 = 3 };

struct ProbeMsg {
  MsgType type = MsgType::kProbe;
  uint32_t reply_label = 0;  // the flow label the ACKs are to use (hence their UDP source port)
  uint64_t seq = 0;          // the prober's sequence number: matches ACKs to their probe
  uint64_t t3 = 0;           // ACK2: responder's receive completion time of the probe (ns)
  uint64_t t4 = 0;           // ACK2: responder's send completion time of ACK1 (ns)
  uint64_t sent_wall = 0;    // probe: prober's CLOCK_REALTIME at post (for the record only)
};

namespace wire_detail {
inline void put32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
inline void put64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
inline uint32_t get32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
inline uint64_t get64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
}  // namespace wire_detail

// Layout: magic(4) version(1) type(1) pad(2) reply_label(4) pad(4) seq(8) t3(8) t4(8) wall(8).
inline void encode(const ProbeMsg& m, uint8_t* out) {
  using namespace wire_detail;
  std::memset(out, 0, kProbeLen);
  put32(out, kProbeMagic);
  out[4] = kProbeVersion;
  out[5] = static_cast<uint8_t>(m.type);
  put32(out + 8, m.reply_label);
  put64(out + 16, m.seq);
  put64(out + 24, m.t3);
  put64(out + 32, m.t4);
  put64(out + 40, m.sent_wall);
}

// False for anything that is not a pingmesh message of our version (counted, then dropped).
inline bool decode(const uint8_t* in, size_t len, ProbeMsg& m) {
  using namespace wire_detail;
  if (len < kProbeLen || get32(in) != kProbeMagic || in[4] != kProbeVersion) return false;
  if (in[5] < 1 || in[5] > 3) return false;
  m.type = static_cast<MsgType>(in[5]);
  m.reply_label = get32(in + 8) & 0xfffff;
  m.seq = get64(in + 16);
  m.t3 = get64(in + 24);
  m.t4 = get64(in + 32);
  m.sent_wall = get64(in + 40);
  return true;
}

// The flow label whose RoCEv2 UDP source port is `sport` (0xC001..0xFFFF): the inverse of
// Linux's rdma_flow_label_to_udp_sport for labels below 2^14. 0 for a port outside that range.
inline uint32_t label_for_sport(uint16_t sport) {
  if (sport <= 0xc000) return 0;
  return sport & 0x3fff;
}
inline uint16_t sport_for_label(uint32_t label) {
  const uint32_t low = (label & 0x3fff) ^ ((label & 0xfc000) >> 14);
  return static_cast<uint16_t>(0xc000 | low);
}

}  // namespace sroce::pingmesh
