// The transport's side of `sroce top`: sroced's own per-QP and per-lane
// counters (SROCE_OP_STATS), with the wire's view of the same lanes from the
// telemetry maps beside them. A lane is a UDP source port: the daemon knows
// what it sent on it, the tc program knows what crossed the interface on it,
// how much of that was retransmitted, marked or reordered, and its RTT.
#include <algorithm>
#include <cstdio>
#include <map>
#include <tuple>
#include <vector>

#include "top_view.h"

namespace sroce::telemetry {

namespace {

using Json = nlohmann::json;

uint64_t num(const Json& j, const char* k) {
  auto it = j.find(k);
  if (it == j.end() || !it->is_number()) return 0;
  if (it->is_number_integer() && it->get<int64_t>() < 0) return 0;
  return it->get<uint64_t>();
}

std::string str(const Json& j, const char* k) {
  auto it = j.find(k);
  if (it == j.end()) return "-";
  return it->is_string() ? it->get<std::string>() : it->dump();
}

// Per-second rate of counter k between two objects of the same key (0 when
// there is no earlier object or the counter went backwards: a new QP number).
double rate(const Json& now, const Json* before, const char* k, double seconds) {
  if (!before || seconds <= 0) return 0;
  const uint64_t a = num(now, k), b = num(*before, k);
  return a >= b ? static_cast<double>(a - b) / seconds : 0;
}

// Objects of array `key` by their `id` field.
std::map<uint64_t, const Json*> index_by(const Json& stats, const char* key, const char* id) {
  std::map<uint64_t, const Json*> m;
  auto it = stats.find(key);
  if (it == stats.end() || !it->is_array()) return m;
  for (const Json& o : *it) m[num(o, id)] = &o;
  return m;
}

}  // namespace

std::string render_top_daemon(const Json& now, const Json* before, double seconds, const Snapshot* wire,
                              size_t limit) {
  std::string out;
  // QPs, worst first: retransmissions, then timeouts, then NAKs received, then traffic.
  auto qps = index_by(now, "qps", "qpn");
  auto qps_before = before ? index_by(*before, "qps", "qpn") : decltype(qps){};
  std::vector<const Json*> rows;
  for (const auto& [qpn, q] : qps) rows.push_back(q);
  std::stable_sort(rows.begin(), rows.end(), [](const Json* a, const Json* b) {
    auto key = [](const Json* q) {
      return std::make_tuple(num(*q, "retransmits"), num(*q, "timeouts"), num(*q, "naks_received"),
                             num(*q, "tx_packets") + num(*q, "rx_packets"));
    };
    return key(a) > key(b);
  });
  out += "SROCED QPS (the transport's view, " + std::to_string(rows.size()) +
         ", worst first: retx, timeouts, NAKs)\n";
  if (rows.size() > limit) rows.resize(limit);
  Table t{{"QPN", "TYPE", "STATE", "PID", "DEST", "TX PKT/S", "RX PKT/S", "TX PKTS",
                                           "RX PKTS", "RETX", "RETX/S", "TIMEOUTS", "NAK RX", "NAK TX", "DUP"}};
  for (const Json* q : rows) {
    auto b = qps_before.find(num(*q, "qpn"));
    const Json* prev = b == qps_before.end() ? nullptr : b->second;
    const bool r = before != nullptr;
    t.push_back({str(*q, "qpn"), str(*q, "type"), str(*q, "state"), str(*q, "pid"), str(*q, "dest_qpn"),
                 r ? human(rate(*q, prev, "tx_packets", seconds)) : "-",
                 r ? human(rate(*q, prev, "rx_packets", seconds)) : "-",
                 human(static_cast<double>(num(*q, "tx_packets"))), human(static_cast<double>(num(*q, "rx_packets"))),
                 human(static_cast<double>(num(*q, "retransmits"))),
                 r ? human(rate(*q, prev, "retransmits", seconds)) : "-", std::to_string(num(*q, "timeouts")),
                 std::to_string(num(*q, "naks_received")), std::to_string(num(*q, "naks_sent")),
                 std::to_string(num(*q, "duplicates"))});
  }
  print_table(out, t, 5);
  out += "\n";

  // Lanes: what sroced sent on each source port beside what the wire saw
  // leaving on it (egress rows of the telemetry, folded per source port).
  std::map<uint16_t, PathRow> wire_lanes;
  if (wire) {
    for (const PathRow& p : group(wire->paths, GroupBy::kLane)) {
      if (p.dir != Dir::kEgress) continue;
      auto [it, fresh] = wire_lanes.try_emplace(p.sport, p);
      if (!fresh) it->second.c.add(p.c);
    }
  }
  auto lanes = index_by(now, "lanes", "sport");
  auto lanes_before = before ? index_by(*before, "lanes", "sport") : decltype(lanes){};
  std::vector<const Json*> lrows;
  for (const auto& [sport, l] : lanes) lrows.push_back(l);
  std::stable_sort(lrows.begin(), lrows.end(),
                   [](const Json* a, const Json* b) { return num(*a, "tx_packets") > num(*b, "tx_packets"); });
  out += "SROCED LANES (" + std::to_string(lrows.size()) + " source ports: sroced's sends | the wire's egress" +
         (wire ? ")\n" : "; no telemetry attached)\n");
  if (lrows.size() > limit) lrows.resize(limit);
  Table lt{{"SPORT", "LOCAL", "TX PKT/S", "TX PKTS", "TX MB", "| WIRE PKTS", "RETX",
                                            "LOSS%", "OOO", "CE", "RTT50us", "RTT99us"}};
  for (const Json* l : lrows) {
    const uint64_t sport = num(*l, "sport");
    auto b = lanes_before.find(sport);
    const Json* prev = b == lanes_before.end() ? nullptr : b->second;
    std::vector<std::string> row = {std::to_string(sport), str(*l, "local"),
                                    before ? human(rate(*l, prev, "tx_packets", seconds)) : "-",
                                    human(static_cast<double>(num(*l, "tx_packets"))),
                                    fixed(static_cast<double>(num(*l, "tx_bytes")) / 1e6, 1)};
    auto w = wire_lanes.find(static_cast<uint16_t>(sport));
    if (w == wire_lanes.end()) {
      for (int i = 0; i < 7; ++i) row.push_back("-");
    } else {
      const Counters& c = w->second.c;
      row.push_back(human(static_cast<double>(c.packets)));
      row.push_back(human(static_cast<double>(c.retx)));
      row.push_back(fixed(100.0 * c.loss_ratio(), 2));
      row.push_back(human(static_cast<double>(c.ooo)));
      row.push_back(human(static_cast<double>(c.ce)));
      row.push_back(rtt_us(c.rtt_quantile_ns(0.5)));
      row.push_back(rtt_us(c.rtt_quantile_ns(0.99)));
    }
    lt.push_back(std::move(row));
  }
  print_table(out, lt, 2);
  out += "\n";
  return out;
}

}  // namespace sroce::telemetry
