// The one congestion-control interface of sroce.
//
// A CongestionControl is one flow's controller (one per RC QP, or per lane
// where lanes exist). It is a std::variant of the concrete algorithms: each
// event is one switch on the alternative, then a direct (inlinable) call; no
// virtual call per packet, no allocation, per-flow state of a few hundred
// bytes. Every algorithm class has the same members, so code that knows its
// algorithm at compile time can also use the class directly.
//
// Inputs (all carry explicit time; nothing reads a clock):
//   on_send(SendEvent)   a packet of the flow went on the wire
//   on_ack(AckEvent)     acked bytes, RTT sample, ECN echo, INT records
//   on_cnp(now)          a CNP arrived for the flow (DCQCN)
//   on_loss(LossEvent)   NAK gap, trim, or timeout
//   on_timer(now)        call when now >= next_timer()
//   on_idle(now)         the flow has nothing left to send (frees NIC-level share)
// Outputs (queries, valid after any input):
//   rate_bps()           pacing rate, bit/s (> 0)
//   window_bytes()       bytes in flight allowed (kNoWindow = no limit)
//   next_timer()         Time::never() when no timer is armed
// docs/cc/README.md, "Integration", says which component calls which.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>
#include <variant>

#include "sroce/cc/dcqcn.h"
#include "sroce/cc/hpcc.h"
#include "sroce/cc/ltp.h"
#include "sroce/cc/nic.h"
#include "sroce/cc/odin.h"
#include "sroce/cc/pacer.h"
#include "sroce/cc/swift.h"
#include "sroce/cc/types.h"

namespace sroce::cc {

enum class Algorithm : uint8_t { kDcqcn, kHpcc, kOdin, kDelay, kLtp };

// "dcqcn", "hpcc", "odin", "delay", "ltp": the names the experiments' JSON uses.
const char* to_string(Algorithm a);
std::optional<Algorithm> parse_algorithm(std::string_view name);

// Everything needed to build any algorithm; only the chosen one's part is read.
struct CcConfig {
  Algorithm algorithm = Algorithm::kHpcc;
  DcqcnConfig dcqcn;
  HpccConfig hpcc;
  OdinConfig odin;
  SwiftConfig delay;
  LtpConfig ltp;  // its fallback is `ltp.fallback` (the daemon copies `delay` into it)
};

class CongestionControl {
 public:
  // `nic` is the NIC-level state of the host (may be null; Odin's ratio is
  // then off). It must outlive the controller.
  CongestionControl(const CcConfig& cfg, const FlowParams& flow, NicState* nic);

  void on_send(const SendEvent& ev) { std::visit([&](auto& a) { a.on_send(ev); }, impl_); }
  void on_ack(const AckEvent& ev) { std::visit([&](auto& a) { a.on_ack(ev); }, impl_); }
  void on_cnp(Time now) { std::visit([&](auto& a) { a.on_cnp(now); }, impl_); }
  void on_loss(const LossEvent& ev) { std::visit([&](auto& a) { a.on_loss(ev); }, impl_); }
  void on_timer(Time now) { std::visit([&](auto& a) { a.on_timer(now); }, impl_); }
  void on_idle(Time now) { std::visit([&](auto& a) { a.on_idle(now); }, impl_); }

  uint64_t rate_bps() const { return std::visit([](const auto& a) { return a.rate_bps(); }, impl_); }
  uint64_t window_bytes() const { return std::visit([](const auto& a) { return a.window_bytes(); }, impl_); }
  Time next_timer() const { return std::visit([](const auto& a) { return a.next_timer(); }, impl_); }

  Algorithm algorithm() const { return static_cast<Algorithm>(impl_.index()); }

  // The concrete controller, or null if it is another algorithm.
  template <class T>
  T* get() { return std::get_if<T>(&impl_); }
  template <class T>
  const T* get() const { return std::get_if<T>(&impl_); }

 private:
  using Impl = std::variant<Dcqcn, Hpcc, Odin, Swift, Ltp>;  // order = Algorithm
  static Impl make(const CcConfig& cfg, const FlowParams& flow, NicState* nic);

  Impl impl_;
};

}  // namespace sroce::cc
