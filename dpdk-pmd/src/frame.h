// Ethernet + IPv4 + UDP framing of RoCEv2 packets for the DPDK datapath.
//
// The kernel does this for the UDP datapath; here the datapath does it
// itself. Nothing RoCE-specific: the engine hands over a finished UDP payload
// (BTH .. ICRC) and its addressing, and gets one back. The IPv4 header is
// the one proto/icrc.h's ICRC rule assumes (IBA Annex A17.3.3 as sroce
// applies it): 20 bytes, identification 0, DF, so the engine's ICRC, computed
// once from the addressing alone, matches the bytes on the wire.
//
// Plain functions on bytes (no DPDK types), so the unit tests run them
// without EAL.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace sroce::dpdk {

inline constexpr size_t kEthHeader = 14;
inline constexpr size_t kIpv4Header = 20;
inline constexpr size_t kUdpHeader = 8;
inline constexpr size_t kFrameHeaders = kEthHeader + kIpv4Header + kUdpHeader;  // 42
inline constexpr uint16_t kEtherTypeIpv4 = 0x0800;

struct MacAddr {
  uint8_t b[6] = {};
  bool operator==(const MacAddr&) const = default;
  uint64_t packed() const;  // 48 bits, b[0] most significant
  static MacAddr unpack(uint64_t v);
};

// Why a received frame was not handed to the engine (counted per reason).
enum class RxVerdict : uint8_t {
  kOk = 0,
  kNotIpv4,      // another EtherType (ARP, IPv6, VLAN-tagged) or IP version
  kIpHeader,     // options (IHL != 5), bad header checksum
  kFragment,     // MF set or a fragment offset: RoCEv2 never fragments (DF)
  kNotRoce,      // not UDP, or another destination port
  kLength,       // IP / UDP lengths disagree with the frame (truncated, corrupt)
  kCount,
};
const char* rx_verdict_name(RxVerdict v);

struct RxFrame {
  uint32_t src = 0, dst = 0;  // host order
  uint16_t sport = 0, dport = 0;
  uint8_t tos = 0;           // DSCP << 2 | ECN (the engine reads CE from it)
  uint16_t ip_id = 0;        // identification: the ICRC covers it (rxe and RNICs send their own)
  uint32_t payload_off = 0;  // UDP payload: BTH .. ICRC
  uint32_t payload_len = 0;
};

// Checks one Ethernet frame and finds its UDP payload. `ip_csum_checked`:
// the PMD verified the IPv4 header checksum already (RTE_MBUF_F_RX_IP_CKSUM_GOOD),
// so it is not recomputed. Ethernet padding after the IP packet is ignored.
RxVerdict parse_frame(std::span<const uint8_t> frame, uint16_t udp_port, bool ip_csum_checked, RxFrame& out);

// IPv4 TTL of every frame: Linux's net.ipv4.ip_default_ttl default, what the
// UDP datapath's sockets use.
inline constexpr uint8_t kHostTtl = 64;

struct TxAddr {
  MacAddr dst_mac, src_mac;
  uint32_t src = 0, dst = 0;  // host order
  uint16_t sport = 0, dport = 0;
  uint8_t tos = 0;
  uint8_t ttl = 64;
};

// Writes the 42 bytes of Ethernet, IPv4 and UDP headers at `p`, for a UDP
// payload of `payload_len` bytes that follows them. The IPv4 checksum is
// computed unless `ip_csum_offload` (the NIC fills it; the field is left 0).
// The UDP checksum is 0: allowed for IPv4 (RFC 768), and what RoCEv2 senders
// use (Annex A17 permits it: the ICRC protects the payload end to end).
void write_headers(uint8_t* p, const TxAddr& a, uint16_t payload_len, bool ip_csum_offload);

// The IPv4 header checksum (RFC 1071) of 20 bytes at `ip`, computed with
// the field as it is: 0 when the header is intact.
uint16_t ipv4_header_checksum(const uint8_t* ip);

// IPv6 (Annex A17.4.5.1: the GRH becomes the IPv6 header). The framing only: the
// datapath does not use it yet (docs/dpdk.md, "IPv6: what is missing").
inline constexpr size_t kIpv6Header = 40;
inline constexpr size_t kFrameHeaders6 = kEthHeader + kIpv6Header + kUdpHeader;  // 62
inline constexpr uint16_t kEtherTypeIpv6 = 0x86dd;

struct RxFrame6 {
  uint8_t src[16] = {}, dst[16] = {};  // network order, as GIDs
  uint16_t sport = 0, dport = 0;
  uint8_t tclass = 0;        // DSCP << 2 | ECN
  uint32_t flow_label = 0;   // 20 bits
  uint8_t hop_limit = 0;
  uint32_t payload_off = 0;  // UDP payload: BTH .. ICRC
  uint32_t payload_len = 0;
};

// Checks one Ethernet frame carrying IPv6/UDP to `udp_port`. Verdicts as parse_frame's, with
// kNotIpv4 meaning "not IPv6" here (another EtherType or IP version) and kNotRoce also for
// an extension header (next header not UDP: RoCEv2 senders use none). The UDP checksum is
// not checked (the ICRC covers the payload; parse_frame says why).
RxVerdict parse_frame6(std::span<const uint8_t> frame, uint16_t udp_port, RxFrame6& out);

struct TxAddr6 {
  MacAddr dst_mac, src_mac;
  uint8_t src[16] = {}, dst[16] = {};
  uint16_t sport = 0, dport = 0;
  uint8_t tclass = 0;
  uint32_t flow_label = 0;
  uint8_t hop_limit = kHostTtl;
};

// Writes the 62 bytes of Ethernet, IPv6 and UDP headers at `p` for the `payload_len` bytes
// (ICRC included) that already follow them, and the UDP checksum over them: over IPv6 it is
// mandatory (RFC 8200 8.1; Linux drops a zero one). It is masked in the ICRC (A17.3.3).
void write_headers6(uint8_t* p, const TxAddr6& a, uint16_t payload_len);

}  // namespace sroce::dpdk
