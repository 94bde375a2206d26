// `sroce pingmesh analyze`: anomalies in the agents' JSON lines and their blame
// (docs/pingmesh.md). Pure functions over parsed records, so the unit tests drive it with
// synthetic data and the eval replays real runs step by step.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "topology.h"

namespace sroce::pingmesh {

struct ProbeRec {
  double t = 0;  // s (CLOCK_REALTIME of T1)
  std::string src, dst, kind;
  uint16_t sport = 0;
  bool ok = false;
  int64_t rtt_ns = 0, resp_ns = 0, prober_ns = 0;
};

struct HopRec {
  double t = 0;
  std::string src, dst, hop;  // hop "" when unanswered
  uint16_t sport = 0;
  unsigned ttl = 0;
  bool ok = false;
};

struct PathRec {
  double t = 0;
  std::string src, dst;
  uint16_t sport = 0;
  std::vector<std::string> hops;  // "" for a TTL never answered
};

struct Records {
  std::vector<ProbeRec> probes;
  std::vector<HopRec> hops;
  std::vector<PathRec> paths;
  double t_min = 0, t_max = 0;
  size_t bad_lines = 0;
};

// One JSON line of an agent; others (start, unknown types, garbage) are counted or skipped.
void add_record(Records& r, const std::string& line);
void finish_records(Records& r);  // sorts by time, sets t_min/t_max

struct AnalyzeOptions {
  double window_s = 10;
  double baseline_from = 0, baseline_to = 0;  // 0, 0: the first 10 s of data
  unsigned min_failures = 5;       // failures a component needs before it is named
  double min_loss = 0.02;          // and this share of its probes
  double host_loss = 0.10;         // R-Pingmesh: an RNIC above 10 % probe loss is anomalous
  double rtt_enter = 4, rtt_exit = 2;  // network RTT p50 / baseline p50, with hysteresis
  unsigned rtt_min_other_pairs = 4;    // pairs not touching a host that its RTT is judged against
  double delay_factor = 8;         // host delay p50 / baseline p50 ...
  double delay_floor_ms = 20;      // ... and at least this (scheduling noise stays below)
  double delay_peer_factor = 4;    // ... and this many times the other hosts' median delay
  double delay_dominance = 10;     // a host delay that rose this many times more than its
                                   // pairs' network RTT explains their loss and RTT too
  unsigned symmetric_ttl = 2;      // TTL-limited answers up to this TTL return the way they went
  unsigned tor_mesh_min = 10;      // ToR-mesh probes of a host that can clear it (below: voting only)
};

struct Blame {
  std::string element;  // "h2", "l2-s3", or "l1-s3|l2-s3" when the probes cannot separate them
  std::string kind;     // "host" (RNIC/host link), "link", "host_delay" (not the network)
  double confidence = 0;
  nlohmann::json evidence;
  std::string label() const { return element + "/" + kind; }
};

// State carried from one step to the next (hysteresis of RTT, host and host-delay blames).
struct AnalyzeState {
  std::map<std::string, bool> rtt_high;  // "src>dst" -> anomalous
  std::set<std::string> hosts_blamed;    // hosts blamed (kind "host") by the previous step
  std::set<std::string> hosts_delayed;   // hosts in host delay at the previous step
};

struct StepResult {
  double t = 0;
  std::vector<Blame> blames;
  nlohmann::json rtt_anomalies = nlohmann::json::array();
  nlohmann::json stats;
};

class Analyzer {
 public:
  Analyzer(const Topology& topo, const Records& rec, const AnalyzeOptions& o);
  // The window (t - window_s, t].
  StepResult step(double t, AnalyzeState& st) const;
  double baseline_from() const { return b0_; }
  double baseline_to() const { return b1_; }

 private:
  struct Obs {
    std::vector<int> comps;  // component ids
    bool fail = false;
    bool ud = true;
    bool tor = false;  // a ToR-mesh probe (both ends under one ToR)
    double t = 0;
  };
  std::vector<std::string> path_nodes(const std::string& src, const std::string& dst, uint16_t sport,
                                      double t) const;
  void add_links(const std::vector<std::string>& nodes, std::vector<int>& comps) const;
  int comp_id(const std::string& name) const;
  struct HostDelay {
    double ratio = 0;   // the worse of responder and prober delay p50 / baseline; 0: normal
    bool late = false;  // its p90 rose far more than its pairs' network RTT (delay_dominance)
    nlohmann::json evidence;
  };
  // Hosts whose own delay is anomalous in this window (rtt: "src>dst" -> network RTTs, ns;
  // resp and prober: host -> delays, ns).
  std::map<std::string, HostDelay> host_delays(const std::map<std::string, std::vector<double>>& rtt,
                                               const std::map<std::string, std::vector<double>>& resp,
                                               const std::map<std::string, std::vector<double>>& prober,
                                               const AnalyzeState& st) const;
  // `held`: hosts blamed by the previous step, which keep their blame without fresh
  // ToR-mesh evidence (hysteresis); any other host needs its ToR-mesh probes to be bad.
  void loss_blames(std::vector<Obs> obs, const std::set<std::string>& withdrawn,
                   const std::set<std::string>& held, std::vector<Blame>& out) const;
  // Links a ToR stopped sending on: used by the traced paths at the end of the baseline in the
  // ToR -> spine direction, by none at time t (the ToR's routing took the link out).
  std::set<std::string> withdrawn_links(double t) const;
  std::map<std::string, unsigned> tor_uplink_use(double t) const;
  std::string link_name(const std::string& a, const std::string& b) const;

  const Topology& topo_;
  const Records& rec_;
  AnalyzeOptions o_;
  double b0_ = 0, b1_ = 0;
  double base_loss_ = 0;
  std::map<std::string, double> base_rtt_;   // "src>dst" -> p50 ns
  std::map<std::string, double> base_resp_;  // host -> p50 responder delay, ns
  std::map<std::string, double> base_prober_;
  std::map<std::string, std::vector<const PathRec*>> paths_;  // "src>dst>sport" -> by time
  std::map<std::string, unsigned> base_use_;                  // ToR uplink -> paths at baseline end
  mutable std::map<std::string, int> comp_ids_;
  mutable std::vector<std::string> comp_names_;
};

// Binomial tails: P(X >= k) and P(X <= k) for X ~ Bin(n, p).
double binom_upper(unsigned n, unsigned k, double p);
double binom_lower(unsigned n, unsigned k, double p);

nlohmann::json step_json(const StepResult& s);
std::string step_text(const StepResult& s, const Topology& t);

}  // namespace sroce::pingmesh
