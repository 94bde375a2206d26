// Helpers shared by the congestion-control unit tests.
#pragma once

#include <span>
#include <vector>

#include "lab_model.h"
#include "sroce/cc/cc.h"

namespace sroce::cc::test {

inline Time at_us(double us) { return Time::zero() + Duration::picos(static_cast<int64_t>(us * 1e6)); }

// 100 Gb/s, T = 10 us, 4 KiB MTU: W_max = one BDP = 125000 bytes.
inline FlowParams flow100g() { return FlowParams{100'000'000'000, Duration::micros(10), 4096}; }

inline IntHop hop(uint32_t port, Time ts, uint64_t tx_bytes, uint32_t qlen,
                  uint64_t bps = 100'000'000'000, bool flag = false) {
  IntHop h;
  h.port_id = port;
  h.ts = ts;
  h.tx_bytes = tx_bytes;
  h.qlen_bytes = qlen;
  h.link_bps = bps;
  h.buffer_flag = flag;
  return h;
}

inline AckEvent ack(Time now, uint64_t bytes, std::span<const IntHop> hops, Duration rtt = {}) {
  AckEvent e;
  e.now = now;
  e.acked_bytes = bytes;
  e.hops = hops;
  e.rtt = rtt;
  return e;
}

// Feeds a one-hop INT stream whose every record covers one base RTT T, so the
// EWMA takes each sample whole (tau / T = 1): U = u exactly. Keeps the hop's
// counters between calls.
struct IntFeed {
  Duration t = Duration::micros(10);
  uint64_t bps = 100'000'000'000;
  uint32_t port = 1;
  Time now = Time::zero();
  uint64_t tx = 0;

  // The next record: the port sent `util` x B over the last T and holds `qlen`.
  IntHop next(double util, uint32_t qlen, bool flag = false) {
    now = now + t;
    tx += static_cast<uint64_t>(util * bytes_in(static_cast<double>(bps), t));
    return hop(port, now, tx, qlen, bps, flag);
  }
};

// One reference-window update of an HPCC-style controller: one new packet
// sent, then its ACK carrying `h`.
template <class Cc>
void one_rtt(Cc& cc, const IntHop& h, uint32_t bytes = 4096) {
  cc.on_send(SendEvent{h.ts, bytes, false});
  cc.on_ack(ack(h.ts, bytes, std::span<const IntHop>(&h, 1)));
}

// Two flows from two hosts into one 100G port (lab model); the second starts
// at `second_start`. Returns the convergence time after its start (every
// 100 us window from then on with Jain >= min_jain and >= 80 % of capacity),
// negative if never.
inline Duration two_flow_convergence(const CcConfig& cc, Time second_start, Time end,
                                     double min_jain = 0.99, lab::LabResult* out = nullptr) {
  lab::LabConfig cfg;
  cfg.cc = cc;
  cfg.hosts = 2;
  cfg.ports = 1;
  cfg.end = end;
  const std::vector<lab::LabFlowSpec> specs = {{0, 0, Time::zero(), 0}, {1, 0, second_start, 0}};
  lab::LabResult r = lab::run_lab(cfg, specs);
  const std::vector<int> ids = {0, 1};
  const double cap = static_cast<double>(cfg.port_rate_bps) * cfg.mtu / (cfg.mtu + cfg.overhead);
  const Duration d = lab::convergence_time(r, cfg, ids, cap, second_start, Duration::micros(100), min_jain, 0.8);
  if (out) *out = std::move(r);
  return d;
}

inline CcConfig with(Algorithm a) {
  CcConfig c;
  c.algorithm = a;
  return c;
}

}  // namespace sroce::cc::test
