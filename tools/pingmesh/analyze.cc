#include "analyze.h"

#include <algorithm>
#include <cmath>
#include <set>

#include <fmt/format.h>

namespace sroce::pingmesh {

namespace {

double quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  const size_t m = std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(m), v.end());
  return v[m];
}

double p50(std::vector<double> v) { return quantile(std::move(v), 0.5); }

double log_binom_pmf(unsigned n, unsigned k, double p) {
  if (p <= 0) return k == 0 ? 0 : -INFINITY;
  if (p >= 1) return k == n ? 0 : -INFINITY;
  return std::lgamma(n + 1.0) - std::lgamma(k + 1.0) - std::lgamma(n - k + 1.0) + k * std::log(p) +
         (n - k) * std::log1p(-p);
}

std::string key3(const std::string& a, const std::string& b, uint16_t s) {
  return a + ">" + b + ">" + std::to_string(s);
}

}  // namespace

// Summed from k outwards, away from the mode, until the terms stop mattering; the other side
// of the mode through the complement.
double binom_upper(unsigned n, unsigned k, double p) {
  if (k == 0) return 1;
  if (k > n) return 0;
  if (k < n * p) return 1.0 - binom_lower(n, k - 1, p);
  double s = 0;
  for (unsigned i = k; i <= n; ++i) {
    const double term = std::exp(log_binom_pmf(n, i, p));
    s += term;
    if (term < s * 1e-12) break;
  }
  return std::min(1.0, s);
}

double binom_lower(unsigned n, unsigned k, double p) {
  if (k >= n) return 1;
  if (k > n * p) return 1.0 - binom_upper(n, k + 1, p);
  double s = 0;
  for (unsigned i = k + 1; i-- > 0;) {
    const double term = std::exp(log_binom_pmf(n, i, p));
    s += term;
    if (term < s * 1e-12) break;
  }
  return std::min(1.0, s);
}

void add_record(Records& r, const std::string& line) {
  if (line.empty()) return;
  auto j = nlohmann::json::parse(line, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("type") || !j.contains("t")) {
    ++r.bad_lines;
    return;
  }
  try {
    const std::string type = j["type"].get<std::string>();
    const double t = j["t"].get<double>() / 1e9;
    if (type == "probe") {
      ProbeRec p;
      p.t = t;
      p.src = j["src"].get<std::string>();
      p.dst = j["dst"].get<std::string>();
      p.kind = j.value("kind", "");
      p.sport = j["sport"].get<uint16_t>();
      p.ok = j["status"].get<std::string>() == "ok";
      p.rtt_ns = j.value("rtt_ns", int64_t{0});
      p.resp_ns = j.value("resp_ns", int64_t{0});
      p.prober_ns = j.value("prober_ns", int64_t{0});
      r.probes.push_back(std::move(p));
    } else if (type == "hop") {
      HopRec h;
      h.t = t;
      h.src = j["src"].get<std::string>();
      h.dst = j["dst"].get<std::string>();
      h.sport = j["sport"].get<uint16_t>();
      h.ttl = j["ttl"].get<unsigned>();
      h.hop = j["hop"].is_string() ? j["hop"].get<std::string>() : "";
      h.ok = j.value("ok", false);
      r.hops.push_back(std::move(h));
    } else if (type == "path") {
      PathRec p;
      p.t = t;
      p.src = j["src"].get<std::string>();
      p.dst = j["dst"].get<std::string>();
      p.sport = j["sport"].get<uint16_t>();
      for (const auto& h : j["hops"]) p.hops.push_back(h.is_string() ? h.get<std::string>() : "");
      r.paths.push_back(std::move(p));
    }
  } catch (const nlohmann::json::exception&) {
    ++r.bad_lines;
  }
}

void finish_records(Records& r) {
  auto by_t = [](const auto& a, const auto& b) { return a.t < b.t; };
  std::stable_sort(r.probes.begin(), r.probes.end(), by_t);
  std::stable_sort(r.hops.begin(), r.hops.end(), by_t);
  std::stable_sort(r.paths.begin(), r.paths.end(), by_t);
  r.t_min = 1e300;
  r.t_max = 0;
  for (const auto& p : r.probes) {
    r.t_min = std::min(r.t_min, p.t);
    r.t_max = std::max(r.t_max, p.t);
  }
  if (r.probes.empty()) r.t_min = 0;
}

Analyzer::Analyzer(const Topology& topo, const Records& rec, const AnalyzeOptions& o)
    : topo_(topo), rec_(rec), o_(o) {
  b0_ = o.baseline_from;
  b1_ = o.baseline_to;
  if (b0_ == 0 && b1_ == 0) {
    b0_ = rec.t_min;
    b1_ = rec.t_min + 10;
  }
  for (const auto& p : rec.paths) paths_[key3(p.src, p.dst, p.sport)].push_back(&p);
  base_use_ = tor_uplink_use(b1_);
  std::map<std::string, std::vector<double>> rtt, resp, prober;
  size_t n = 0, f = 0;
  for (const auto& p : rec.probes) {
    if (p.t < b0_ || p.t > b1_) continue;
    ++n;
    if (!p.ok) {
      ++f;
      continue;
    }
    rtt[p.src + ">" + p.dst].push_back(static_cast<double>(p.rtt_ns));
    resp[topo.node(p.dst)].push_back(static_cast<double>(p.resp_ns));
    prober[topo.node(p.src)].push_back(static_cast<double>(p.prober_ns));
  }
  base_loss_ = n ? static_cast<double>(f) / static_cast<double>(n) : 0;
  for (auto& [k, v] : rtt) base_rtt_[k] = p50(v);
  for (auto& [k, v] : resp) base_resp_[k] = p50(v);
  for (auto& [k, v] : prober) base_prober_[k] = p50(v);
}

int Analyzer::comp_id(const std::string& name) const {
  auto it = comp_ids_.find(name);
  if (it != comp_ids_.end()) return it->second;
  const int id = static_cast<int>(comp_names_.size());
  comp_names_.push_back(name);
  comp_ids_[name] = id;
  return id;
}

std::vector<std::string> Analyzer::path_nodes(const std::string& src, const std::string& dst,
                                              uint16_t sport, double t) const {
  std::vector<std::string> nodes{topo_.node(src)};
  auto it = paths_.find(key3(src, dst, sport));
  if (it != paths_.end() && !it->second.empty()) {
    const PathRec* best = it->second.front();
    for (const PathRec* p : it->second) {
      if (p->t > t) break;
      best = p;
    }
    for (const auto& h : best->hops) nodes.push_back(h.empty() ? "" : topo_.node(h));
  }
  nodes.push_back(topo_.node(dst));
  return nodes;
}

std::string Analyzer::link_name(const std::string& a, const std::string& b) const {
  bool ta = false, tb = false;
  for (const auto& h : topo_.hosts) {
    ta = ta || h.tor == a;
    tb = tb || h.tor == b;
  }
  if (ta && !tb) return a + "-" + b;
  if (tb && !ta) return b + "-" + a;
  return a < b ? a + "-" + b : b + "-" + a;
}

std::map<std::string, unsigned> Analyzer::tor_uplink_use(double t) const {
  std::map<std::string, unsigned> use;
  for (const auto& [k, v] : paths_) {
    const PathRec* cur = nullptr;
    for (const PathRec* p : v) {
      if (p->t > t) break;
      cur = p;
    }
    if (!cur) continue;
    const std::string tor = cur->hops.empty() ? "" : topo_.node(cur->hops[0]);
    const TopoHost* src = topo_.host_by_addr(cur->src);
    if (!src || tor != src->tor || cur->hops.size() < 2 || cur->hops[1].empty()) continue;
    ++use[link_name(tor, topo_.node(cur->hops[1]))];
  }
  return use;
}

std::set<std::string> Analyzer::withdrawn_links(double t) const {
  std::set<std::string> out;
  const auto now = tor_uplink_use(t);
  for (const auto& [l, n] : base_use_)
    if (n >= 2 && !now.count(l)) out.insert(l);
  return out;
}

void Analyzer::add_links(const std::vector<std::string>& nodes, std::vector<int>& comps) const {
  for (size_t i = 0; i + 1 < nodes.size(); ++i) {
    const std::string& a = nodes[i];
    const std::string& b = nodes[i + 1];
    if (a.empty() || b.empty() || a == b) continue;
    if (topo_.host_by_name(a) || topo_.host_by_name(b)) continue;  // a host's link is the host
    const int id = comp_id(link_name(a, b));
    if (std::find(comps.begin(), comps.end(), id) == comps.end()) comps.push_back(id);
  }
}

void Analyzer::loss_blames(std::vector<Obs> obs, const std::set<std::string>& withdrawn,
                           const std::set<std::string>& held, std::vector<Blame>& out) const {
  size_t total_fail = 0;
  for (const auto& x : obs) total_fail += x.fail;
  const double p0 = base_loss_ + 0.002;
  const size_t window_fail = total_fail;
  std::set<std::string> cleared;  // exonerated in an earlier round: not blamed in a later one
  nlohmann::json tor_cleared = nlohmann::json::array();
  for (int round = 0; round < 3 && total_fail > 0; ++round) {
    std::map<int, unsigned> n, f, tn, tf;
    for (const auto& x : obs)
      for (int c : x.comps) {
        ++n[c];
        f[c] += x.fail;
        if (x.tor) {
          ++tn[c];
          tf[c] += x.fail;
        }
      }
    std::vector<int> cands;
    for (const auto& [c, nc] : n) {
      const unsigned fc = f[c];
      if (fc < o_.min_failures || static_cast<double>(fc) / nc < o_.min_loss) continue;
      if (cleared.count(comp_names_[c])) continue;
      // R-Pingmesh judges an RNIC by its ToR-mesh probes. They cross the host's own link
      // and NIC as all its probes do, so a host whose ToR-mesh probes are no worse than the
      // baseline is not what loses the others: those failures are the fabric's (a dead
      // link's leftovers on paths learnt a moment late, routes converging), and a host
      // under a busy CPU answers late, not never. Hysteresis: a host blamed by the previous
      // step keeps its blame on the voting alone (a fault's last seconds in the window can
      // have a cleaner ToR-mesh than its other probes). Without enough ToR-mesh probes (no
      // peer under its ToR) the voting alone decides, as before.
      if (topo_.host_by_name(comp_names_[c]) && !held.count(comp_names_[c]) && tn[c] >= o_.tor_mesh_min &&
          binom_upper(tn[c], tf[c], p0) >= 1e-3) {
        cleared.insert(comp_names_[c]);
        tor_cleared.push_back({{"element", comp_names_[c]}, {"reason", "its ToR-mesh probes are clean"},
                               {"tor_mesh_probes", tn[c]}, {"tor_mesh_failures", tf[c]},
                               {"failures", fc}, {"probes", nc}});
        continue;
      }
      // A further fault must explain a real share of the window's failures, not the few a
      // path learnt a second late leaves over from the first.
      if (round > 0 && fc < window_fail / 20) continue;
      if (binom_upper(nc, fc, p0) >= 1e-6) continue;
      cands.push_back(c);
    }
    if (cands.empty()) break;
    auto ratio = [&](int c) { return static_cast<double>(f[c]) / n[c]; };
    const int best = *std::max_element(cands.begin(), cands.end(), [&](int a, int b) {
      return ratio(a) != ratio(b) ? ratio(a) < ratio(b) : f[a] < f[b];
    });
    // Components failing on (nearly) the same probes: the probes alone cannot tell them apart.
    std::map<int, std::set<size_t>> fails;
    for (size_t i = 0; i < obs.size(); ++i)
      if (obs[i].fail)
        for (int c : obs[i].comps) fails[c].insert(i);
    auto jaccard = [&](int a, int b) {
      size_t both = 0;
      for (size_t i : fails[a]) both += fails[b].count(i);
      const size_t uni = fails[a].size() + fails[b].size() - both;
      return uni ? static_cast<double>(both) / static_cast<double>(uni) : 0.0;
    };
    std::vector<int> group;
    for (int c : cands)
      if (c == best || (jaccard(c, best) >= 0.7 && ratio(c) >= 0.5 * ratio(best))) group.push_back(c);
    // Exoneration: a member whose own probes (those crossing no other member) are too clean
    // for the group's loss rate was seen on healthy paths.
    std::vector<int> remain;
    nlohmann::json exonerated = nlohmann::json::array();
    // Only what was seen while the fault was there counts: the window also holds the clean
    // probes from before the first failure.
    double since = 1e300;
    for (size_t i : fails[best]) since = std::min(since, obs[i].t);
    for (int c : group) {
      unsigned ne = 0, fe = 0;
      for (const auto& x : obs) {
        if (x.t < since || std::find(x.comps.begin(), x.comps.end(), c) == x.comps.end()) continue;
        bool other = false;
        for (int g : group)
          if (g != c && std::find(x.comps.begin(), x.comps.end(), g) != x.comps.end()) other = true;
        if (other) continue;
        ++ne;
        fe += x.fail;
      }
      // Only decides between members that already passed the candidate test, so a lenient
      // level (5 %) names no new element; it cannot exonerate a whole group (below).
      if (group.size() > 1 && ne >= 10 && binom_lower(ne, fe, 0.5 * ratio(best)) < 0.05) {
        exonerated.push_back({{"element", comp_names_[c]}, {"exclusive_probes", ne}, {"exclusive_failures", fe}});
      } else {
        remain.push_back(c);
      }
    }
    if (remain.empty()) remain = group;
    // A link its ToR took out of its ECMP set is down; the members the far end still routes
    // over are not (the end-to-end probes cannot tell them apart: every path over the spine
    // crosses both).
    if (remain.size() > 1) {
      std::vector<int> w;
      for (int c : remain)
        if (withdrawn.count(comp_names_[c])) w.push_back(c);
      if (!w.empty() && w.size() < remain.size()) {
        for (int c : remain)
          if (!withdrawn.count(comp_names_[c]))
            exonerated.push_back({{"element", comp_names_[c]}, {"reason", "still routed by its ToR"}});
        remain = w;
      }
    }
    std::sort(remain.begin(), remain.end(), [&](int a, int b) { return comp_names_[a] < comp_names_[b]; });
    Blame b;
    b.evidence = nlohmann::json::object();
    bool all_hosts = true;
    for (int c : remain) {
      b.element += (b.element.empty() ? "" : "|") + comp_names_[c];
      all_hosts = all_hosts && topo_.host_by_name(comp_names_[c]);
    }
    b.kind = all_hosts ? "host" : "link";
    size_t explained = 0;
    std::vector<Obs> rest;
    for (auto& x : obs) {
      bool hit = false;
      for (int c : remain) hit = hit || std::find(x.comps.begin(), x.comps.end(), c) != x.comps.end();
      if (hit) {
        explained += x.fail;
      } else {
        rest.push_back(std::move(x));
      }
    }
    b.confidence = static_cast<double>(explained) / static_cast<double>(total_fail) /
                   static_cast<double>(remain.size());
    for (const auto& e : exonerated) cleared.insert(e["element"].get<std::string>());
    for (const auto& e : tor_cleared) exonerated.push_back(e);
    tor_cleared = nlohmann::json::array();
    for (int c : remain)
      if (withdrawn.count(comp_names_[c])) b.evidence["withdrawn_by_tor"] = true;
    b.evidence.update({{"failures", f[best]}, {"probes", n[best]}, {"loss", ratio(best)},
                  {"explained_failures", explained}, {"window_failures", total_fail},
                  {"exonerated", exonerated}});
    if (b.kind == "host") {
      const std::string& h = comp_names_[remain.front()];
      const TopoHost* th = topo_.host_by_name(h);
      unsigned peers = 0;
      for (const auto& x : topo_.hosts) peers += x.tor == th->tor;
      b.evidence["tor_hosts"] = peers;
      // Fewer than 3 hosts under a ToR: its ToR-mesh cannot say which end is bad; the
      // inter-ToR probes decided (R-Pingmesh's ToR-mesh rule needs a majority).
      b.evidence["fallback"] = peers < 3;
    }
    out.push_back(std::move(b));
    obs = std::move(rest);
    total_fail -= explained;
  }
}

// A host's own delay (responder T4-T3, prober (T6-T1)-(T5-T2)) far above its baseline: its
// p50 decides a host-delay blame. A host that stalls also answers some probes after their
// timeout and, with completion timestamps taken by software, adds a little to the network RTT
// of its pairs. So a host whose delay p90 rose past the same thresholds, and far more than its
// pairs' network RTT (`late`), has its probes taken out of the loss vote: their failures are
// late answers. The p90 sees a stall as soon as a tenth of the window has it, before the
// failures it causes reach the vote's thresholds; the p50 needs half the window. Both must
// also stand out from the other hosts' (delay_peer_factor): a delay every host shares is the
// machine's. Hysteresis: a host in host delay at the previous step stays there down to half
// the thresholds.
std::map<std::string, Analyzer::HostDelay> Analyzer::host_delays(
    const std::map<std::string, std::vector<double>>& rtt, const std::map<std::string, std::vector<double>>& resp,
    const std::map<std::string, std::vector<double>>& prober, const AnalyzeState& st) const {
  // Each host's p50 and p90 of both delays in this window (absent: fewer than 5 samples).
  struct Q {
    double p50 = -1, p90 = -1;
  };
  std::map<std::string, std::array<Q, 2>> q;
  const std::array<const std::map<std::string, std::vector<double>>*, 2> now{&resp, &prober};
  const std::array<const std::map<std::string, double>*, 2> base{&base_resp_, &base_prober_};
  for (const auto& th : topo_.hosts)
    for (size_t k = 0; k < 2; ++k) {
      auto v = now[k]->find(th.name);
      if (v == now[k]->end() || v->second.size() < 5) continue;
      q[th.name][k] = {p50(v->second), quantile(v->second, 0.9)};
    }
  // The other hosts' median of the same figure: a delay all hosts share is the machine's (the
  // load of the host running the agents, or of a whole fabric), not one host's.
  auto peers = [&](const std::string& h, size_t k, bool tail) {
    std::vector<double> v;
    for (const auto& [o, qq] : q)
      if (o != h && qq[k].p50 >= 0) v.push_back(tail ? qq[k].p90 : qq[k].p50);
    return v.empty() ? 0.0 : p50(v);
  };
  std::map<std::string, HostDelay> out;
  for (const auto& th : topo_.hosts) {
    const bool held = st.hosts_delayed.count(th.name) > 0;
    const double factor = held ? o_.delay_factor / 2 : o_.delay_factor;
    const double peer_factor = held ? o_.delay_peer_factor / 2 : o_.delay_peer_factor;
    const double floor_ns = (held ? o_.delay_floor_ms / 2 : o_.delay_floor_ms) * 1e6;
    HostDelay d;
    double rise90 = 0;
    d.evidence = nlohmann::json::object();
    for (size_t k = 0; k < 2; ++k) {
      auto b = base[k]->find(th.name);
      const Q& x = q[th.name][k];
      if (x.p50 < 0 || b == base[k]->end()) continue;
      const double base50 = std::max(b->second, 1000.0), peer50 = peers(th.name, k, false),
                   peer90 = peers(th.name, k, true);
      const double ratio = x.p50 / base50;
      d.evidence[k == 0 ? "responder" : "prober"] = {{"p50_ns", x.p50},       {"p90_ns", x.p90},
                                                     {"baseline_p50_ns", base50}, {"ratio", ratio},
                                                     {"peers_p50_ns", peer50}, {"peers_p90_ns", peer90}};
      if (ratio >= factor && x.p50 >= floor_ns && x.p50 >= peer_factor * peer50) d.ratio = std::max(d.ratio, ratio);
      if (x.p90 / base50 >= factor && x.p90 >= floor_ns && x.p90 >= peer_factor * peer90)
        rise90 = std::max(rise90, x.p90 - base50);
    }
    if (rise90 <= 0 && d.ratio <= 0) continue;
    std::vector<double> rtt_rise;  // its pairs' network RTT p50 over their baselines
    for (const auto& [k, v] : rtt) {
      const auto gt = k.find('>');
      if (topo_.node(k.substr(0, gt)) != th.name && topo_.node(k.substr(gt + 1)) != th.name) continue;
      auto b = base_rtt_.find(k);
      if (v.size() >= 5 && b != base_rtt_.end()) rtt_rise.push_back(p50(v) - b->second);
    }
    const double net_rise = rtt_rise.empty() ? 0.0 : std::max(0.0, p50(rtt_rise));
    d.evidence["network_rtt_rise_ns"] = net_rise;
    d.late = rise90 > 0 && rise90 >= o_.delay_dominance * net_rise;
    out.emplace(th.name, std::move(d));
  }
  return out;
}

StepResult Analyzer::step(double t, AnalyzeState& st) const {
  StepResult r;
  r.t = t;
  const double lo = t - o_.window_s;
  std::vector<Obs> obs;
  std::map<std::string, std::vector<double>> rtt, resp, prober;
  std::map<std::string, std::array<unsigned, 2>> tor_mesh;  // host -> {probes, failures}
  unsigned n_ud = 0, f_ud = 0, n_hop = 0;
  std::map<std::string, std::array<unsigned, 2>> pair_fail;  // src>dst>sport -> {probes, failed}
  auto after = [](const auto& v, double x) {
    return std::upper_bound(v.begin(), v.end(), x, [](double a, const auto& r) { return a < r.t; });
  };
  for (auto it = after(rec_.probes, lo); it != rec_.probes.end() && it->t <= t; ++it) {
    const ProbeRec& p = *it;
    Obs x;
    x.fail = !p.ok;
    x.tor = p.kind == "tor";
    x.t = p.t;
    const std::string s = topo_.node(p.src), d = topo_.node(p.dst);
    x.comps.push_back(comp_id(s));
    x.comps.push_back(comp_id(d));
    add_links(path_nodes(p.src, p.dst, p.sport, p.t), x.comps);
    add_links(path_nodes(p.dst, p.src, p.sport, p.t), x.comps);
    obs.push_back(std::move(x));
    auto& pf = pair_fail[key3(p.src, p.dst, p.sport)];
    ++pf[0];
    pf[1] += !p.ok;
    ++n_ud;
    f_ud += !p.ok;
    if (p.kind == "tor")
      for (const auto& h : {s, d}) {
        ++tor_mesh[h][0];
        tor_mesh[h][1] += !p.ok;
      }
    if (!p.ok) continue;
    rtt[p.src + ">" + p.dst].push_back(static_cast<double>(p.rtt_ns));
    resp[d].push_back(static_cast<double>(p.resp_ns));
    prober[s].push_back(static_cast<double>(p.prober_ns));
  }
  for (auto it = after(rec_.hops, lo); it != rec_.hops.end() && it->t <= t; ++it) {
    const HopRec& h = *it;
    if (h.ttl == 0 || h.ttl > o_.symmetric_ttl) continue;
    // A silent router is evidence of loss only where the pair's probes mostly get through:
    // where they do not, the router is silent for the same reason (no route onwards; its
    // unreachable errors are rate-limited), not because the way to it is lossy.
    if (h.hop.empty()) {
      const auto& pf = pair_fail[key3(h.src, h.dst, h.sport)];
      if (pf[0] == 0 || 2 * pf[1] >= pf[0]) continue;
    }
    auto nodes = path_nodes(h.src, h.dst, h.sport, h.t);
    nodes.resize(std::min<size_t>(nodes.size(), h.ttl + 1));  // src + hops up to this TTL
    if (nodes.size() != h.ttl + 1) continue;
    if (!h.hop.empty()) nodes.back() = topo_.node(h.hop);
    if (nodes.back().empty()) continue;
    Obs x;
    x.ud = false;
    x.fail = h.hop.empty();  // any answer (time exceeded or unreachable) came back that way
    x.t = h.t;
    x.comps.push_back(comp_id(topo_.node(h.src)));
    add_links(nodes, x.comps);
    obs.push_back(std::move(x));
    ++n_hop;
  }
  const auto delays = host_delays(rtt, resp, prober, st);
  std::set<int> late;  // hosts whose failed probes are late answers: out of the loss vote
  for (const auto& [h, d] : delays)
    if (d.late) late.insert(comp_id(h));
  if (!late.empty())
    obs.erase(std::remove_if(obs.begin(), obs.end(),
                             [&](const Obs& x) {
                               return x.ud && (late.count(x.comps[0]) || late.count(x.comps[1]));
                             }),
              obs.end());
  loss_blames(std::move(obs), withdrawn_links(t), st.hosts_blamed, r.blames);
  for (auto& b : r.blames)
    if (b.kind == "host" && tor_mesh.count(b.element)) {
      const auto& tm = tor_mesh[b.element];
      b.evidence["tor_mesh_probes"] = tm[0];
      b.evidence["tor_mesh_loss"] = tm[0] ? static_cast<double>(tm[1]) / tm[0] : 0.0;
    }

  // Network RTT against each pair's baseline, with hysteresis.
  std::map<std::string, std::array<unsigned, 2>> host_pairs;  // host -> {pairs, anomalous}
  std::vector<std::tuple<std::string, std::string, bool>> pairs;  // src, dst, anomalous
  for (const auto& [k, v] : rtt) {
    auto b = base_rtt_.find(k);
    if (v.size() < 5 || b == base_rtt_.end() || b->second <= 0) continue;
    const double ratio = p50(v) / b->second;
    bool& high = st.rtt_high[k];
    high = high ? ratio >= o_.rtt_exit : ratio >= o_.rtt_enter;
    const auto gt = k.find('>');
    const std::string s = topo_.node(k.substr(0, gt)), d = topo_.node(k.substr(gt + 1));
    for (const auto& h : {s, d}) {
      ++host_pairs[h][0];
      host_pairs[h][1] += high;
    }
    pairs.emplace_back(s, d, high);
    if (high) r.rtt_anomalies.push_back({{"src", s}, {"dst", d}, {"ratio", ratio}, {"p50_ns", p50(v)}});
  }
  auto blamed = [&](const std::string& e) {
    for (const auto& b : r.blames)
      if (b.element == e) return true;
    return false;
  };
  // A host on most of whose pairs the RTT is anomalous while few other pairs' is. The pairs of
  // a host already blamed as `host` are explained by it and leave the count (a slow NIC makes
  // its peers' pairs with it slow too), and the worst host goes first, then the rest again;
  // the comparison needs rtt_min_other_pairs pairs not touching the host.
  std::set<std::string> explained;
  for (const auto& b : r.blames)
    if (b.kind == "host") explained.insert(b.element);
  for (;;) {
    std::map<std::string, std::array<unsigned, 2>> hp;  // host -> {pairs, anomalous}, unexplained
    unsigned total = 0, high = 0;
    for (const auto& [s, d, hi] : pairs) {
      if (explained.count(s) || explained.count(d)) continue;
      for (const auto& h : {s, d}) {
        ++hp[h][0];
        hp[h][1] += hi;
      }
      ++total;
      high += hi;
    }
    std::string best;
    double best_mine = 0, best_others = 0;
    for (const auto& [h, c] : hp) {
      if (!topo_.host_by_name(h) || c[0] < 2 || blamed(h)) continue;
      const double mine = static_cast<double>(c[1]) / c[0];
      const unsigned others_n = total - c[0], others_h = high - c[1];
      // Too few other pairs cannot show that the slowness is this host's, not everyone's (a
      // load spike of the machine slows every pair at once).
      if (others_n < o_.rtt_min_other_pairs) continue;
      const double others = static_cast<double>(others_h) / others_n;
      if (mine >= 0.75 && others <= 0.25 && mine > best_mine) {
        best = h;
        best_mine = mine;
        best_others = others;
      }
    }
    if (best.empty()) break;
    r.blames.push_back({best, "host", best_mine * (1 - best_others),
                        {{"reason", "network RTT above baseline on its pairs"},
                         {"pairs", hp[best][0]},
                         {"anomalous", hp[best][1]}}});
    explained.insert(best);
  }
  // Not the network: a host's own delay far above its baseline (host_delays, above).
  for (const auto& [h, d] : delays) {
    if (d.ratio <= 0) continue;
    auto it = std::find_if(r.blames.begin(), r.blames.end(), [&](const Blame& x) { return x.element == h; });
    if (it != r.blames.end()) {
      if (it->kind != "host" || !d.late) continue;
      nlohmann::json ev = d.evidence;
      ev["instead_of"] = {{"kind", it->kind}, {"evidence", it->evidence}};
      *it = Blame{h, "host_delay", 1.0 - 1.0 / d.ratio, ev};
      continue;
    }
    const auto& hp = host_pairs[h];
    if (!d.late && hp[0] && static_cast<double>(hp[1]) / hp[0] >= 0.5) continue;  // the network is slow too
    r.blames.push_back({h, "host_delay", 1.0 - 1.0 / d.ratio, d.evidence});
  }
  st.hosts_delayed.clear();
  for (const auto& b : r.blames)
    if (b.kind == "host_delay") st.hosts_delayed.insert(b.element);
  st.hosts_blamed.clear();
  for (const auto& b : r.blames)
    if (b.kind == "host") st.hosts_blamed.insert(b.element);
  r.stats = {{"probes", n_ud}, {"failures", f_ud}, {"hop_probes", n_hop},
             {"rtt_pairs", pairs.size()},
             {"rtt_pairs_anomalous", std::count_if(pairs.begin(), pairs.end(), [](const auto& x) { return std::get<2>(x); })}};
  return r;
}

nlohmann::json step_json(const StepResult& s) {
  nlohmann::json b = nlohmann::json::array();
  for (const auto& x : s.blames)
    b.push_back({{"element", x.element}, {"kind", x.kind}, {"confidence", x.confidence},
                 {"evidence", x.evidence}});
  return {{"t", s.t}, {"blames", b}, {"rtt_anomalies", s.rtt_anomalies}, {"stats", s.stats}};
}

std::string step_text(const StepResult& s, const Topology&) {
  std::string out = fmt::format("window ending {:.1f}: {} probes, {} failed, {} TTL-limited\n", s.t,
                                s.stats.value("probes", 0u), s.stats.value("failures", 0u),
                                s.stats.value("hop_probes", 0u));
  if (s.blames.empty()) out += "  nothing to blame\n";
  for (const auto& b : s.blames) {
    if (b.kind == "host_delay") {
      out += fmt::format("  {}: host delay, not the network (confidence {:.2f}): {}\n", b.element,
                         b.confidence, b.evidence.dump());
    } else {
      out += fmt::format("  {}: {} (confidence {:.2f}): {}\n", b.element,
                         b.kind == "host" ? "host/NIC" : "fabric link", b.confidence, b.evidence.dump());
    }
  }
  for (const auto& a : s.rtt_anomalies)
    out += fmt::format("  RTT anomaly {} -> {}: {:.1f}x baseline\n", a["src"].get<std::string>(),
                       a["dst"].get<std::string>(), a["ratio"].get<double>());
  return out;
}

}  // namespace sroce::pingmesh
