#include "prometheus.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string_view>

#include "telemetry/tm_loader.h"

namespace sroce::telemetry {

namespace {

// The histogram exports buckets from 1.024 us (2^10 ns) up: finer ones fold
// into the first, as no host-to-host RTT is that short.
constexpr unsigned kFirstBucket = 9;

std::string fmt_double(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.9g", v);
  return buf;
}

class Writer {
 public:
  void family(std::string_view name, std::string_view type, std::string_view help) {
    out_ += "# HELP ";
    out_ += name;
    out_ += ' ';
    out_ += help;
    out_ += "\n# TYPE ";
    out_ += name;
    out_ += ' ';
    out_ += type;
    out_ += '\n';
  }
  void sample(std::string_view name, const std::string& labels, uint64_t v) {
    sample_raw(name, labels, std::to_string(v));
  }
  void sample(std::string_view name, const std::string& labels, double v) {
    sample_raw(name, labels, fmt_double(v));
  }
  void sample_raw(std::string_view name, const std::string& labels, const std::string& v) {
    out_ += name;
    if (!labels.empty()) {
      out_ += '{';
      out_ += labels;
      out_ += '}';
    }
    out_ += ' ';
    out_ += v;
    out_ += '\n';
  }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

std::string label(std::string_view k, const std::string& v) {
  std::string s(k);
  s += "=\"";
  s += prom_escape(v);
  s += '"';
  return s;
}

std::string join(const std::string& a, const std::string& b) {
  if (a.empty()) return b;
  if (b.empty()) return a;
  return a + "," + b;
}

std::string peer_labels(const PathRow& r, bool other) {
  return join(label("dir", dir_name(r.dir)),
              join(label("local", other ? "other" : format_addr(r.local)),
                   label("peer", other ? "other" : format_addr(r.peer))));
}

std::string path_labels(const PathRow& r) {
  return join(peer_labels(r, false),
              join(label("sport", std::to_string(r.sport)), label("dqpn", std::to_string(r.dqpn))));
}

struct Row {
  const PathRow* r;
  std::string labels;
};

void counter_families(Writer& w, std::string_view prefix, const std::vector<Row>& rows,
                      std::string_view what) {
  struct F {
    const char* name;
    const char* help;
    uint64_t Counters::*field;
  };
  static constexpr F kFamilies[] = {
      {"packets_total", "RoCEv2 packets", &Counters::packets},
      {"bytes_total", "Ethernet frame bytes of RoCEv2 packets (no FCS)", &Counters::bytes},
      {"ce_marks_total", "packets with ECN CE in the IP header", &Counters::ce},
      {"cnps_total", "RoCEv2 congestion notification packets", &Counters::cnp},
      {"retransmissions_total", "PSN regressions: packets whose PSN the path carried before",
       &Counters::retx},
      {"out_of_order_total", "late arrivals: a PSN below the highest seen, not seen before",
       &Counters::ooo},
      {"acks_total", "AETH ACKs (ACK, atomic ACK, read responses)", &Counters::acks},
  };
  for (const F& f : kFamilies) {
    std::string name = std::string(prefix) + "_" + f.name;
    w.family(name, "counter", std::string(f.help) + ", " + std::string(what) + ".");
    for (const Row& row : rows) w.sample(name, row.labels, row.r->c.*f.field);
  }
  std::string name = std::string(prefix) + "_naks_total";
  w.family(name, "counter",
           "AETH NAKs by syndrome (IBA table 43; rnr is the RNR NAK), " + std::string(what) + ".");
  for (const Row& row : rows) {
    for (unsigned i = 0; i < kNakSlotsUsed; ++i) {
      w.sample(name, join(row.labels, label("syndrome", nak_slot_name(i))), row.r->c.nak[i]);
    }
  }
  name = std::string(prefix) + "_rtt_seconds";
  w.family(name, "histogram",
           "request to ACK round-trip time, on the path that carried the request, " +
               std::string(what) + ".");
  for (const Row& row : rows) {
    const Counters& c = row.r->c;
    uint64_t cum = 0;
    for (unsigned b = 0; b < SROCE_TM_RTT_BUCKETS; ++b) {
      cum += c.rtt_hist[b];
      if (b < kFirstBucket) continue;
      const double le = std::ldexp(1.0, static_cast<int>(b) + 1) * 1e-9;
      w.sample(name + "_bucket", join(row.labels, label("le", fmt_double(le))), cum);
    }
    w.sample(name + "_bucket", join(row.labels, label("le", "+Inf")), cum);
    w.sample(name + "_sum", row.labels, static_cast<double>(c.rtt_sum_ns) * 1e-9);
    w.sample(name + "_count", row.labels, cum);
  }
}

}  // namespace

std::string prom_escape(const std::string& v) {
  std::string s;
  s.reserve(v.size());
  for (char ch : v) {
    if (ch == '\\') {
      s += "\\\\";
    } else if (ch == '"') {
      s += "\\\"";
    } else if (ch == '\n') {
      s += "\\n";
    } else {
      s += ch;
    }
  }
  return s;
}

std::string render_prometheus(const Snapshot& s, const PromOptions& opt) {
  Writer w;

  // Per peer, bounded: the first max_peers in ranking order, the rest folded.
  std::vector<PathRow> peers = group(s.paths, GroupBy::kPeer);
  rank(peers);
  std::vector<PathRow> folded;  // one "other" row per direction
  uint64_t peers_omitted = 0;
  if (peers.size() > opt.max_peers) {
    for (size_t i = opt.max_peers; i < peers.size(); ++i) {
      PathRow& p = peers[i];
      auto it = std::find_if(folded.begin(), folded.end(),
                             [&](const PathRow& f) { return f.dir == p.dir; });
      if (it == folded.end()) {
        folded.push_back(p);
      } else {
        it->c.add(p.c);
        it->paths += p.paths;
      }
    }
    peers_omitted = peers.size() - opt.max_peers;
    peers.resize(opt.max_peers);
  }
  std::vector<Row> peer_rows;
  for (const PathRow& p : peers) peer_rows.push_back({&p, peer_labels(p, false)});
  for (const PathRow& p : folded) peer_rows.push_back({&p, peer_labels(p, true)});

  std::vector<PathRow> paths = s.paths;
  rank(paths);
  uint64_t paths_omitted = 0;
  if (paths.size() > opt.max_paths) {
    paths_omitted = paths.size() - opt.max_paths;
    paths.resize(opt.max_paths);
  }
  std::vector<Row> path_rows;
  for (const PathRow& p : paths) path_rows.push_back({&p, path_labels(p)});

  w.family("sroce_wire_paths", "gauge", "paths (UDP source port, destination QP) seen per peer.");
  for (const Row& row : peer_rows) w.sample("sroce_wire_paths", row.labels, uint64_t{row.r->paths});
  counter_families(w, "sroce_wire", peer_rows, "per peer, from the tc programs");
  counter_families(w, "sroce_path", path_rows, "per path, the worst paths only");

  w.family("sroce_telemetry_skbs_total", "counter",
           "skbs the tc programs saw, by what they were (each skb counted once).");
  for (unsigned i = SROCE_TM_STAT_ROCE_SKBS; i <= SROCE_TM_STAT_BAD_GSO; ++i) {
    w.sample("sroce_telemetry_skbs_total",
             label("result", sroce_tm_stat_name(static_cast<sroce_tm_stat>(i))), s.stats[i]);
  }
  w.family("sroce_telemetry_gso_segments_lost_total", "counter",
           "later segments of GSO/GRO skbs that were cut short and not counted.");
  w.sample("sroce_telemetry_gso_segments_lost_total", "", s.stats[SROCE_TM_STAT_SEG_TRUNC]);
  w.family("sroce_telemetry_map_update_failures_total", "counter",
           "map updates that failed (the packet or RTT sample was not recorded).");
  w.sample("sroce_telemetry_map_update_failures_total", label("map", "paths"),
           s.stats[SROCE_TM_STAT_PATH_FULL]);
  w.sample("sroce_telemetry_map_update_failures_total", label("map", "pending"),
           s.stats[SROCE_TM_STAT_PENDING_FULL]);
  w.family("sroce_telemetry_path_evictions_total", "counter",
           "paths dropped by the LRU map to make room for new ones (raise --max-paths).");
  w.sample("sroce_telemetry_path_evictions_total", "", s.evicted());
  w.family("sroce_telemetry_map_entries", "gauge", "entries in the paths map.");
  w.sample("sroce_telemetry_map_entries", label("map", "paths"), uint64_t{s.paths.size()});
  w.family("sroce_telemetry_map_capacity", "gauge", "max_entries of the maps.");
  w.sample("sroce_telemetry_map_capacity", label("map", "paths"), uint64_t{s.max_paths});
  w.sample("sroce_telemetry_map_capacity", label("map", "pending"), uint64_t{s.max_pending});
  w.family("sroce_telemetry_rtt_acks_total", "counter",
           "ACKs seen on ingress by whether they gave an RTT sample.");
  w.sample("sroce_telemetry_rtt_acks_total", label("result", "matched"),
           s.stats[SROCE_TM_STAT_RTT_SAMPLES]);
  w.sample("sroce_telemetry_rtt_acks_total", label("result", "unmatched"),
           s.stats[SROCE_TM_STAT_RTT_UNMATCHED]);
  w.family("sroce_telemetry_rtt_karn_total", "counter",
           "RTT samples dropped because the request was retransmitted (Karn's rule).");
  w.sample("sroce_telemetry_rtt_karn_total", "", s.stats[SROCE_TM_STAT_RTT_KARN]);
  w.family("sroce_telemetry_attached_interfaces", "gauge",
           "interfaces the programs are attached to.");
  w.sample("sroce_telemetry_attached_interfaces", "", uint64_t{s.attachments.size()});
  w.family("sroce_telemetry_series_omitted", "gauge",
           "peers folded into peer=\"other\" and paths not exported, by level.");
  w.sample("sroce_telemetry_series_omitted", label("level", "peer"), peers_omitted);
  w.sample("sroce_telemetry_series_omitted", label("level", "path"), paths_omitted);
  return w.take();
}

}  // namespace sroce::telemetry
