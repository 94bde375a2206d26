// Topologies, traffic generators, the flow runner (RC WRITEs on the real
// engine) and the FCT metrics: known small cases with known results.
#include <catch2/catch.hpp>
#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "sroce/sim/flows.h"
#include "sroce/sim/metrics.h"
#include "sroce/sim/topology.h"
#include "sroce/sim/traffic.h"

using namespace sroce;
using namespace sroce::sim;

namespace {

// A small WebSearch-like table of our own (so the test does not depend on
// the data directory): heavy tail, mean computable by hand.
FlowSizeCdf test_cdf() {
  auto c = FlowSizeCdf::from_rows({{0, 0}, {10'000, 50}, {100'000, 90}, {1'000'000, 100}});
  REQUIRE(c);
  return *c;
}

struct Fabric {
  Simulator sim;
  Network net{sim};
  LeafSpine ls;
  Fabric(uint32_t leaves, uint32_t per_leaf, uint32_t spines, const SwitchConfig& sw,
         uint64_t arena = 8u << 20, uint64_t seed = 5)
      : sim(seed) {
    LeafSpineConfig c;
    c.leaves = leaves;
    c.hosts_per_leaf = per_leaf;
    c.spines = spines;
    c.sw = sw;
    HostConfig hc;
    hc.arena_bytes = arena;
    hc.engine.icrc_offload = true;
    ls = build_leaf_spine(net, c, hc);
  }
};

FlowRunnerConfig runner_cfg(bool verify) {
  FlowRunnerConfig fc;
  fc.qp.mtu = Mtu::k4096;
  fc.qp.send_wr = 256;
  fc.chunk_bytes = 256u << 10;
  fc.verify = verify;
  return fc;
}

SwitchConfig lossless(uint64_t buffer) {
  SwitchConfig sw;
  sw.mmu = true;
  sw.buffer_bytes = buffer;
  sw.pfc.enabled = true;
  sw.pfc.xoff_bytes = 48u << 10;
  sw.pfc.xon_bytes = 40u << 10;
  return sw;
}

}  // namespace

TEST_CASE("flow-size CDF: rows checked, mean exact, samples follow the table", "[sim][traffic]") {
  CHECK_FALSE(FlowSizeCdf::from_rows({{0, 0}, {10, 50}}));            // does not reach 100
  CHECK_FALSE(FlowSizeCdf::from_rows({{0, 10}, {10, 100}}));          // does not start at 0
  CHECK_FALSE(FlowSizeCdf::from_rows({{0, 0}, {10, 60}, {5, 100}}));  // size decreases
  const FlowSizeCdf c = test_cdf();
  // 0.5 * 5000 + 0.4 * 55000 + 0.1 * 550000
  CHECK(c.mean() == Approx(2'500 + 22'000 + 55'000));
  Rng rng(9);
  const int n = 200'000;
  int below10k = 0, below100k = 0;
  double sum = 0;
  for (int i = 0; i < n; ++i) {
    const uint64_t s = c.sample(rng);
    REQUIRE(s >= 1);
    REQUIRE(s <= 1'000'000);
    below10k += s <= 10'000;
    below100k += s <= 100'000;
    sum += static_cast<double>(s);
  }
  CHECK(below10k / double(n) == Approx(0.5).margin(0.01));
  CHECK(below100k / double(n) == Approx(0.9).margin(0.01));
  CHECK(sum / n == Approx(c.mean()).epsilon(0.02));
}

TEST_CASE("the shipped flow-size tables load and have the documented means", "[sim][traffic]") {
  // The tables ship in the repository (userspace/sim/data/flow-size-cdf): never a skip.
  auto ws = FlowSizeCdf::named("websearch");
  INFO("looked in " << FlowSizeCdf::default_dir());
  REQUIRE(ws);
  // ORIGIN.md: WebSearch mean 1,711,250 B; FbHdp 120,421 B; AliStorage 40,870 B.
  CHECK(ws->mean() == Approx(1'711'250).epsilon(0.001));
  CHECK(FlowSizeCdf::named("fbhdp")->mean() == Approx(120'421).epsilon(0.01));
  CHECK(FlowSizeCdf::named("alistorage")->mean() == Approx(40'870).epsilon(0.01));
  CHECK_FALSE(FlowSizeCdf::named("nope"));
  CHECK(FlowSizeCdf::named("googlerpc")->mean() == Approx(2'892).epsilon(0.01));
  // An explicit directory wins, and a wrong one is a clear error, not a silent default.
  auto missing = FlowSizeCdf::named("websearch", "/nonexistent-flow-cdf-dir");
  REQUIRE_FALSE(missing);
  CHECK(missing.error().code == ENOENT);
}

TEST_CASE("Poisson arrivals: offered load within a few % of the target", "[sim][traffic]") {
  const FlowSizeCdf c = test_cdf();
  for (double load : {0.3, 0.5, 0.8}) {
    Rng rng(11);
    const uint32_t hosts = 64;
    const uint64_t bps = 100'000'000'000ull;
    const Duration T = Duration::millis(20);
    const auto flows = poisson_flows(hosts, c, load, bps, T, rng);
    double bytes = 0;
    std::vector<uint64_t> per_host(hosts);
    for (size_t i = 0; i < flows.size(); ++i) {
      const FlowSpec& f = flows[i];
      REQUIRE(f.src != f.dst);
      REQUIRE(f.start.ps >= 0);
      REQUIRE(f.start.ps < T.ps);
      if (i > 0) REQUIRE(flows[i - 1].start <= f.start);
      bytes += static_cast<double>(f.bytes);
      per_host[f.src] += f.bytes;
    }
    const double offered = bytes * 8 / (static_cast<double>(bps) * hosts * 20e-3);
    INFO("load " << load << " offered " << offered << " flows " << flows.size());
    CHECK(offered == Approx(load).epsilon(0.03));
    // Every host offers load (open loop on every host).
    for (uint64_t b : per_host) CHECK(b > 0);
  }
}

TEST_CASE("permutation, incast and all-to-all generators", "[sim][traffic]") {
  Rng rng(3);
  const auto p = permutation_flows(16, 1000, rng);
  REQUIRE(p.size() == 16);
  std::vector<int> in(16);
  for (const auto& f : p) {
    CHECK(f.src != f.dst);
    ++in[f.dst];
  }
  for (int c : in) CHECK(c == 1);  // a permutation: everybody receives once
  const auto ic = incast_flows({1, 2, 3, 0}, 0, 500);
  CHECK(ic.size() == 3);
  const auto u = all_to_all_flows(8, 7000, 0, rng);
  REQUIRE(u.size() == 56);
  for (const auto& f : u) CHECK(f.bytes == 1000);
  const auto s = all_to_all_flows(16, 1'500'000, 1.0, rng);
  std::vector<uint64_t> to(16);
  uint64_t total = 0;
  for (const auto& f : s) {
    to[f.dst] += f.bytes;
    total += f.bytes;
  }
  CHECK(static_cast<double>(total) == Approx(16 * 1'500'000).epsilon(0.001));
  const uint64_t hot = *std::max_element(to.begin(), to.end());
  const uint64_t cold = *std::min_element(to.begin(), to.end());
  // Zipf s = 1 over 16: the hottest gets 1/(H_16/16) = 4.7x the mean, the
  // coldest (1/16)/(H_16/16) = 0.3x.
  CHECK(hot > 4 * total / 16);
  CHECK(cold < total / 16 / 3);
}

TEST_CASE("fat-tree k=4: 16 hosts, 20 switches, 4 core paths between pods; 128 hosts at k=8",
          "[sim][topology]") {
  Simulator sim(1);
  Network net(sim);
  FatTreeConfig c;
  c.k = 4;
  HostConfig hc;
  hc.arena_bytes = 1u << 20;
  FatTree t = build_fat_tree(net, c, hc);
  CHECK(t.hosts.size() == 16);
  CHECK(t.edges.size() == 8);
  CHECK(t.aggs.size() == 8);
  CHECK(t.cores.size() == 4);
  const Gid remote = t.hosts[15]->addr();
  CHECK(t.edges[0]->next_hops(remote).size() == 2);  // both aggregation switches
  CHECK(t.aggs[0]->next_hops(remote).size() == 2);   // both of its cores
  CHECK(t.cores[0]->next_hops(remote).size() == 1);
  CHECK(t.edges[0]->next_hops(t.hosts[1]->addr()).size() == 1);   // same edge: direct
  CHECK(first_path(net, *t.hosts[0], *t.hosts[15]).size() == 6);  // 5 switches, 6 links
  CHECK(first_path(net, *t.hosts[0], *t.hosts[1]).size() == 2);
  CHECK(first_path(net, *t.hosts[0], *t.hosts[2]).size() == 4);

  Simulator sim8(1);
  Network net8(sim8);
  c.k = 8;
  hc.arena_bytes = 4096;
  FatTree t8 = build_fat_tree(net8, c, hc);
  CHECK(t8.hosts.size() == 128);
  CHECK(t8.cores.size() == 16);
  CHECK(t8.aggs[0]->next_hops(t8.hosts[127]->addr()).size() == 4);
  CHECK(t8.hosts[127]->addr() == host_gid(128));
}

TEST_CASE("leaf-spine with 128 hosts: 8 leaves x 16, 16 spines, distinct addresses",
          "[sim][topology]") {
  Simulator sim(1);
  Network net(sim);
  LeafSpineConfig c;
  c.leaves = 8;
  c.hosts_per_leaf = 16;
  c.spines = 16;
  HostConfig hc;
  hc.arena_bytes = 4096;
  LeafSpine t = build_leaf_spine(net, c, hc);
  REQUIRE(t.hosts.size() == 128);
  CHECK(t.leaves[0]->next_hops(t.hosts[127]->addr()).size() == 16);
  CHECK(net.node_by_addr(host_gid(128)) == t.hosts[127]);
  CHECK(host_gid(300) != host_gid(44));  // past 255 the address carries
}

TEST_CASE("ideal FCT: a lone flow on an idle fabric has slowdown 1", "[sim][metrics]") {
  Fabric f(2, 2, 2, lossless(4u << 20));
  FlowRunner run(f.net, f.ls.hosts, runner_cfg(false));
  REQUIRE(run.setup());
  const std::vector<uint64_t> sizes = {100, 4000, 100'000, 1'000'000};
  std::vector<FlowSpec> specs;
  for (size_t i = 0; i < sizes.size(); ++i)
    specs.push_back({0, 3, sizes[i], Time{} + Duration::micros(static_cast<int64_t>(200 * i))});
  REQUIRE(run.add(specs));
  f.sim.run(Time{} + Duration::millis(5));
  REQUIRE(run.completed() == sizes.size());
  std::vector<Duration> ideal;
  for (const auto& s : specs)
    ideal.push_back(
        ideal_fct(first_path(f.net, *f.ls.hosts[0], *f.ls.hosts[3]), s.bytes, 4096, 256u << 10));
  const FctReport r = fct_report(run.flows(), ideal);
  for (size_t i = 0; i < specs.size(); ++i)
    UNSCOPED_INFO("flow " << i << " bytes " << specs[i].bytes << " fct_ps "
                          << (run.flows()[i].end - specs[i].start).ps << " ideal_ps "
                          << ideal[i].ps);
  CHECK(r.completed == sizes.size());
  CHECK(r.slowdown.max < 1.05);
  CHECK(r.slowdown.p50 >= 0.999);
  // The single-packet flow is exact: 4 links of 1 us, there and back.
  const double fct0 = static_cast<double>((run.flows()[0].end - run.flows()[0].spec.start).ps);
  CHECK(fct0 == Approx(static_cast<double>(ideal[0].ps)).epsilon(1e-6));
  CHECK(fct0 > 8e6);
}

TEST_CASE("an N-to-1 incast without CC completes with every byte delivered (PFC, lossless)",
          "[sim][workload][pfc]") {
  Fabric f(2, 4, 2, lossless(512u << 10), 16u << 20);
  FlowRunner run(f.net, f.ls.hosts, runner_cfg(true));
  REQUIRE(run.setup());
  REQUIRE(run.add(incast_flows({1, 2, 3, 4, 5, 6, 7}, 0, 1'000'000)));
  f.sim.run(Time{} + Duration::millis(20));
  INFO(run.first_error());
  REQUIRE(run.completed() == 7);
  CHECK(run.errors() == 0);
  std::string why;
  CHECK(run.verify(&why));
  INFO(why);
  uint64_t drops = 0, pauses = 0;
  for (const auto& l : f.net.links()) {
    drops += l->stats().queue_drops + l->stats().lost();
    pauses += l->stats().pfc_pauses;
  }
  CHECK(drops == 0);
  CHECK(pauses > 0);
  // 7 MB through one 100 Gbit/s port: at least 560 us, and not much more
  // (the bottleneck stays busy: PFC pauses upstream, it never idles the port).
  Time last{};
  for (const auto& fl : run.flows()) last = std::max(last, fl.end);
  const double us = static_cast<double>(last.ps) * 1e-6;
  CHECK(us > 560);
  CHECK(us < 560 * 1.15);
  // ... with a bounded queue: the port toward the receiver never holds more
  // than its 5 ingress ports' xoff plus headroom (2 x 1 us x 100 Gbit/s and
  // two frames each).
  const Link* bottleneck = f.net.link_between(*f.ls.leaves[0], *f.ls.hosts[0]);
  REQUIRE(bottleneck != nullptr);
  CHECK(bottleneck->stats().max_queue_bytes > (48u << 10));
  CHECK(bottleneck->stats().max_queue_bytes <= 5 * ((48u << 10) + 25'000 + 2 * 4200));
  for (Host* h : f.ls.hosts) CHECK(h->stats().stalls == 0);
}

TEST_CASE("a 4-to-1 incast drops without PFC and is lossless with it, on the same buffer",
          "[sim][workload][pfc]") {
  auto run_once = [](bool pfc, uint64_t* drops, uint64_t* pauses) {
    // Lossless needs 4 x (xoff + headroom) below the buffer: 4 x (24 + 27) KB
    // < 256 KB. Without PFC the dynamic threshold stops the queue at 128 KB.
    SwitchConfig sw = lossless(256u << 10);
    sw.pfc.xoff_bytes = 24u << 10;
    sw.pfc.xon_bytes = 16u << 10;
    sw.pfc.enabled = pfc;
    Fabric f(1, 5, 1, sw, 8u << 20);
    FlowRunner run(f.net, f.ls.hosts, runner_cfg(true));
    REQUIRE(run.setup());
    REQUIRE(run.add(incast_flows({1, 2, 3, 4}, 0, 500'000)));
    f.sim.run(Time{} + Duration::millis(200));
    INFO(run.first_error());
    // Go-back-N recovers the drops; data is intact either way.
    REQUIRE(run.completed() == 4);
    std::string why;
    CHECK(run.verify(&why));
    *drops = 0;
    *pauses = 0;
    for (const auto& l : f.net.links()) {
      *drops += l->stats().queue_drops;
      *pauses += l->stats().pfc_pauses;
    }
  };
  uint64_t d0, p0, d1, p1;
  run_once(false, &d0, &p0);
  run_once(true, &d1, &p1);
  CHECK(d0 > 0);
  CHECK(p0 == 0);
  CHECK(d1 == 0);
  CHECK(p1 > 0);
}

TEST_CASE("trimming with engine hosts: the incast's overflow is trimmed, not dropped; data intact",
          "[sim][workload][trim]") {
  SwitchConfig sw;
  sw.mmu = true;
  sw.buffer_bytes = 128u << 10;
  sw.trim = true;
  Fabric f(1, 5, 1, sw, 8u << 20);
  FlowRunner run(f.net, f.ls.hosts, runner_cfg(true));
  REQUIRE(run.setup());
  REQUIRE(run.add(incast_flows({1, 2, 3, 4}, 0, 500'000)));
  f.sim.run(Time{} + Duration::millis(200));
  INFO(run.first_error());
  REQUIRE(run.completed() == 4);
  std::string why;
  CHECK(run.verify(&why));
  uint64_t trimmed = 0, drops = 0;
  for (const auto& l : f.net.links()) {
    trimmed += l->stats().trimmed;
    drops += l->stats().queue_drops;
  }
  CHECK(trimmed > 0);
  CHECK(drops == 0);
  // Each trimmed header reached the receiver (which, until the engine's lossy
  // mode knows PacketMeta::trimmed, drops it as a short packet).
  CHECK(f.ls.leaves[0]->stats().trimmed == trimmed);
}

TEST_CASE("leaf-spine per-spine link overrides give paths of different delay", "[sim][topology]") {
  Simulator sim(1);
  Network net(sim);
  LeafSpineConfig c;
  c.spines = 4;
  for (int s = 0; s < 3; ++s) {  // spine 3 keeps the default
    LinkConfig l;
    l.delay = Duration::micros(1 + s);
    c.uplink_per_spine.push_back(l);
    l.delay = Duration::micros(10 + s);
    c.downlink_per_spine.push_back(l);
  }
  HostConfig hc;
  hc.arena_bytes = 4096;
  LeafSpine t = build_leaf_spine(net, c, hc);
  CHECK(t.up[0][2]->config().delay == Duration::micros(3));
  CHECK(t.up[1][1]->config().delay == Duration::micros(2));
  CHECK(t.down[2][0]->config().delay == Duration::micros(12));
  CHECK(t.down[3][1]->config().delay == c.downlink.delay);
}

TEST_CASE("a workload run is a function of its seed", "[sim][workload]") {
  auto run_once = [](uint64_t seed) {
    SwitchConfig sw = lossless(4u << 20);
    sw.ecn.enabled = true;  // RED draws from the switch's own stream
    sw.int_stamp = true;
    Fabric f(2, 4, 2, sw, 4u << 20, seed);
    FlowRunner run(f.net, f.ls.hosts, runner_cfg(false));
    REQUIRE(run.setup());
    Rng rng(seed);
    REQUIRE(run.add(poisson_flows(8, test_cdf(), 0.6, 100'000'000'000ull, Duration::micros(300), rng)));
    f.sim.run(Time{} + Duration::millis(3));
    std::vector<int64_t> ends;
    for (const auto& fl : run.flows()) ends.push_back(fl.end.ps);
    ends.push_back(static_cast<int64_t>(f.sim.events_run()));
    return ends;
  };
  const auto a = run_once(21);
  CHECK(a.size() > 10);
  CHECK(a == run_once(21));
  CHECK(a != run_once(22));
}
