#include "sroce/sim/pcap.h"

#include <cstring>

#include "proto/icrc.h"

namespace sroce::sim {

namespace {
void put_le32(std::vector<uint8_t>& b, uint32_t v) {
  for (int i = 0; i < 4; ++i) b.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
void put_le16(std::vector<uint8_t>& b, uint16_t v) {
  b.push_back(static_cast<uint8_t>(v));
  b.push_back(static_cast<uint8_t>(v >> 8));
}
}  // namespace

size_t build_frame(const Packet& p, const std::array<uint8_t, 6>& src_mac,
                   const std::array<uint8_t, 6>& dst_mac, std::span<uint8_t> out) {
  const bool v4 = p.meta.src.is_ipv4() && p.meta.dst.is_ipv4();
  const size_t ip_len = v4 ? 20 : 40;
  const size_t total = kEthHeader + ip_len + kUdpHeader + p.len;
  if (out.size() < total) return 0;
  uint8_t* f = out.data();
  std::memcpy(f, dst_mac.data(), 6);
  std::memcpy(f + 6, src_mac.data(), 6);
  sroce_put_be16(f + 12, v4 ? 0x0800 : 0x86dd);
  uint8_t* ip = f + kEthHeader;
  const auto udp_len = static_cast<uint16_t>(kUdpHeader + p.len);
  if (v4) {
    sroce_build_ipv4(ip, p.meta.src.ipv4(), p.meta.dst.ipv4(), p.meta.traffic_class,
                     p.meta.hop_limit, udp_len);
  } else {
    sroce_build_ipv6(ip, p.meta.src.raw, p.meta.dst.raw, p.meta.traffic_class, p.meta.flow_label,
                     p.meta.hop_limit, udp_len);
  }
  sroce_build_udp(ip + ip_len, p.meta.src_port, p.meta.dst_port, udp_len);
  // A payload the run does not carry (packet.h) is written as zeros.
  auto* udp_payload = reinterpret_cast<std::byte*>(ip + ip_len + kUdpHeader);
  std::memcpy(udp_payload, p.data(), p.head);
  if (!p.carried()) {
    const uint32_t gap_end = p.len - p.tail;
    std::memset(udp_payload + p.head, 0, gap_end - p.head);
    std::memcpy(udp_payload + gap_end, p.tail_bytes.data(), p.tail);
  }
  return total;
}

PcapWriter::PcapWriter() {
  // Global header (pcap-savefile(5)): magic, version 2.4, thiszone, sigfigs,
  // snaplen, network. Written in our (little-endian) byte order; readers
  // detect the order from the magic.
  put_le32(buf_, kMagicNanos);
  put_le16(buf_, 2);
  put_le16(buf_, 4);
  put_le32(buf_, 0);
  put_le32(buf_, 0);
  put_le32(buf_, kSnapLen);
  put_le32(buf_, kLinkTypeEthernet);
}

PcapWriter::~PcapWriter() { close(); }

bool PcapWriter::open(const std::string& path) {
  close();
  file_ = std::fopen(path.c_str(), "wb");
  if (file_ == nullptr) return false;
  flush();
  return true;
}

void PcapWriter::close() {
  if (file_ == nullptr) return;
  flush();
  std::fclose(file_);
  file_ = nullptr;
}

void PcapWriter::flush() {
  if (file_ == nullptr || buf_.empty()) return;
  std::fwrite(buf_.data(), 1, buf_.size(), file_);
  buf_.clear();
}

void PcapWriter::write_record(Time t, std::span<const uint8_t> frame) {
  const int64_t ps = t.ps < 0 ? 0 : t.ps;
  const auto sec = static_cast<uint32_t>(ps / 1'000'000'000'000);
  const auto nsec = static_cast<uint32_t>(ps % 1'000'000'000'000 / 1000);
  const auto caplen = static_cast<uint32_t>(std::min<size_t>(frame.size(), kSnapLen));
  put_le32(buf_, sec);
  put_le32(buf_, nsec);
  put_le32(buf_, caplen);
  put_le32(buf_, static_cast<uint32_t>(frame.size()));
  buf_.insert(buf_.end(), frame.begin(), frame.begin() + caplen);
  ++frames_;
  if (file_ != nullptr && buf_.size() >= (1u << 20)) flush();
}

void PcapWriter::on_frame(const Link& link, const Packet& pkt, Time now) {
  if (edge_only_ && !link.to().addressable()) return;
  const size_t n = build_frame(pkt, link.from().mac(), link.to().mac(), scratch_);
  if (n == 0) return;
  write_record(now, std::span<const uint8_t>(scratch_.data(), n));
}

}  // namespace sroce::sim
