// The incast of the `trim` experiment, with a warm-up: lossy mode is
// negotiated at a QP's first message boundary after the peer's CAP bit was
// seen (docs/lossy.md, Negotiation). In an incast every sender posts all of
// its WRITEs before the first ACK comes back through the congested port, so
// without a warm-up no QP ever reaches that boundary and the whole run is
// compatible go-back-N (measured: `warm_bytes=0`, lanes=1 and lanes=16 give
// the same packets). A small flow per sender first, then the incast on the
// same (idle, hence reused) QPs, the way a long-lived connection would be.
#include <algorithm>

#include "lossy_common.h"
#include "sroce/sim/flows.h"
#include "sroce/sim/metrics.h"
#include "sroce/sim/topology.h"
#include "sroce/sim/traffic.h"
#include "util.h"

namespace sroce::sim {

Json run_incast(const IncastRun& c) {
  Simulator sim(c.seed);
  Network net(sim);
  LeafSpineConfig lc;
  lc.hosts_per_leaf = c.hosts_per_leaf;
  lc.leaves = (c.hosts + c.hosts_per_leaf - 1) / c.hosts_per_leaf;
  lc.spines = c.hosts_per_leaf;  // no oversubscription
  lc.host_link.rate_bps = c.rate_bps;
  lc.host_link.delay = Duration::nanos(1000);
  lc.uplink = lc.host_link;
  lc.downlink = lc.host_link;
  lc.sw.mmu = true;
  lc.sw.buffer_bytes = c.buffer_bytes;
  lc.sw.trim = c.trim;
  lc.sw.pfc.enabled = c.pfc;

  FlowRunnerConfig fc;
  fc.qp.mtu = Mtu::k4096;
  fc.qp.send_wr = 512;
  fc.qp.cqe = 8192;
  fc.chunk_bytes = c.chunk_bytes;
  HostConfig hc;
  hc.engine.seed = c.seed;
  hc.engine.port_mtu = fc.qp.mtu;
  hc.engine.icrc_offload = true;
  hc.engine.lossy.lanes = c.lanes;
  hc.engine.lossy.train_bytes = c.train_bytes;
  hc.discard_payload = true;
  hc.arena_bytes = 2 * fc.chunk_bytes + (64u << 10);
  LeafSpine t = build_leaf_spine(net, lc, hc);

  // Senders spread over the fabric (as the workload scenario's incast).
  const uint32_t n = static_cast<uint32_t>(t.hosts.size());
  const uint32_t fanin = std::min(c.fanin, n - 1);
  std::vector<uint32_t> srcs;
  for (uint32_t i = 0; i < fanin; ++i)
    srcs.push_back(1 + static_cast<uint32_t>(uint64_t{i} * (n - 1) / fanin));
  std::vector<FlowSpec> specs;
  if (c.warm_bytes > 0) specs = incast_flows(srcs, 0, c.warm_bytes, Time{});
  const size_t first = specs.size();
  const Time start = Time{} + (c.warm_bytes > 0 ? c.warm : Duration{});
  for (const auto& f : incast_flows(srcs, 0, c.bytes, start)) specs.push_back(f);

  FlowRunner runner(net, t.hosts, fc);
  if (auto r = runner.setup(); !r) return {{"ok", false}, {"error", r.error().message}};
  if (auto r = runner.add(specs); !r) return {{"ok", false}, {"error", r.error().message}};
  const Time end = start + c.limit;
  while (sim.now() < end && sim.pending() > 0 && !runner.all_done())
    sim.run(std::min(end, sim.now() + Duration::micros(10)));

  // The incast flows only; FCT from their own start.
  std::vector<FlowRecord> inc(runner.flows().begin() + static_cast<std::ptrdiff_t>(first),
                              runner.flows().end());
  std::vector<Duration> ideal;
  for (const auto& f : inc)
    ideal.push_back(
        ideal_fct(first_path(net, *t.hosts[f.spec.src], *t.hosts[f.spec.dst]), f.spec.bytes, 4096,
                  fc.chunk_bytes));
  const FctReport fr = fct_report(inc, ideal);
  uint64_t completed = 0;
  for (const auto& f : inc) completed += f.done() ? 1 : 0;
  uint64_t trimmed = 0, drops = 0, pfc = 0, stalls = 0;
  for (const auto& nd : net.nodes()) {
    if (nd->kind() != NodeKind::kSwitch) continue;
    const auto& s = static_cast<const Switch&>(*nd);
    trimmed += s.stats().trimmed;
    drops += s.stats().egress_drops;
    pfc += s.stats().pfc_xoff;
  }
  // Every frame any link refused or lost (hosts' uplinks included), beside
  // the switches' own count.
  uint64_t link_drops = 0;
  for (const auto& l : net.links()) link_drops += l->stats().queue_drops + l->stats().lost();
  EngineStats es{};
  for (Host* h : t.hosts) {
    es = es + h->engine().stats();
    stalls += h->stats().stalls;
  }
  const bool ok = runner.errors() == 0 && stalls == 0 && completed == inc.size();
  return {{"ok", ok},
          {"flows", inc.size()},
          {"completed", completed},
          {"p99_fct_us", fr.fct_us.p99},
          {"p50_fct_us", fr.fct_us.p50},
          {"max_fct_us", fr.fct_us.max},
          {"p99_slowdown", fr.slowdown.p99},
          {"p50_slowdown", fr.slowdown.p50},
          {"switch_drops", drops},
          {"link_drops", link_drops},
          {"trimmed", trimmed},
          {"pfc_pauses", pfc},
          {"timeouts", es.timeouts},
          {"retransmits", es.retransmits},
          {"naks", es.naks_sent},
          // Compatible mode drops every packet after a gap at the receiver
          // (go-back-N); in lossy mode this stays small.
          {"rx_dropped", es.rx_dropped},
          {"sim_end_us", to_us(sim.now())},
          {"events", sim.events_run()},
          {"error", runner.first_error()}};
}

}  // namespace sroce::sim
