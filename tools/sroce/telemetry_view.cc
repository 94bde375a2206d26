#include "telemetry_view.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <tuple>

#include "telemetry/tm_loader.h"

namespace sroce::telemetry {

namespace {

constexpr const char* kNakNames[SROCE_TM_NAK_SLOTS] = {
    "psn_seq_err",    "invalid_req", "remote_access", "remote_op",
    "invalid_rd_req", "rnr",         "other",         ""};

bool is_v4_mapped(const Addr& a) {
  static constexpr uint8_t kPrefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return std::memcmp(a.data(), kPrefix, sizeof(kPrefix)) == 0;
}

// The grouping key: fields a grouping ignores are zeroed.
auto group_key(const PathRow& r, GroupBy by) {
  uint16_t sport = by == GroupBy::kPeer ? 0 : r.sport;
  uint32_t dqpn = by == GroupBy::kPath ? r.dqpn : 0;
  return std::make_tuple(static_cast<uint8_t>(r.dir), r.local, r.peer, sport, dqpn);
}

}  // namespace

const unsigned kNakSlotsUsed = 7;

void Counters::add(const Counters& o) {
  packets += o.packets;
  bytes += o.bytes;
  ce += o.ce;
  cnp += o.cnp;
  retx += o.retx;
  ooo += o.ooo;
  acks += o.acks;
  for (size_t i = 0; i < nak.size(); ++i) nak[i] += o.nak[i];
  for (size_t i = 0; i < rtt_hist.size(); ++i) rtt_hist[i] += o.rtt_hist[i];
  rtt_sum_ns += o.rtt_sum_ns;
}

uint64_t Counters::naks() const {
  uint64_t n = 0;
  for (uint64_t v : nak) n += v;
  return n;
}

uint64_t Counters::rtt_samples() const {
  uint64_t n = 0;
  for (uint64_t v : rtt_hist) n += v;
  return n;
}

double Counters::rtt_quantile_ns(double q) const {
  const uint64_t total = rtt_samples();
  if (total == 0) return 0;
  const double want = std::clamp(q, 0.0, 1.0) * static_cast<double>(total);
  double below = 0;
  for (size_t b = 0; b < rtt_hist.size(); ++b) {
    if (rtt_hist[b] == 0) continue;
    const double in = static_cast<double>(rtt_hist[b]);
    if (below + in >= want) {
      // Bucket b holds [2^b, 2^(b+1)) ns (bucket 0 also holds 0).
      const double lo = b == 0 ? 0 : std::ldexp(1.0, static_cast<int>(b));
      const double hi = std::ldexp(1.0, static_cast<int>(b) + 1);
      return lo + (hi - lo) * std::clamp((want - below) / in, 0.0, 1.0);
    }
    below += in;
  }
  return std::ldexp(1.0, static_cast<int>(rtt_hist.size()));
}

double Counters::loss_ratio() const {
  return packets ? static_cast<double>(retx) / static_cast<double>(packets) : 0.0;
}

PathRow PathRow::from_bpf(const sroce_tm_path_key& k, const sroce_tm_path& v) {
  PathRow r;
  r.dir = k.dir == SROCE_TM_EGRESS ? Dir::kEgress : Dir::kIngress;
  std::memcpy(r.local.data(), k.local, 16);
  std::memcpy(r.peer.data(), k.peer, 16);
  r.sport = k.sport;
  r.dqpn = k.dqpn;
  r.c.packets = v.packets;
  r.c.bytes = v.bytes;
  r.c.ce = v.ce;
  r.c.cnp = v.cnp;
  r.c.retx = v.retx;
  r.c.ooo = v.ooo;
  r.c.acks = v.acks;
  std::copy(std::begin(v.nak), std::end(v.nak), r.c.nak.begin());
  std::copy(std::begin(v.rtt_hist), std::end(v.rtt_hist), r.c.rtt_hist.begin());
  r.c.rtt_sum_ns = v.rtt_sum_ns;
  r.first_ns = v.first_ns;
  r.last_ns = v.last_ns;
  return r;
}

uint64_t Snapshot::evicted() const {
  const uint64_t inserted = stats[SROCE_TM_STAT_PATH_INSERT];
  return inserted > paths.size() ? inserted - paths.size() : 0;
}

Result<Snapshot> read_snapshot_fds(int paths_fd, int stats_fd, int attach_fd) {
  Snapshot s;
  s.taken_ns = sroce_tm_now_ns();
  if (int rc = sroce_tm_read_stats(stats_fd, s.stats.data()); rc < 0) {
    return Error{-rc, std::string("reading the telemetry stats map: ") + std::strerror(-rc)};
  }
  auto on_path = [](const sroce_tm_path_key* k, const sroce_tm_path* v, void* arg) -> int {
    static_cast<Snapshot*>(arg)->paths.push_back(PathRow::from_bpf(*k, *v));
    return 0;
  };
  if (int rc = sroce_tm_for_each_path(paths_fd, on_path, &s); rc < 0) {
    return Error{-rc, std::string("reading the telemetry paths map: ") + std::strerror(-rc)};
  }
  if (attach_fd >= 0) {
    auto on_attach = [](const sroce_tm_attach_key* k, const struct sroce_tm_attach* v,
                        void* arg) -> int {
      AttachmentRow a;
      a.ifname.assign(v->ifname, strnlen(v->ifname, sizeof(v->ifname)));
      a.ifindex = k->ifindex;
      a.netns_ino = k->netns_ino;
      static_cast<Snapshot*>(arg)->attachments.push_back(std::move(a));
      return 0;
    };
    sroce_tm_for_each_attachment(attach_fd, on_attach, &s);
  }
  // The map walk order is the hash order; give readers a stable one.
  std::sort(s.paths.begin(), s.paths.end(), [](const PathRow& a, const PathRow& b) {
    return group_key(a, GroupBy::kPath) < group_key(b, GroupBy::kPath);
  });
  return s;
}

Result<Snapshot> read_snapshot(const std::string& pin_dir) {
  sroce_tm_maps m{};
  char err[512] = "";
  if (int rc =
          sroce_tm_maps_open(pin_dir.empty() ? nullptr : pin_dir.c_str(), &m, err, sizeof(err));
      rc < 0) {
    return Error{-rc, err};
  }
  auto s = read_snapshot_fds(m.paths, m.stats, m.attachments);
  if (s) {
    s->max_paths = m.max_paths;
    s->max_pending = m.max_pending;
  }
  sroce_tm_maps_close(&m);
  return s;
}

const char* group_by_name(GroupBy g) {
  switch (g) {
    case GroupBy::kPath:
      return "path";
    case GroupBy::kLane:
      return "lane";
    case GroupBy::kPeer:
      return "peer";
  }
  return "?";
}

std::vector<PathRow> group(const std::vector<PathRow>& paths, GroupBy by) {
  std::map<decltype(group_key(PathRow{}, by)), PathRow> m;
  for (const PathRow& p : paths) {
    auto [it, fresh] = m.try_emplace(group_key(p, by), p);
    if (fresh) {
      if (by == GroupBy::kPeer) it->second.sport = 0;
      if (by != GroupBy::kPath) it->second.dqpn = 0;
      continue;
    }
    PathRow& g = it->second;
    g.c.add(p.c);
    g.paths += p.paths;
    g.first_ns = std::min(g.first_ns, p.first_ns);
    g.last_ns = std::max(g.last_ns, p.last_ns);
  }
  std::vector<PathRow> out;
  out.reserve(m.size());
  for (auto& [k, v] : m) out.push_back(std::move(v));
  return out;
}

void rank(std::vector<PathRow>& rows) {
  std::stable_sort(rows.begin(), rows.end(), [](const PathRow& a, const PathRow& b) {
    const double la = a.c.loss_ratio(), lb = b.c.loss_ratio();
    if (la != lb) return la > lb;
    if (a.c.retx != b.c.retx) return a.c.retx > b.c.retx;
    const double ra = a.c.rtt_quantile_ns(0.99), rb = b.c.rtt_quantile_ns(0.99);
    if (ra != rb) return ra > rb;
    return a.c.packets > b.c.packets;
  });
}

std::vector<Rate> rates(const std::vector<PathRow>& now, const std::vector<PathRow>& before,
                        GroupBy by, double seconds) {
  std::map<decltype(group_key(PathRow{}, by)), const PathRow*> prev;
  for (const PathRow& p : before) prev[group_key(p, by)] = &p;
  std::vector<Rate> out(now.size());
  if (seconds <= 0) return out;
  for (size_t i = 0; i < now.size(); ++i) {
    auto it = prev.find(group_key(now[i], by));
    if (it == prev.end()) continue;
    const Counters& a = now[i].c;
    const Counters& b = it->second->c;
    // An LRU eviction and re-creation restarts a path's counters.
    if (a.packets < b.packets || a.bytes < b.bytes) continue;
    out[i].pps = static_cast<double>(a.packets - b.packets) / seconds;
    out[i].bps = static_cast<double>(a.bytes - b.bytes) / seconds;
  }
  return out;
}

std::vector<PathRow> live_paths(const Snapshot& s, uint64_t window_ns) {
  std::vector<PathRow> out;
  for (const PathRow& p : s.paths) {
    if (p.last_ns + window_ns >= s.taken_ns) out.push_back(p);
  }
  return out;
}

std::string format_addr(const Addr& a) {
  char buf[INET6_ADDRSTRLEN] = "";
  if (is_v4_mapped(a)) {
    inet_ntop(AF_INET, a.data() + 12, buf, sizeof(buf));
  } else {
    inet_ntop(AF_INET6, a.data(), buf, sizeof(buf));
  }
  return buf;
}

const char* dir_name(Dir d) { return d == Dir::kEgress ? "egress" : "ingress"; }

const char* nak_slot_name(unsigned slot) {
  return slot < SROCE_TM_NAK_SLOTS ? kNakNames[slot] : "";
}

nlohmann::json path_json(const PathRow& r) {
  nlohmann::json nak = nlohmann::json::object();
  for (unsigned i = 0; i < kNakSlotsUsed; ++i) nak[nak_slot_name(i)] = r.c.nak[i];
  return {
      {"dir", dir_name(r.dir)},
      {"local", format_addr(r.local)},
      {"peer", format_addr(r.peer)},
      {"sport", r.sport},
      {"dqpn", r.dqpn},
      {"packets", r.c.packets},
      {"bytes", r.c.bytes},
      {"ce", r.c.ce},
      {"cnp", r.c.cnp},
      {"retx", r.c.retx},
      {"ooo", r.c.ooo},
      {"acks", r.c.acks},
      {"nak", nak},
      {"rtt_hist", r.c.rtt_hist},
      {"rtt_samples", r.c.rtt_samples()},
      {"rtt_sum_ns", r.c.rtt_sum_ns},
      {"first_ns", r.first_ns},
      {"last_ns", r.last_ns},
  };
}

nlohmann::json paths_json(const Snapshot& s) {
  nlohmann::json a = nlohmann::json::array();
  for (const PathRow& p : s.paths) a.push_back(path_json(p));
  return a;
}

nlohmann::json stats_json(const Snapshot& s) {
  nlohmann::json st = nlohmann::json::object();
  for (unsigned i = 0; i < SROCE_TM_STAT_COUNT; ++i) {
    st[sroce_tm_stat_name(static_cast<sroce_tm_stat>(i))] = s.stats[i];
  }
  nlohmann::json att = nlohmann::json::array();
  for (const AttachmentRow& a : s.attachments) {
    att.push_back({{"ifname", a.ifname}, {"ifindex", a.ifindex}, {"netns_ino", a.netns_ino}});
  }
  return {
      {"stats", st},
      {"paths", s.paths.size()},
      {"max_paths", s.max_paths},
      {"max_pending", s.max_pending},
      {"paths_evicted", s.evicted()},
      {"attachments", att},
  };
}

}  // namespace sroce::telemetry
