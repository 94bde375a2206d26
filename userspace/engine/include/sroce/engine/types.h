// Strong types shared by the engine, its drivers and the tools.
//
// Time is an argument of every engine entry point; the engine never reads a
// clock. It is counted in integer picoseconds so that the simulator (which owns
// time) and the real datapaths (which read a clock once per loop pass) agree
// exactly. 2^63 ps is about 106 days of simulated or wall time.
#pragma once

#include <compare>
#include <cstdint>

namespace sroce {

struct Duration {
  int64_t ps = 0;

  static constexpr Duration picos(int64_t v) { return {v}; }
  static constexpr Duration nanos(int64_t v) { return {v * 1000}; }
  static constexpr Duration micros(int64_t v) { return {v * 1000 * 1000}; }
  static constexpr Duration millis(int64_t v) { return {v * 1000 * 1000 * 1000}; }

  constexpr Duration operator+(Duration o) const { return {ps + o.ps}; }
  constexpr Duration operator-(Duration o) const { return {ps - o.ps}; }
  constexpr Duration operator*(int64_t k) const { return {ps * k}; }
  constexpr auto operator<=>(const Duration&) const = default;
};

struct Time {
  int64_t ps = 0;

  static constexpr Time never() { return {INT64_MAX}; }
  static constexpr Time zero() { return {0}; }

  constexpr Time operator+(Duration d) const { return {ps + d.ps}; }
  constexpr Time operator-(Duration d) const { return {ps - d.ps}; }
  constexpr Duration operator-(Time o) const { return {ps - o.ps}; }
  constexpr Time& operator+=(Duration d) {
    ps += d.ps;
    return *this;
  }
  constexpr auto operator<=>(const Time&) const = default;
};

// A 128-bit RoCE GID. IPv4 addresses are carried as IPv4-mapped IPv6
// (::ffff:a.b.c.d), as RoCEv2 and libibverbs do.
struct Gid {
  uint8_t raw[16] = {};

  static constexpr Gid from_ipv4(uint32_t host_order_addr) {
    Gid g;
    g.raw[10] = 0xff;
    g.raw[11] = 0xff;
    g.raw[12] = static_cast<uint8_t>(host_order_addr >> 24);
    g.raw[13] = static_cast<uint8_t>(host_order_addr >> 16);
    g.raw[14] = static_cast<uint8_t>(host_order_addr >> 8);
    g.raw[15] = static_cast<uint8_t>(host_order_addr);
    return g;
  }
  constexpr bool is_ipv4() const {
    for (int i = 0; i < 10; ++i)
      if (raw[i] != 0) return false;
    return raw[10] == 0xff && raw[11] == 0xff;
  }
  constexpr uint32_t ipv4() const {
    return (uint32_t{raw[12]} << 24) | (uint32_t{raw[13]} << 16) | (uint32_t{raw[14]} << 8) |
           uint32_t{raw[15]};
  }
  constexpr bool operator==(const Gid&) const = default;
};

}  // namespace sroce
