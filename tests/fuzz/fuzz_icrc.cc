// libFuzzer target: sroce_icrc_ip on arbitrary IP packets (and sroce_icrc_payload,
// sroce_udp_fill_checksum on the same bytes).
// Invariants: when it accepts a packet, the ICRC equals a bit-by-bit CRC-32
// written here over a masked copy made here (IBA Annex A17.3.3); changing a
// masked field does not change it; for packets shaped like the ones sroce
// builds (IPv4 id 0 + DF, no options; IPv6 without extension headers) the
// payload form over the same addressing agrees; filling the UDP checksum
// leaves the ICRC alone; for IPv4 ones with any id, the id-0 ICRC turned into that id's
// (sroce_icrc_set_ip_id, what the UDP datapath does to GSO segments) is the ICRC.
#include <cstdint>
#include <vector>

#include "fuzz_check.h"
#include "proto/icrc.h"
#include "proto/int.h"

namespace {

uint32_t ref_icrc(const uint8_t* ip, size_t len, size_t ip_len) {
  std::vector<uint8_t> m(8, 0xff);
  m.insert(m.end(), ip, ip + len);
  uint8_t* h = m.data() + 8;
  if ((ip[0] >> 4) == 4) {  // by version: an IPv4 header with options can be 40 bytes too
    h[1] = h[8] = h[10] = h[11] = 0xff;
  } else {
    h[0] |= 0x0f;
    h[1] = h[2] = h[3] = h[7] = 0xff;
  }
  h[ip_len + 6] = h[ip_len + 7] = 0xff;
  h[ip_len + 8 + 4] = 0xff;
  uint32_t crc = 0xffffffffu;
  for (uint8_t b : m) {
    crc ^= b;
    for (int i = 0; i < 8; i++) crc = (crc >> 1) ^ ((crc & 1) ? 0xEDB88320u : 0);
  }
  return ~crc;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t len) {
  uint32_t icrc = 0;
  if (sroce_icrc_ip(data, len, &icrc) != 0) return 0;
  const bool v6 = (data[0] >> 4) == 6;
  FUZZ_CHECK(v6 || (data[0] >> 4) == 4);
  const size_t ip_len = v6 ? 40 : (size_t)(data[0] & 0xf) * 4;
  FUZZ_CHECK(len >= ip_len + 8 + 12);
  FUZZ_CHECK(icrc == ref_icrc(data, len, ip_len));

  // Variant fields do not matter.
  std::vector<uint8_t> q(data, data + len);
  if (v6) {
    q[0] ^= 0x0f;
    q[1] ^= 0xff;
    q[3] ^= 0x5a;
    q[7] ^= 0x33;
  } else {
    q[1] ^= 0xff;
    q[8] ^= 0x01;
    q[10] ^= 0x12;
  }
  q[ip_len + 6] ^= 0x80;
  q[ip_len + 8 + 4] ^= 0xc0;
  uint32_t icrc2 = 0;
  FUZZ_CHECK(sroce_icrc_ip(q.data(), q.size(), &icrc2) == 0);
  FUZZ_CHECK(icrc2 == icrc);

  // An invariant field does: the BTH opcode.
  q = std::vector<uint8_t>(data, data + len);
  q[ip_len + 8] ^= 0x01;
  FUZZ_CHECK(sroce_icrc_ip(q.data(), q.size(), &icrc2) == 0 && icrc2 != icrc);

  // The payload form, for headers shaped like sroce's.
  const uint8_t* udp = data + ip_len;
  const size_t roce_len = len - ip_len - 8;
  const uint16_t udp_len = (uint16_t)(8 + roce_len + 4);
  bool shaped;
  sroce_icrc_addr a{};
  if (v6) {
    shaped = sroce_get_be16(data + 4) == udp_len;
    for (int i = 0; i < 16; i++) {
      a.src_gid[i] = data[8 + i];
      a.dst_gid[i] = data[24 + i];
    }
    // An IPv4-mapped pair would be taken for IPv4.
    bool mapped = true;
    for (int i = 0; i < 10; i++) mapped = mapped && a.src_gid[i] == 0 && a.dst_gid[i] == 0;
    mapped = mapped && a.src_gid[10] == 0xff && a.src_gid[11] == 0xff && a.dst_gid[10] == 0xff &&
             a.dst_gid[11] == 0xff;
    shaped = shaped && !mapped;
  } else {
    shaped = ip_len == 20 && sroce_get_be16(data + 2) == 20 + udp_len &&
             sroce_get_be16(data + 4) == 0 && sroce_get_be16(data + 6) == 0x4000;
    a.src_gid[10] = a.src_gid[11] = a.dst_gid[10] = a.dst_gid[11] = 0xff;
    for (int i = 0; i < 4; i++) {
      a.src_gid[12 + i] = data[12 + i];
      a.dst_gid[12 + i] = data[16 + i];
    }
  }
  shaped = shaped && sroce_get_be16(udp + 4) == udp_len;
  a.src_port = sroce_get_be16(udp);
  a.dst_port = sroce_get_be16(udp + 2);
  if (shaped) FUZZ_CHECK(sroce_icrc_payload(&a, udp + 8, roce_len) == icrc);

  // The sender's side of UDP GSO (sroce_icrc_set_ip_id): an IPv4 packet shaped like sroce's
  // but for its id (the kernel's segment number) carries the id-0 ICRC made the one of its id.
  if (!v6 && ip_len == 20 && sroce_get_be16(data + 2) == 20 + udp_len && sroce_get_be16(data + 6) == 0x4000 &&
      sroce_get_be16(udp + 4) == udp_len && !sroce_int_present(udp + 8, roce_len)) {
    static sroce_icrc_id_cache cache{};
    std::vector<uint8_t> seg(udp + 8, udp + 8 + roce_len);
    seg.resize(roce_len + 4);
    sroce_icrc_put(seg.data() + roce_len, sroce_icrc_payload(&a, udp + 8, roce_len));
    FUZZ_CHECK(sroce_icrc_set_ip_id(seg.data(), seg.size(), sroce_get_be16(data + 4), &cache) == 0);
    FUZZ_CHECK(sroce_icrc_get(seg.data() + roce_len) == icrc);
  }

  // Filling the UDP checksum (over packet + ICRC) keeps the ICRC.
  std::vector<uint8_t> full(data, data + len);
  full.resize(len + 4);
  sroce_icrc_put(full.data() + len, icrc);
  if (sroce_udp_fill_checksum(full.data(), full.size()) == 0) {
    FUZZ_CHECK(sroce_icrc_ip(full.data(), len, &icrc2) == 0 && icrc2 == icrc);
  }
  return 0;
}
