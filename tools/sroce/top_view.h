// One frame of `sroce top`: plain text tables (no curses, so it works over ssh
// in any terminal), ranked worst first. Pure function of two snapshots.
#pragma once

#include <string>
#include <vector>

#include "telemetry_view.h"

namespace sroce::telemetry {

struct TopOptions {
  bool peers = true;   // a section per peer (dir, local, peer)
  bool lanes = true;   // a section per lane (+ UDP source port)
  bool paths = false;  // a section per path (+ destination QP)
  size_t limit = 20;   // rows per section
  std::string title = "sroce top: RoCEv2 on the wire (tc eBPF)";
};

// `before` may be null (no rates yet); seconds is the time between the two.
std::string render_top(const Snapshot& now, const Snapshot* before, double seconds,
                       const TopOptions& opt);

// sroced's sections of `sroce top`: its QPs (worst first by retransmissions,
// timeouts, NAKs) and its lanes (source ports) with the wire's egress counters
// of the same source port beside them when `wire` is given. `now`/`before` are
// SROCE_OP_STATS objects (before may be null: no rates yet).
std::string render_top_daemon(const nlohmann::json& now, const nlohmann::json* before, double seconds,
                              const Snapshot* wire, size_t limit);

// The table layout of every section: the first `left` columns left-aligned
// (names), the rest right-aligned (numbers); columns as wide as their widest cell.
using Table = std::vector<std::vector<std::string>>;
void print_table(std::string& out, const Table& t, size_t left);
std::string fixed(double v, int prec);  // printf("%.*f")
std::string rtt_us(double ns);          // microseconds, "-" for no sample

// 1234567 -> "1.23M"; below 10000 printed as is.
std::string human(double v);

}  // namespace sroce::telemetry
