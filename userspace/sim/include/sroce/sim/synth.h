// Synthetic RoCEv2 packets for exercising the fabric without an engine: a
// well-formed UD SEND-only (BTH + DETH + payload + ICRC), so captures of
// synthetic traffic decode and check like real ones.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "sroce/engine/engine.h"

namespace sroce::sim {

// Writes the UDP payload into `out`; returns its length (0 if it does not fit).
size_t make_ud_send(std::span<std::byte> out, const PacketMeta& meta, uint32_t dest_qpn,
                    uint32_t psn, uint32_t payload_len, uint8_t fill);

// Recomputes the ICRC of a UDP payload for its addressing and compares it with
// the one it carries (proto/icrc.h). The sim's corruption must make this fail.
bool icrc_ok(std::span<const std::byte> payload, const PacketMeta& meta);

}  // namespace sroce::sim
