// QP1, the General Services Interface of the kernel path (docs/kmod.md,
// "The GSI QP"; IBA 13.5, Annex A17 for RoCEv2).
//
// rdma_sroce.ko keeps QP1 in the kernel (ib_mad, ib_cm and rdma_cm use it)
// and hands each MAD it sends to sroced as a GSI_SEND message; sroced carries
// it as a RoCEv2 UD datagram and gives every UD datagram that arrives for
// QP1 back to the module as a GSI_RECV. This is only that codec and a small
// transmit queue: no engine QP, because QP1 has no memory of its own here
// (the MAD travels inside the channel message), no PSN state worth keeping
// (UD, IBA 9.7.7), and its receive queue is the module's.
//
// Wire (IBA 9.2, 9.3.2; Annex A17.4): BTH opcode UD SEND_ONLY, P_Key as
// given (the default P_Key, IBA 10.9.1.2), DestQP = the remote QPN, then
// DETH with the Q_Key and SrcQP 1, the MAD, the ICRC. The UDP/IP headers
// come from the datapath; the ICRC is over the headers sroce builds
// (proto/icrc.h), as for every packet the engine sends.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "proto/roce.h"
#include "sroce/engine/engine.h"
#include "sroce_abi.h"

namespace sroce::daemon {

inline constexpr uint32_t kGsiQpn = 1;             // IBA 3.5.4: QP1 is the GSI
inline constexpr uint32_t kGsiQkey = 0x80010000u;  // IBA 13.5.3.1: the GSI's well-known Q_Key
inline constexpr size_t kGsiMaxPacket =
    SROCE_BTH_LEN + SROCE_DETH_LEN + SROCE_KGSI_MAX_MAD + SROCE_ICRC_LEN;

// Is this UDP payload addressed to QP1? A look at the BTH's DestQP only
// (the rest is checked by gsi_decode): what the loop asks before handing a
// packet to the engine.
bool gsi_is_qp1(std::span<const std::byte> payload);

// Writes the UD datagram of `h` + `mad` into `out` and fills `meta`.
// `udp_port` is the RoCEv2 port of the datapath (source and destination).
// Returns the length, or 0 when `h` cannot be sent (no MAD, longer than
// SROCE_KGSI_MAX_MAD, `out` too small, a source GID of the other family).
size_t gsi_encode(const sroce_kgsi& h, std::span<const std::byte> mad, uint16_t udp_port,
                  uint32_t psn, std::span<std::byte> out, PacketMeta& meta);

// Why a datagram for QP1 was not turned into a GSI_RECV.
enum class GsiDrop : uint8_t {
  kNone = 0,
  kMalformed,  // the proto parser refused it
  kNotUdSend,  // not UD SEND_ONLY (QP1 takes nothing else, IBA 13.5.1)
  kBadIcrc,
  kTooLong,  // more than a MAD (SROCE_KGSI_MAX_MAD)
};
const char* to_string(GsiDrop d);

// Parses a datagram for QP1 into the GSI_RECV header; `mad` views the MAD
// inside `payload`. The Q_Key is passed on as received: the module checks it
// against its QP's (IBA 10.2.5), as it owns QP1's attributes.
GsiDrop gsi_decode(std::span<const std::byte> payload, const PacketMeta& meta, bool check_icrc,
                   sroce_kgsi& h, std::span<const std::byte>& mad);

// MADs waiting for the datapath: a fixed ring filled when the module's
// GSI_SEND is read and drained by the loop's transmit step. No allocation
// after construction; a full ring drops (UD gives no guarantee, and ib_mad
// retries on its timeouts).
class GsiTxQueue {
 public:
  static constexpr size_t kSlots = 64;

  // Encodes and queues; false if full or not encodable.
  bool push(const sroce_kgsi& h, std::span<const std::byte> mad, uint16_t udp_port);
  // Copies the oldest datagram into `out` (at least kGsiMaxPacket bytes).
  std::optional<TxPacket> pop(std::span<std::byte> out, Time now);
  size_t size() const { return count_; }
  bool empty() const { return count_ == 0; }

 private:
  struct Slot {
    std::array<std::byte, kGsiMaxPacket> buf;
    size_t len = 0;
    PacketMeta meta;
  };
  std::array<Slot, kSlots> slots_{};
  size_t head_ = 0;
  size_t count_ = 0;
  uint32_t psn_ = 0;  // UD PSNs are not checked (IBA 9.7.7) but advance as on any QP
};

}  // namespace sroce::daemon
