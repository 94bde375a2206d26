// Frames as they would be on the wire, and a pcap writer for them.
//
// build_frame() puts Ethernet II + IPv4 (or IPv6) + UDP in front of the RoCEv2
// UDP payload the engine produced, with the proto/ header builders: IPv4
// identification 0 and DF, which is what the engine's ICRC was computed over
// (proto/icrc.h). TTL/hop limit and TOS come from the packet's current
// addressing, so each hop shows its decremented TTL and any ECN mark, both of
// which the ICRC masks (Annex A17.3.3).
//
// The pcap file is the classic format (global header + records, link type 1
// = Ethernet) with nanosecond timestamps (magic 0xa1b23c4d): at 100 Gbit/s
// frames are tens of nanoseconds apart. Time zero is the simulation start.
#pragma once

#include <array>
#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

#include "sroce/sim/network.h"

namespace sroce::sim {

inline constexpr size_t kMaxFrame = kEthHeader + 40 + kUdpHeader + kMaxPacketBytes;  // INT records included

// Returns the frame length written into `out` (>= kMaxFrame bytes), 0 if it
// does not fit.
size_t build_frame(const Packet& p, const std::array<uint8_t, 6>& src_mac,
                   const std::array<uint8_t, 6>& dst_mac, std::span<uint8_t> out);

class PcapWriter final : public FrameTap {
 public:
  static constexpr uint32_t kMagicNanos = 0xa1b23c4d;
  static constexpr uint32_t kLinkTypeEthernet = 1;
  static constexpr uint32_t kSnapLen = 65535;

  // In memory (bytes()), or also streamed to `path` when open() succeeds.
  PcapWriter();
  ~PcapWriter();
  PcapWriter(const PcapWriter&) = delete;
  PcapWriter& operator=(const PcapWriter&) = delete;

  // Streams to a file from now on; false (and errno set) if it cannot be opened.
  bool open(const std::string& path);
  void close();

  // Only frames delivered to hosts/endpoints (one copy of each frame at its
  // destination's edge), instead of every hop.
  void set_edge_only(bool v) { edge_only_ = v; }

  void on_frame(const Link& link, const Packet& pkt, Time now) override;
  // Adds one record with the given bytes (tests, and raw frames).
  void write_record(Time t, std::span<const uint8_t> frame);

  uint64_t frames() const { return frames_; }
  // Everything written so far, when not streaming to a file.
  const std::vector<uint8_t>& bytes() const { return buf_; }

 private:
  void flush();
  std::vector<uint8_t> buf_;
  std::FILE* file_ = nullptr;
  uint64_t frames_ = 0;
  bool edge_only_ = false;
  std::array<uint8_t, kMaxFrame> scratch_{};
};

}  // namespace sroce::sim
