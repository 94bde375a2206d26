// Two synthetic endpoints on one cable, for link tests.
#pragma once

#include <array>
#include <memory>

#include "sroce/sim/network.h"
#include "sroce/sim/synth.h"

namespace sroce::sim::test {

inline Gid ip(uint32_t n) { return Gid::from_ipv4((10u << 24) | n); }

struct Cable {
  Simulator sim;
  Network net;
  Endpoint* a;
  Endpoint* b;
  Link* ab;
  Link* ba;
  Cable(uint64_t seed, const LinkConfig& ab_cfg, const LinkConfig& ba_cfg = LinkConfig{})
      : sim(seed), net(sim) {
    a = &net.add_endpoint("a", ip(1));
    b = &net.add_endpoint("b", ip(2));
    auto [l1, l2] = net.connect(*a, *b, ab_cfg, ba_cfg);
    ab = l1;
    ba = l2;
    net.compute_routes();
  }
  PacketMeta meta(uint16_t sport = 50000) const {
    PacketMeta m;
    m.src = a->addr();
    m.dst = b->addr();
    m.src_port = sport;
    return m;
  }
  // A well-formed UD SEND of `payload` bytes from a to b, queued now.
  bool send(uint32_t payload, uint32_t psn = 0, uint16_t sport = 50000) {
    std::array<std::byte, 4200> buf;
    const size_t n = make_ud_send(buf, meta(sport), 0x11, psn, payload, static_cast<uint8_t>(psn));
    return a->send(std::span<const std::byte>(buf.data(), n), meta(sport), sim.now());
  }
};

}  // namespace sroce::sim::test
