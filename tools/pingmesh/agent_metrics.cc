#include "agent_metrics.h"

#include <algorithm>
#include <cstdio>
#include <vector>

#include <fmt/format.h>

namespace sroce::pingmesh {

namespace {

double median_s(const std::array<int64_t, TargetStats::kRing>& a, size_t n) {
  const size_t m = std::min(n, TargetStats::kRing);
  if (m == 0) return 0;
  std::vector<int64_t> v(a.begin(), a.begin() + static_cast<std::ptrdiff_t>(m));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(m / 2), v.end());
  return static_cast<double>(v[m / 2]) / 1e9;
}

}  // namespace

void Metrics::write(const std::string& path, const std::string& host, const std::string& addr) const {
  std::string s;
  const std::string me = fmt::format("host=\"{}\",src=\"{}\"", host, addr);
  s += "# HELP sroce_pingmesh_probes_total Probes sent by this agent, by target and outcome.\n"
       "# TYPE sroce_pingmesh_probes_total counter\n";
  for (const auto& [name, t] : targets) {
    const std::string l = fmt::format("{},dst=\"{}\",kind=\"{}\"", me, name, t.kind);
    s += fmt::format("sroce_pingmesh_probes_total{{{},result=\"sent\"}} {}\n", l, t.sent);
    s += fmt::format("sroce_pingmesh_probes_total{{{},result=\"ok\"}} {}\n", l, t.ok);
    s += fmt::format("sroce_pingmesh_probes_total{{{},result=\"timeout\"}} {}\n", l, t.timeout);
    s += fmt::format("sroce_pingmesh_probes_total{{{},result=\"ack2_lost\"}} {}\n", l, t.ack2_lost);
    s += fmt::format("sroce_pingmesh_probes_total{{{},result=\"no_peer\"}} {}\n", l, t.no_peer);
  }
  s += "# HELP sroce_pingmesh_delay_seconds Median over the last 64 answered probes: network RTT "
       "(T5-T2)-(T4-T3), responder delay T4-T3, prober delay (T6-T1)-(T5-T2).\n"
       "# TYPE sroce_pingmesh_delay_seconds gauge\n";
  for (const auto& [name, t] : targets) {
    if (t.n == 0) continue;
    const std::string l = fmt::format("{},dst=\"{}\",kind=\"{}\"", me, name, t.kind);
    s += fmt::format("sroce_pingmesh_delay_seconds{{{},part=\"network\"}} {:.9f}\n", l, median_s(t.rtt, t.n));
    s += fmt::format("sroce_pingmesh_delay_seconds{{{},part=\"responder\"}} {:.9f}\n", l, median_s(t.resp, t.n));
    s += fmt::format("sroce_pingmesh_delay_seconds{{{},part=\"prober\"}} {:.9f}\n", l, median_s(t.prober, t.n));
  }
  const std::pair<const char*, uint64_t> counters[] = {
      {"answered", answered},       {"bad_packets", bad_packets},
      {"late_acks", late_acks},     {"responder_busy", resp_busy},
      {"slot_busy", slot_busy},     {"send_errors", send_errors},
      {"trace_sent", trace_sent},   {"trace_answered", trace_answered},
      {"trace_lost", trace_lost},   {"peer_restarts", peer_restarts}};
  s += "# HELP sroce_pingmesh_agent_events_total The agent's own events: probes answered as a "
       "responder, malformed or late datagrams, busy slots, send errors, TTL-limited traces.\n"
       "# TYPE sroce_pingmesh_agent_events_total counter\n";
  for (const auto& [n, v] : counters)
    s += fmt::format("sroce_pingmesh_agent_events_total{{{},event=\"{}\"}} {}\n", me, n, v);
  const std::string tmp = path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "w");
  if (!f) return;
  std::fputs(s.c_str(), f);
  std::fclose(f);
  std::rename(tmp.c_str(), path.c_str());
}

}  // namespace sroce::pingmesh
