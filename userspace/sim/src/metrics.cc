#include "sroce/sim/metrics.h"

#include <algorithm>
#include <cmath>

namespace sroce::sim {

namespace {
// RoCEv2 over IPv4 around a payload: Ethernet 14 + IPv4 20 + UDP 8 + BTH 12 +
// ICRC 4 + FCS 4 + preamble/SFD and IFG 20 (IBA Annex A17.4; IEEE 802.3).
constexpr uint64_t kPerPacket = kEthHeader + 20 + kUdpHeader + 12 + 4 + kEthFcs + kEthPreambleIfg;
constexpr uint64_t kReth = 16;
constexpr uint64_t kAckWire = kPerPacket + 4;  // + AETH
}  // namespace

Duration ideal_fct(const std::vector<const Link*>& path, uint64_t bytes, uint32_t mtu_payload,
                   uint32_t chunk_bytes) {
  if (path.empty()) return Duration::picos(0);
  const uint64_t mtu = std::max<uint32_t>(mtu_payload, 1);
  const uint64_t chunk = std::max<uint32_t>(chunk_bytes, 1);
  uint64_t wire = 0, last = 0;
  for (uint64_t off = 0; off < std::max<uint64_t>(bytes, 1); off += chunk) {
    const uint64_t len = std::min(chunk, bytes - std::min(bytes, off));
    const uint64_t pkts = std::max<uint64_t>(1, (len + mtu - 1) / mtu);
    wire += len + pkts * kPerPacket + kReth;
    last = (len - (pkts - 1) * mtu) + kPerPacket + (pkts == 1 ? kReth : 0);
  }
  uint64_t rmin = UINT64_MAX;
  for (const Link* l : path) rmin = std::min(rmin, l->config().rate_bps);
  int64_t ps = Link::serialization(wire, rmin).ps - Link::serialization(last, rmin).ps;
  for (const Link* l : path) {
    const uint64_t r = l->config().rate_bps;
    ps += Link::serialization(last, r).ps + 2 * l->config().delay.ps +
          Link::serialization(kAckWire, r).ps;
  }
  return Duration::picos(ps);
}

double percentile(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const auto n = static_cast<double>(v.size());
  size_t rank = static_cast<size_t>(std::ceil(p * n));
  rank = std::clamp<size_t>(rank, 1, v.size());
  return v[rank - 1];
}

Dist summarize(std::vector<double> v) {
  Dist d;
  d.count = v.size();
  if (v.empty()) return d;
  double sum = 0;
  for (double x : v) sum += x;
  d.mean = sum / static_cast<double>(v.size());
  d.p50 = percentile(v, 0.50);
  d.p95 = percentile(v, 0.95);
  d.p99 = percentile(v, 0.99);
  d.max = v.back();
  return d;
}

FctReport fct_report(const std::vector<FlowRecord>& flows, const std::vector<Duration>& ideal) {
  FctReport r;
  r.flows = flows.size();
  struct B {
    const char* name;
    uint64_t max;
  };
  static constexpr B kBuckets[] = {{"<=10KB", 10'000},
                                   {"10KB-100KB", 100'000},
                                   {"100KB-1MB", 1'000'000},
                                   {"1MB-10MB", 10'000'000},
                                   {">10MB", UINT64_MAX}};
  std::vector<double> sd, fct;
  std::vector<std::vector<double>> bsd(std::size(kBuckets)), bfct(std::size(kBuckets));
  for (size_t i = 0; i < flows.size(); ++i) {
    const FlowRecord& f = flows[i];
    if (!f.done()) continue;
    ++r.completed;
    const double us = static_cast<double>((f.end - f.spec.start).ps) * 1e-6;
    const double id = i < ideal.size() ? static_cast<double>(ideal[i].ps) * 1e-6 : 0;
    const double s = id > 0 ? us / id : 0;
    sd.push_back(s);
    fct.push_back(us);
    size_t b = 0;
    while (f.spec.bytes > kBuckets[b].max) ++b;
    bsd[b].push_back(s);
    bfct[b].push_back(us);
  }
  r.slowdown = summarize(std::move(sd));
  r.fct_us = summarize(std::move(fct));
  for (size_t b = 0; b < std::size(kBuckets); ++b)
    r.buckets.push_back({kBuckets[b].name, kBuckets[b].max, summarize(std::move(bsd[b])),
                         summarize(std::move(bfct[b]))});
  return r;
}

}  // namespace sroce::sim
