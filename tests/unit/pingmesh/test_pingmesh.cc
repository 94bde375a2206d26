// pingmesh without a fabric: the pinglist's arithmetic and symmetry, the probe wire format,
// and the analyzer on synthetic runs of a 4-host, 2-leaf, 4-spine fabric whose faults are
// known (a lossy spine link, a dead link, a host dropping half its packets, a host slow to
// answer, a clean run).
#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <random>
#include <set>

#include "analyze.h"
#include "probe_wire.h"
#include "topology.h"

using namespace sroce::pingmesh;

namespace {

Topology topo4() {
  nlohmann::json j = {
      {"hosts",
       {{"h1", {{"addr", "10.1.1.2"}, {"tor", "l1"}}},
        {"h2", {{"addr", "10.1.2.2"}, {"tor", "l1"}}},
        {"h3", {{"addr", "10.1.3.2"}, {"tor", "l2"}}},
        {"h4", {{"addr", "10.1.4.2"}, {"tor", "l2"}}}}},
      {"nodes", {{"10.0.1.1", "l1"}, {"10.0.2.1", "l2"}, {"10.9.1.1", "s1"}, {"10.9.2.1", "s2"},
                 {"10.9.3.1", "s3"}, {"10.9.4.1", "s4"}}}};
  return *topology_from_json(j);
}

std::string addr_of(const Topology& t, const std::string& n) { return t.host_by_name(n)->addr; }
std::string leaf_addr(const std::string& l) { return l == "l1" ? "10.0.1.1" : "10.0.2.1"; }

// A synthetic run: every pinglist pair probed twice a second, TTL 1 and 2 traced once a
// second, for 40 s; `drop(edge, t)` gives each directed edge's loss ("l2>s3", "h2>l1" ...).
struct Sim {
  Topology t = topo4();
  Records r;
  std::mt19937_64 rng{7};
  std::function<double(const std::string&, double)> drop = [](const std::string&, double) { return 0.0; };
  std::function<int64_t(const std::string&, double)> resp = [](const std::string&, double) { return 50000; };
  // Network RTT of a probe (src, dst, t), ns.
  std::function<int64_t(const std::string&, const std::string&, double)> rtt =
      [](const std::string&, const std::string&, double) { return 100000; };
  // Loss no link explains: a probe (src, dst, kind, t) lost with this probability besides.
  std::function<double(const std::string&, const std::string&, const std::string&, double)> stray =
      [](const std::string&, const std::string&, const std::string&, double) { return 0.0; };
  AnalyzeOptions opt{};
  std::function<int(const std::string&, const std::string&, uint16_t, double)> spine_of =
      [](const std::string& s, const std::string& d, uint16_t p, double) {
        return static_cast<int>((std::hash<std::string>{}(s + d) ^ p * 2654435761u) % 4) + 1;
      };

  std::vector<std::string> nodes(const std::string& s, const std::string& d, uint16_t p, double tm) {
    const std::string ls = t.host_by_name(s)->tor, ld = t.host_by_name(d)->tor;
    if (ls == ld) return {s, ls, d};
    return {s, ls, "s" + std::to_string(spine_of(s, d, p, tm)), ld, d};
  }
  bool pass(const std::vector<std::string>& n, double tm) {
    std::uniform_real_distribution<double> u(0, 1);
    for (size_t i = 0; i + 1 < n.size(); ++i)
      if (u(rng) < drop(n[i] + ">" + n[i + 1], tm)) return false;
    return true;
  }
  void run(double seconds) {
    std::vector<std::tuple<std::string, std::string, uint16_t, std::string>> pairs;
    for (const auto& h : t.hosts) {
      auto pl = *make_pinglist(t, h.name, {});
      for (const auto& x : pl["targets"])
        for (const auto& p : x["sports"]) pairs.emplace_back(h.name, x["name"], p.get<uint16_t>(), x["kind"]);
    }
    std::set<std::string> learnt;
    for (double tm = 0; tm < seconds; tm += 0.5) {
      for (const auto& [s, d, p, kind] : pairs) {
        auto path_rec = [&](const std::string& a, const std::string& b) {
          const std::string k = a + b + std::to_string(p) + std::to_string(spine_of(a, b, p, tm));
          if (!learnt.insert(k).second) return;
          auto n = nodes(a, b, p, tm);
          PathRec pr{tm, addr_of(t, a), addr_of(t, b), p, {}};
          for (size_t i = 1; i + 1 < n.size(); ++i)
            pr.hops.push_back(n[i][0] == 'l' ? leaf_addr(n[i]) : "10.9." + n[i].substr(1) + ".1");
          r.paths.push_back(pr);
        };
        path_rec(s, d);
        path_rec(d, s);
        auto fwd = nodes(s, d, p, tm), rev = nodes(d, s, p, tm);
        const double ps = stray(s, d, kind, tm);  // drawn only when set: the other runs stay as they were
        const bool stray_ok = ps <= 0 || std::uniform_real_distribution<double>(0, 1)(rng) >= ps;
        ProbeRec pr{tm, addr_of(t, s), addr_of(t, d), kind, p,
                    pass(fwd, tm) && pass(rev, tm) && pass(rev, tm) && stray_ok, rtt(s, d, tm), resp(d, tm), 40000};
        r.probes.push_back(pr);
        if (std::fmod(tm, 1.0) != 0) continue;
        for (unsigned ttl = 1; ttl <= std::min<size_t>(2, fwd.size() - 2); ++ttl) {
          std::vector<std::string> there(fwd.begin(), fwd.begin() + ttl + 1), back(there.rbegin(), there.rend());
          const bool ok = pass(there, tm) && pass(back, tm);
          const std::string& hn = fwd[ttl];
          r.hops.push_back({tm, addr_of(t, s), addr_of(t, d), ok ? (hn[0] == 'l' ? leaf_addr(hn) : "10.9." + hn.substr(1) + ".1") : "",
                            p, ttl, ok});
        }
      }
    }
    finish_records(r);
  }
  std::set<std::string> blamed_at(double at) {
    Analyzer a(t, r, opt);
    AnalyzeState st;
    std::set<std::string> out;
    for (double x = 11; x <= at; x += 1) {
      auto s = a.step(x, st);
      if (x == at)
        for (const auto& b : s.blames) out.insert(b.label());
    }
    return out;
  }
  std::set<std::string> blamed_ever(double from, double to) {
    Analyzer a(t, r, opt);
    AnalyzeState st;
    std::set<std::string> out;
    for (double x = from; x <= to; x += 1)
      for (const auto& b : a.step(x, st).blames) out.insert(b.label());
    return out;
  }
};

}  // namespace

TEST_CASE("coupon collector: ports per inter-ToR peer for 0.99 coverage", "[pingmesh]") {
  CHECK(coupon_ports(1, 0.99) == 1);
  CHECK(coupon_ports(2, 0.99) == 8);    // 1 - 2 * 2^-m >= 0.99 from m = 8
  CHECK(coupon_ports(4, 0.99) == 21);   // 4 * 0.75^21 = 0.0095 (less the tiny other terms)
  CHECK(coupon_ports(4, 0.9) == 13);
  CHECK(coupon_ports(8, 0.99) >= 50);
}

TEST_CASE("pinglists are symmetric and name ToR-mesh and inter-ToR peers", "[pingmesh]") {
  const Topology t = topo4();
  CHECK(t.ecmp_width == 4);
  auto p1 = *make_pinglist(t, "h1", {});
  auto p3 = *make_pinglist(t, "h3", {});
  std::map<std::string, nlohmann::json> by1, by3;
  for (const auto& x : p1["targets"]) by1[x["name"]] = x;
  for (const auto& x : p3["targets"]) by3[x["name"]] = x;
  REQUIRE(by1.size() == 3);
  CHECK(by1["h2"]["kind"] == "tor");
  CHECK(by1["h2"]["sports"].size() == 1);
  CHECK(by1["h3"]["kind"] == "inter");
  CHECK(by1["h3"]["sports"].size() == 21);
  CHECK(by1["h3"]["sports"] == by3["h1"]["sports"]);  // the reverse path of each probe is traced
  std::set<uint16_t> ports;
  for (const auto& p : by1["h3"]["sports"]) {
    CHECK(p.get<unsigned>() > 0xc000);
    ports.insert(p.get<uint16_t>());
  }
  CHECK(ports.size() == 21);
  CHECK(p1["rates"]["inter"] == 40.0);  // 10 probes/s per uplink of the ToR
  CHECK(!make_pinglist(t, "h9", {}));
  // Services: a live 5-tuple of this host becomes a target on its own source port.
  PinglistOptions o;
  o.services = nlohmann::json::parse(
      R"([{"dir":"egress","src":"10.1.1.2","dst":"10.1.3.2","sport":50001,"dqpn":17},
          {"dir":"ingress","src":"10.1.3.2","dst":"10.1.1.2","sport":50002,"dqpn":18},
          {"dir":"egress","src":"10.1.1.2","dst":"10.7.7.7","sport":50003,"dqpn":19}])");
  auto ps = *make_pinglist(t, "h1", o);
  unsigned services = 0;
  for (const auto& x : ps["targets"])
    if (x["kind"] == "service") {
      ++services;
      CHECK(x["sports"][0] == 50001);
      CHECK(x["name"] == "h3");
    }
  CHECK(services == 1);
}

TEST_CASE("topology from sroce-fabric status --json", "[pingmesh]") {
  auto j = nlohmann::json::parse(R"({"hosts":{"h1":{"addr":"10.1.1.2","leaf":"l1"},"h2":{"addr":"10.1.2.2","leaf":"l2"}},
    "links":[{"name":"h1-l1","a":{"node":"h1","addr":"10.1.1.2"},"b":{"node":"l1","addr":"10.1.1.1"}},
             {"name":"l1-s1","a":{"node":"l1","addr":"10.2.1.5"},"b":{"node":"s1","addr":"10.2.1.6"}},
             {"name":"l1-s2","a":{"node":"l1","addr":"10.2.1.9"},"b":{"node":"s2","addr":"10.2.1.10"}}]})");
  auto t = topology_from_json(j);
  REQUIRE(t);
  CHECK(t->ecmp_width == 2);
  CHECK(t->node("10.2.1.10") == "s2");
  CHECK(t->node("10.1.2.2") == "h2");
  CHECK(t->node("10.9.9.9") == "10.9.9.9");
  CHECK(!topology_from_json(nlohmann::json::parse(R"({"hosts":{"h1":{}}})")));
}

TEST_CASE("probe wire format and flow label <-> UDP source port", "[pingmesh]") {
  ProbeMsg m{MsgType::kAck2, 0x1234, 0x0102030405060708ull, 11, 22, 33};
  uint8_t b[kProbeLen];
  encode(m, b);
  ProbeMsg d;
  REQUIRE(decode(b, sizeof(b), d));
  CHECK(d.type == MsgType::kAck2);
  CHECK(d.reply_label == 0x1234);
  CHECK(d.seq == 0x0102030405060708ull);
  CHECK(d.t3 == 11);
  CHECK(d.t4 == 22);
  CHECK(d.sent_wall == 33);
  CHECK(!decode(b, sizeof(b) - 1, d));
  b[0] ^= 1;
  CHECK(!decode(b, sizeof(b), d));
  b[0] ^= 1;
  b[5] = 9;
  CHECK(!decode(b, sizeof(b), d));
  for (unsigned p = 0xc001; p <= 0xffff; ++p) CHECK(sport_for_label(label_for_sport(static_cast<uint16_t>(p))) == p);
  CHECK(label_for_sport(0xc000) == 0);
  CHECK(sport_for_label(0x12345) == (0xc000 | (0x2345 ^ 0x4)));
}

TEST_CASE("records: JSON lines, garbage counted", "[pingmesh]") {
  Records r;
  add_record(r, R"({"type":"probe","t":5000000000,"src":"10.1.1.2","dst":"10.1.3.2","sport":49153,"kind":"inter","status":"ok","rtt_ns":100,"resp_ns":50,"prober_ns":40})");
  add_record(r, R"({"type":"probe","t":4000000000,"src":"10.1.1.2","dst":"10.1.3.2","sport":49153,"kind":"inter","status":"timeout"})");
  add_record(r, R"({"type":"hop","t":4000000000,"src":"10.1.1.2","dst":"10.1.3.2","sport":49153,"ttl":2,"hop":null,"ok":false})");
  add_record(r, R"({"type":"path","t":3000000000,"src":"10.1.1.2","dst":"10.1.3.2","sport":49153,"hops":["10.0.1.1",null,"10.0.2.1"]})");
  add_record(r, "not json");
  add_record(r, R"({"type":"probe","t":1})");
  add_record(r, R"({"type":"start","t":1,"host":"h1"})");
  finish_records(r);
  REQUIRE(r.probes.size() == 2);
  CHECK(!r.probes[0].ok);
  CHECK(r.probes[1].rtt_ns == 100);
  CHECK(r.t_min == 4.0);
  CHECK(r.t_max == 5.0);
  REQUIRE(r.paths.size() == 1);
  CHECK(r.paths[0].hops[1].empty());
  CHECK(r.hops.size() == 1);
  CHECK(r.bad_lines == 2);
}

TEST_CASE("binomial tails", "[pingmesh]") {
  CHECK(binom_upper(10, 0, 0.1) == 1.0);
  CHECK(binom_upper(10, 10, 0.5) == Approx(1.0 / 1024));
  CHECK(binom_lower(10, 0, 0.5) == Approx(1.0 / 1024));
  CHECK(binom_lower(100, 0, 0.07) == Approx(std::pow(0.93, 100)));
}

TEST_CASE("analyze: a clean run blames nothing", "[pingmesh]") {
  Sim s;
  s.run(40);
  CHECK(s.blamed_ever(11, 40).empty());
}

TEST_CASE("analyze: 5 % loss on a spine link blames that link, not its twin", "[pingmesh]") {
  Sim s;
  s.drop = [](const std::string& e, double t) { return t >= 20 && (e == "l2>s3" || e == "s3>l2") ? 0.05 : 0.0; };
  s.run(40);
  CHECK(s.blamed_ever(11, 19).empty());
  CHECK(s.blamed_at(30) == std::set<std::string>{"l2-s3/link"});
}

TEST_CASE("analyze: a dead link (routing moved one leaf off it) blames that link", "[pingmesh]") {
  Sim s;
  // After t=20 l1 no longer hashes onto s2; l2 still does and s2 drops what goes to l1.
  s.spine_of = [](const std::string& a, const std::string& b, uint16_t p, double t) {
    int k = static_cast<int>((std::hash<std::string>{}(a + b) ^ p * 2654435761u) % 4) + 1;
    if (t >= 20 && (a == "h1" || a == "h2") && k == 2) k = 1 + (p % 2 ? 2 : 3);
    return k;
  };
  s.drop = [](const std::string& e, double t) { return t >= 20 && e == "s2>l1" ? 1.0 : 0.0; };
  s.run(40);
  CHECK(s.blamed_at(30) == std::set<std::string>{"l1-s2/link"});
}

// fabric.pingmesh's old flake (docs/pingmesh.md): while routes converged after l1-s2 died,
// the far ToR's h4 also lost inter-ToR probes on paths its traces learnt a moment late, so
// those failures crossed no blamed link and the second voting round named h4/host. Its
// ToR-mesh probes stayed clean all along, which clears a host (R-Pingmesh judges an RNIC by
// its ToR-mesh). The old rule (ToR-mesh ignored) still double-blames the same run.
TEST_CASE("analyze: a dead link's leftovers on a far host do not blame that host", "[pingmesh]") {
  Sim s;
  s.spine_of = [](const std::string& a, const std::string& b, uint16_t p, double t) {
    int k = static_cast<int>((std::hash<std::string>{}(a + b) ^ p * 2654435761u) % 4) + 1;
    if (t >= 20 && (a == "h1" || a == "h2") && k == 2) k = 1 + (p % 2 ? 2 : 3);
    return k;
  };
  s.drop = [](const std::string& e, double t) { return t >= 20 && e == "s2>l1" ? 1.0 : 0.0; };
  // 3 % of h4's inter-ToR probes lost besides (the real run: 30 of h4's 1 301 probes, 2.3 %).
  s.stray = [](const std::string& a, const std::string& b, const std::string& kind, double t) {
    return t >= 20 && kind == "inter" && (a == "h4" || b == "h4") ? 0.03 : 0.0;
  };
  s.run(40);
  std::set<std::string> old_rule, now;
  s.opt.tor_mesh_min = 1u << 30;  // never enough ToR-mesh probes: voting alone, as before
  old_rule = s.blamed_ever(21, 40);
  s.opt = AnalyzeOptions{};
  now = s.blamed_ever(21, 40);
  CHECK(old_rule.count("h4/host") == 1);  // the synthetic run reproduces the double blame
  CHECK(old_rule.count("l1-s2/link") == 1);
  CHECK(now.count("h4/host") == 0);
  CHECK(now.count("l1-s2/link") == 1);
  CHECK(s.blamed_at(30) == std::set<std::string>{"l1-s2/link"});
}

TEST_CASE("analyze: a host dropping its packets is the host, with or without ToR peers' help", "[pingmesh]") {
  Sim s;
  s.drop = [](const std::string& e, double t) { return t >= 20 && (e == "h2>l1" || e == "l1>h2") ? 0.3 : 0.0; };
  s.run(40);
  CHECK(s.blamed_at(30) == std::set<std::string>{"h2/host"});
}

TEST_CASE("analyze: a host slow to answer is host delay, not the network", "[pingmesh]") {
  Sim s;
  s.resp = [](const std::string& h, double t) -> int64_t { return t >= 20 && h == "h4" ? 150000000 : 50000; };
  s.run(40);
  CHECK(s.blamed_at(30) == std::set<std::string>{"h4/host_delay"});
  CHECK(s.blamed_ever(11, 19).empty());
}

// fabric.pingmesh's busy-host flake (docs/pingmesh.md): h4's agent stalled 400 ms of every
// 500, so besides its responder delay some probes to it timed out (its ToR-mesh ones too)
// and the software-stamped network RTT of its pairs rose a few times. The loss voting or the
// RTT rule then named h4/host as well as, at other steps, h4/host_delay. A host delay that
// rose far more than its pairs' RTT explains both: the old rule (no dominance) double-blames
// the same run, the rule now names host delay alone at every step.
TEST_CASE("analyze: a stalled host's late answers and RTT are host delay, not the host", "[pingmesh]") {
  Sim s;
  auto busy = [](double t) { return t >= 20; };
  s.resp = [&](const std::string& h, double t) -> int64_t { return busy(t) && h == "h4" ? 136000000 : 50000; };
  s.rtt = [&](const std::string& a, const std::string& b, double t) -> int64_t {
    return busy(t) && (a == "h4" || b == "h4") ? 500000 : 100000;  // 5x: above rtt_enter
  };
  s.stray = [&](const std::string& a, const std::string& b, const std::string&, double t) {
    return busy(t) && (a == "h4" || b == "h4") ? 0.15 : 0.0;  // answers after the timeout
  };
  s.run(40);
  s.opt.delay_dominance = 1e300;  // the old rule: any "host" blame stands
  const auto old_rule = s.blamed_ever(21, 40);
  CHECK(old_rule.count("h4/host") == 1);  // the synthetic run reproduces the flake
  s.opt = AnalyzeOptions{};
  CHECK(s.blamed_ever(21, 40) == std::set<std::string>{"h4/host_delay"});
  CHECK(s.blamed_ever(11, 19).empty());
}

// The other side of that rule: a host whose link is slow and lossy (slow_nic) keeps its
// "host" blame: its own delays did not rise.
TEST_CASE("analyze: a slow, lossy host link stays the host when its delays are normal", "[pingmesh]") {
  Sim s;
  s.drop = [](const std::string& e, double t) { return t >= 20 && (e == "h2>l1" || e == "l1>h2") ? 0.3 : 0.0; };
  s.rtt = [](const std::string& a, const std::string& b, double t) -> int64_t {
    return t >= 20 && (a == "h2" || b == "h2") ? 2000000 : 100000;
  };
  s.run(40);
  CHECK(s.blamed_at(30) == std::set<std::string>{"h2/host"});
  CHECK(s.blamed_ever(21, 40).count("h2/host_delay") == 0);
}

// A load spike of the machine running every agent slows every host's answers alike: that is
// not one host's delay (fabric.pingmesh once named all four hosts as host delay while the
// stalled agent's host was the only one at fault).
TEST_CASE("analyze: a delay every host shares blames no host; the one standing out is", "[pingmesh]") {
  Sim s;
  s.resp = [](const std::string& h, double t) -> int64_t {
    if (t < 20) return 50000;
    return h == "h4" ? 250000000 : 30000000;  // all 600x their baseline; h4 8x more again
  };
  s.run(40);
  CHECK(s.blamed_at(30) == std::set<std::string>{"h4/host_delay"});
  s.resp = [](const std::string&, double t) -> int64_t { return t >= 20 ? 30000000 : 50000; };
  s.r = Records{};
  s.run(40);
  CHECK(s.blamed_ever(11, 40).empty());
  s.opt.delay_peer_factor = 0;  // without the comparison: every host
  CHECK(s.blamed_ever(21, 40).size() == 4);
}

// With the slow host's pairs explained by its blame, the RTT rule judges a second host only
// against enough pairs that touch neither: on 4 hosts, a load spike that slows h1's pairs to
// the far leaf while h2's NIC is lossy is not h1's fault.
TEST_CASE("analyze: the RTT rule needs other pairs to compare a host with", "[pingmesh]") {
  Sim s;
  s.drop = [](const std::string& e, double t) { return t >= 20 && (e == "h2>l1" || e == "l1>h2") ? 0.3 : 0.0; };
  s.rtt = [](const std::string& a, const std::string& b, double t) -> int64_t {
    const bool h1_far = (a == "h1" && (b == "h3" || b == "h4")) || (b == "h1" && (a == "h3" || a == "h4"));
    return t >= 20 && (a == "h2" || b == "h2" || h1_far) ? 2000000 : 100000;
  };
  s.run(40);
  CHECK(s.blamed_ever(25, 40) == std::set<std::string>{"h2/host"});
  s.opt.rtt_min_other_pairs = 0;  // without the rule: h1 too
  CHECK(s.blamed_ever(25, 40).count("h1/host") == 1);
}
