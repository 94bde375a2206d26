#include "top_view.h"

#include <algorithm>
#include <cstdio>
#include <vector>

namespace sroce::telemetry {

std::string fixed(double v, int prec) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", prec, v);
  return buf;
}

std::string rtt_us(double ns) { return ns > 0 ? fixed(ns / 1000.0, ns < 10000 ? 1 : 0) : "-"; }

void print_table(std::string& out, const Table& t, size_t left) {
  if (t.empty()) return;
  std::vector<size_t> w(t[0].size(), 0);
  for (const auto& row : t) {
    for (size_t i = 0; i < row.size(); ++i) w[i] = std::max(w[i], row[i].size());
  }
  for (const auto& row : t) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      const std::string pad(w[i] - row[i].size(), ' ');
      if (i) line += "  ";
      line += i < left ? row[i] + pad : pad + row[i];
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
}

namespace {

void section(std::string& out, const char* title, GroupBy by, const Snapshot& now,
             const Snapshot* before, double seconds, size_t limit) {
  std::vector<PathRow> rows = group(now.paths, by);
  rank(rows);
  const size_t total = rows.size();
  if (rows.size() > limit) rows.resize(limit);
  std::vector<Rate> r;
  if (before) r = rates(rows, group(before->paths, by), by, seconds);

  out += std::string(title) + " (" + std::to_string(total) + ", worst first: loss, retx, RTT)\n";
  std::vector<std::string> head = {"DIR", "LOCAL", "PEER"};
  size_t left = 3;
  if (by != GroupBy::kPeer) head.push_back("SPORT"), ++left;
  if (by == GroupBy::kPath) head.push_back("DQPN"), ++left;
  if (by != GroupBy::kPath) head.push_back("PATHS");
  for (const char* h : {"PKT/S", "MB/S", "PKTS", "RETX", "LOSS%", "OOO", "CE", "CNP", "NAK",
                        "RTT50us", "RTT99us"}) {
    head.push_back(h);
  }
  Table t{head};
  for (size_t i = 0; i < rows.size(); ++i) {
    const PathRow& p = rows[i];
    std::vector<std::string> row = {dir_name(p.dir), format_addr(p.local), format_addr(p.peer)};
    if (by != GroupBy::kPeer) row.push_back(std::to_string(p.sport));
    if (by == GroupBy::kPath) row.push_back(std::to_string(p.dqpn));
    if (by != GroupBy::kPath) row.push_back(std::to_string(p.paths));
    row.push_back(before ? human(r[i].pps) : "-");
    row.push_back(before ? fixed(r[i].bps / 1e6, 2) : "-");
    row.push_back(human(static_cast<double>(p.c.packets)));
    row.push_back(human(static_cast<double>(p.c.retx)));
    row.push_back(fixed(100.0 * p.c.loss_ratio(), 2));
    row.push_back(human(static_cast<double>(p.c.ooo)));
    row.push_back(human(static_cast<double>(p.c.ce)));
    row.push_back(human(static_cast<double>(p.c.cnp)));
    row.push_back(human(static_cast<double>(p.c.naks())));
    row.push_back(rtt_us(p.c.rtt_quantile_ns(0.5)));
    row.push_back(rtt_us(p.c.rtt_quantile_ns(0.99)));
    t.push_back(std::move(row));
  }
  print_table(out, t, left);
  out += "\n";
}

}  // namespace

std::string human(double v) {
  if (v < 10000) return fixed(v, v == static_cast<double>(static_cast<uint64_t>(v)) ? 0 : 1);
  static constexpr const char* kUnits[] = {"k", "M", "G", "T", "P"};
  int u = -1;
  while (v >= 1000 && u < 4) v /= 1000, ++u;
  return fixed(v, v < 100 ? 2 : 1) + kUnits[u];
}

std::string render_top(const Snapshot& now, const Snapshot* before, double seconds,
                       const TopOptions& opt) {
  std::string out = opt.title;
  if (!now.attachments.empty()) {
    out += " on";
    for (const AttachmentRow& a : now.attachments) out += " " + a.ifname;
  }
  out += "\npaths " + std::to_string(now.paths.size()) + "/" + std::to_string(now.max_paths) +
         "  evicted " + std::to_string(now.evicted()) + "  map-full " +
         std::to_string(now.stats[SROCE_TM_STAT_PATH_FULL]) + "  malformed " +
         std::to_string(now.stats[SROCE_TM_STAT_RUNT] + now.stats[SROCE_TM_STAT_TRUNC_IP] +
                        now.stats[SROCE_TM_STAT_TRUNC_UDP] + now.stats[SROCE_TM_STAT_TRUNC_BTH] +
                        now.stats[SROCE_TM_STAT_BAD_TVER] + now.stats[SROCE_TM_STAT_BAD_GSO]) +
         "\n";
  if (now.max_paths && now.paths.size() >= now.max_paths) {
    out += "WARNING: the paths map is full and evicting; attach with a larger --max-paths\n";
  }
  out += "\n";
  if (opt.peers) section(out, "PEERS", GroupBy::kPeer, now, before, seconds, opt.limit);
  if (opt.lanes)
    section(out, "LANES (UDP source ports)", GroupBy::kLane, now, before, seconds, opt.limit);
  if (opt.paths) section(out, "PATHS", GroupBy::kPath, now, before, seconds, opt.limit);
  return out;
}

}  // namespace sroce::telemetry
