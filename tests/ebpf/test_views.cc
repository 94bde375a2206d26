// The user-space views of the telemetry (grouping, ranking, rates, RTT
// quantiles, JSON, Prometheus text, the top frame) on synthetic snapshots:
// no kernel needed.
#include <catch2/catch.hpp>

#include "frames.h"
#include "prom_text.h"
#include "prometheus.h"
#include "top_view.h"

using namespace sroce::telemetry;
using sroce::tmtest::parse_prometheus;
using sroce::tmtest::prometheus_convention_problems;

namespace {

PathRow row(Dir d, const char* local, const char* peer, uint16_t sport, uint32_t qp,
            uint64_t packets, uint64_t retx) {
  PathRow r;
  r.dir = d;
  r.local = sroce::tmtest::v4(local);
  r.peer = sroce::tmtest::v4(peer);
  r.sport = sport;
  r.dqpn = qp;
  r.c.packets = packets;
  r.c.bytes = packets * 100;
  r.c.retx = retx;
  r.last_ns = 1000;
  return r;
}

Snapshot sample() {
  Snapshot s;
  s.max_paths = 64;
  s.max_pending = 64;
  s.taken_ns = 2000;
  s.paths = {row(Dir::kEgress, "10.0.0.1", "10.0.0.2", 1000, 5, 100, 0),
             row(Dir::kEgress, "10.0.0.1", "10.0.0.2", 1000, 6, 50, 10),
             row(Dir::kEgress, "10.0.0.1", "10.0.0.2", 1001, 5, 10, 0),
             row(Dir::kEgress, "10.0.0.1", "10.0.0.3", 1000, 5, 7, 7),
             row(Dir::kIngress, "10.0.0.1", "10.0.0.2", 2000, 9, 40, 0)};
  s.paths[0].c.rtt_hist[10] = 3;  // 3 samples in [1024, 2048) ns
  s.paths[0].c.rtt_hist[20] = 1;
  s.paths[0].c.rtt_sum_ns = 3 * 1500 + (1u << 20);
  s.paths[1].c.nak[SROCE_TM_NAK_PSN_SEQ] = 2;
  s.stats[SROCE_TM_STAT_PATH_INSERT] = 8;
  return s;
}

}  // namespace

TEST_CASE("views: grouping by peer, lane and path") {
  const Snapshot s = sample();
  auto peers = group(s.paths, GroupBy::kPeer);
  REQUIRE(peers.size() == 3);  // egress to .2, egress to .3, ingress from .2
  auto lanes = group(s.paths, GroupBy::kLane);
  REQUIRE(lanes.size() == 4);
  auto paths = group(s.paths, GroupBy::kPath);
  REQUIRE(paths.size() == 5);
  const auto it = std::find_if(peers.begin(), peers.end(), [](const PathRow& r) {
    return r.dir == Dir::kEgress && format_addr(r.peer) == "10.0.0.2";
  });
  REQUIRE(it != peers.end());
  CHECK(it->c.packets == 160);
  CHECK(it->c.retx == 10);
  CHECK(it->paths == 3);
  CHECK(it->sport == 0);
  CHECK(it->c.rtt_samples() == 4);
  CHECK(s.evicted() == 3);
}

TEST_CASE("views: ranking puts the lossiest first") {
  auto lanes = group(sample().paths, GroupBy::kLane);
  rank(lanes);
  CHECK(format_addr(lanes[0].peer) == "10.0.0.3");  // 7 of 7 retransmitted
  CHECK(lanes[1].sport == 1000);                    // 10 of 150
  CHECK(lanes[1].c.retx == 10);
}

TEST_CASE("views: RTT quantiles come from inside the log2 buckets") {
  Counters c;
  c.rtt_hist[10] = 99;
  c.rtt_hist[20] = 1;
  CHECK(c.rtt_quantile_ns(0.5) >= 1024);
  CHECK(c.rtt_quantile_ns(0.5) < 2048);
  CHECK(c.rtt_quantile_ns(0.995) >= 1 << 20);
  CHECK(c.rtt_quantile_ns(1.0) <= 1 << 21);
  CHECK(Counters{}.rtt_quantile_ns(0.5) == 0);
}

TEST_CASE("views: rates between two snapshots") {
  Snapshot a = sample(), b = sample();
  b.paths[0].c.packets += 500;
  b.paths[0].c.bytes += 50000;
  auto now = group(b.paths, GroupBy::kPath), before = group(a.paths, GroupBy::kPath);
  auto r = rates(now, before, GroupBy::kPath, 0.5);
  double pps = 0;
  for (const Rate& x : r) pps += x.pps;
  CHECK(pps == Approx(1000));
}

TEST_CASE("views: addresses and JSON") {
  CHECK(format_addr(sroce::tmtest::v4("192.0.2.7")) == "192.0.2.7");
  CHECK(format_addr(sroce::tmtest::v6("fd00::1:2")) == "fd00::1:2");
  const auto j = paths_json(sample());
  REQUIRE(j.is_array());
  REQUIRE(j.size() == 5);
  for (const char* k : {"dir", "local", "peer", "sport", "dqpn", "packets", "bytes", "ce", "retx",
                        "ooo", "rtt_hist", "nak", "cnp"}) {
    INFO(k);
    CHECK(j[0].contains(k));
  }
  CHECK(j[0]["rtt_hist"].size() == SROCE_TM_RTT_BUCKETS);
}

TEST_CASE("views: live paths are those seen within the window") {
  Snapshot s = sample();
  s.paths[0].last_ns = 1900;
  CHECK(live_paths(s, 150).size() == 1);
  CHECK(live_paths(s, 1000).size() == 5);
}

TEST_CASE("prometheus: valid text, conventions, bounded cardinality") {
  const Snapshot s = sample();
  PromOptions o;
  o.max_paths = 2;
  o.max_peers = 2;
  const std::string text = render_prometheus(s, o);
  auto d = parse_prometheus(text);
  INFO(text);
  REQUIRE(d.ok());
  CHECK(prometheus_convention_problems(*d).empty());
  // Two paths exported, three omitted; two peers plus one folded "other" row.
  CHECK(d->all("sroce_path_packets_total").size() == 2);
  CHECK(d->find("sroce_telemetry_series_omitted", {{"level", "path"}})->value == 3);
  CHECK(d->all("sroce_wire_packets_total").size() == 3);
  CHECK(d->find("sroce_telemetry_series_omitted", {{"level", "peer"}})->value == 1);
  // Values survive: the worst peer (10.0.0.3) and the RTT histogram.
  CHECK(d->find("sroce_wire_retransmissions_total",
                {{"dir", "egress"}, {"local", "10.0.0.1"}, {"peer", "10.0.0.3"}})
            ->value == 7);
  const auto* cnt = d->find("sroce_wire_rtt_seconds_count",
                            {{"dir", "egress"}, {"local", "10.0.0.1"}, {"peer", "10.0.0.2"}});
  REQUIRE(cnt);
  CHECK(cnt->value == 4);
  CHECK(d->find("sroce_telemetry_path_evictions_total", {})->value == 3);
}

TEST_CASE("prometheus: label values are escaped") {
  CHECK(prom_escape("a\"b\\c\nd") == "a\\\"b\\\\c\\nd");
}

TEST_CASE("top: one frame has peers and lanes, worst first") {
  const Snapshot s = sample();
  TopOptions o;
  const std::string f = render_top(s, &s, 1.0, o);
  INFO(f);
  const auto peers = f.find("PEERS"), lanes = f.find("LANES");
  REQUIRE(peers != std::string::npos);
  REQUIRE(lanes != std::string::npos);
  CHECK(peers < lanes);
  // The first data row of each section is the 10.0.0.3 peer (100% loss).
  const auto first_row = f.find('\n', f.find("DIR", peers)) + 1;
  CHECK(f.compare(first_row, 6, "egress") == 0);
  CHECK(f.find("10.0.0.3", first_row) < f.find('\n', first_row));
  CHECK(human(1234567) == "1.23M");
  CHECK(human(42) == "42");
}

namespace {

// One SROCE_OP_STATS object as sroced sends it (the keys render_top_daemon reads).
nlohmann::json daemon_stats(uint64_t scale) {
  using J = nlohmann::json;
  J qps = J::array();
  qps.push_back({{"qpn", 17}, {"type", "RC"}, {"state", "RTS"}, {"pid", 42}, {"dest_qpn", 99},
                 {"tx_packets", 100 * scale}, {"rx_packets", 90 * scale}, {"retransmits", 0},
                 {"timeouts", 0}, {"naks_received", 0}, {"naks_sent", 0}, {"duplicates", 0}});
  qps.push_back({{"qpn", 18}, {"type", "RC"}, {"state", "RTS"}, {"pid", 42}, {"dest_qpn", 98},
                 {"tx_packets", 10 * scale}, {"rx_packets", 9 * scale}, {"retransmits", 5 * scale},
                 {"timeouts", 1}, {"naks_received", 2}, {"naks_sent", 0}, {"duplicates", 0}});
  J lanes = J::array();
  lanes.push_back({{"sport", 1000}, {"local", "10.0.0.1"}, {"tx_packets", 150 * scale},
                   {"tx_bytes", 15000 * scale}, {"tx_sends", 10}});
  lanes.push_back({{"sport", 1234}, {"local", "10.0.0.1"}, {"tx_packets", 3 * scale},
                   {"tx_bytes", 300 * scale}, {"tx_sends", 3}});
  return {{"qps", qps}, {"lanes", lanes}};
}

// The line of `f` after `from` that starts with `first` (its first column).
std::string line_of(const std::string& f, size_t from, const std::string& first) {
  size_t p = from;
  while ((p = f.find('\n', p)) != std::string::npos) {
    ++p;
    if (f.compare(p, first.size(), first) == 0) return f.substr(p, f.find('\n', p) - p);
  }
  return {};
}

}  // namespace

TEST_CASE("top: sroced's QPs worst first, its lanes beside the wire's") {
  const Snapshot wire = sample();
  const auto before = daemon_stats(1), now = daemon_stats(3);
  const std::string f = render_top_daemon(now, &before, 2.0, &wire, 20);
  INFO(f);
  const auto qps = f.find("SROCED QPS"), lanes = f.find("SROCED LANES");
  REQUIRE(qps != std::string::npos);
  REQUIRE(lanes != std::string::npos);
  // QP 18 retransmits: it comes first.
  const auto first_row = f.find('\n', f.find("QPN", qps)) + 1;
  CHECK(f.compare(first_row, 2, "18") == 0);
  // QP 17: (300 - 100) / 2 s = 100 packets/s sent.
  const std::string q17 = line_of(f, qps, "17");
  REQUIRE(!q17.empty());
  CHECK(q17.find(" 100 ") != std::string::npos);
  // Lane 1000: sroced sent 450; the wire's egress on source port 1000 is
  // 100 + 50 + 7 packets, 17 of them retransmitted (10.8 %).
  const std::string l1000 = line_of(f, lanes, "1000");
  REQUIRE(!l1000.empty());
  CHECK(l1000.find(" 450 ") != std::string::npos);
  CHECK(l1000.find(" 157 ") != std::string::npos);
  CHECK(l1000.find(" 17 ") != std::string::npos);
  CHECK(l1000.find("10.83") != std::string::npos);
  // Lane 1234 never crossed the wire's programs: dashes there.
  const std::string l1234 = line_of(f, lanes, "1234");
  REQUIRE(!l1234.empty());
  CHECK(l1234.find(" - ") != std::string::npos);
  // Without telemetry, the lanes section says so; without a previous frame, no rates.
  const std::string g = render_top_daemon(now, nullptr, 0, nullptr, 20);
  CHECK(g.find("no telemetry attached") != std::string::npos);
  CHECK(line_of(g, g.find("SROCED QPS"), "17").find(" - ") != std::string::npos);
}
