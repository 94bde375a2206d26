// sroce pingmesh agent | pinglist | analyze (tools/pingmesh, docs/pingmesh.md)
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "agent.h"
#include "analyze.h"
#include "commands.h"
#include "topology.h"

namespace sroce::cli {

namespace {

using namespace sroce::pingmesh;

struct PinglistCli {
  std::string topology, host, out = "-", out_dir, services;
  PinglistOptions o;
};

int run_pinglist(PinglistCli& c) {
  auto t = load_topology(c.topology);
  if (!t) {
    std::fprintf(stderr, "sroce pingmesh pinglist: %s\n", t.error().message.c_str());
    return 1;
  }
  if (!c.services.empty()) {
    std::ifstream f(c.services);
    c.o.services = nlohmann::json::parse(f, nullptr, false);
    if (!c.o.services.is_array()) {
      std::fprintf(stderr, "sroce pingmesh pinglist: %s is not `sroce telemetry services --json` "
                   "output (a JSON array)\n", c.services.c_str());
      return 1;
    }
  }
  std::vector<std::string> hosts;
  if (!c.host.empty()) {
    hosts.push_back(c.host);
  } else if (!c.out_dir.empty()) {
    for (const auto& h : t->hosts) hosts.push_back(h.name);
  } else {
    std::fprintf(stderr, "sroce pingmesh pinglist: give --host NAME, or --out-dir DIR for every host\n");
    return 1;
  }
  for (const auto& h : hosts) {
    auto pl = make_pinglist(*t, h, c.o);
    if (!pl) {
      std::fprintf(stderr, "sroce pingmesh pinglist: %s\n", pl.error().message.c_str());
      return 1;
    }
    const std::string path = !c.out_dir.empty() ? c.out_dir + "/" + h + ".json" : c.out;
    if (path == "-") {
      std::cout << pl->dump(2) << "\n";
    } else {
      std::ofstream f(path);
      if (!(f << pl->dump(2) << "\n")) {
        std::fprintf(stderr, "sroce pingmesh pinglist: cannot write %s\n", path.c_str());
        return 1;
      }
    }
  }
  return 0;
}

struct AnalyzeCli {
  std::string topology;
  std::vector<std::string> results;
  AnalyzeOptions o;
  double from = 0, to = 0, step = 1;
  bool json = false, timeline = false;
};

int run_analyze(const AnalyzeCli& c) {
  auto t = load_topology(c.topology);
  if (!t) {
    std::fprintf(stderr, "sroce pingmesh analyze: %s\n", t.error().message.c_str());
    return 1;
  }
  Records rec;
  for (const auto& path : c.results) {
    std::ifstream f(path);
    if (!f) {
      std::fprintf(stderr, "sroce pingmesh analyze: cannot open %s\n", path.c_str());
      return 1;
    }
    for (std::string line; std::getline(f, line);) add_record(rec, line);
  }
  finish_records(rec);
  if (rec.probes.empty()) {
    std::fprintf(stderr, "sroce pingmesh analyze: no probe records in the results\n");
    return 1;
  }
  Analyzer a(*t, rec, c.o);
  const double to = c.to > 0 ? c.to : rec.t_max;
  double from = c.from > 0 ? c.from : a.baseline_to();
  if (!c.timeline) from = to;
  AnalyzeState st;
  nlohmann::json steps = nlohmann::json::array();
  nlohmann::json first = nlohmann::json::object();
  StepResult last;
  for (double x = from; x <= to + 1e-9; x += c.step) {
    last = a.step(x, st);
    for (const auto& b : last.blames)
      if (!first.contains(b.label())) first[b.label()] = x;
    if (c.timeline) {
      if (c.json)
        steps.push_back(step_json(last));
      else if (!last.blames.empty() || !last.rtt_anomalies.empty())
        std::cout << step_text(last, *t);
    }
  }
  if (c.json) {
    nlohmann::json out = {{"baseline", {a.baseline_from(), a.baseline_to()}},
                          {"window_s", c.o.window_s},
                          {"first_blamed", first},
                          {"final", step_json(last)},
                          {"bad_lines", rec.bad_lines}};
    if (c.timeline) out["steps"] = steps;
    std::cout << out.dump() << "\n";
  } else {
    std::cout << "at the end:\n" << step_text(last, *t);
    for (const auto& [k, v] : first.items()) std::cout << "first blamed " << k << " at " << v << "\n";
  }
  return 0;
}

}  // namespace

void add_pingmesh_commands(CLI::App& app, int& rc) {
  CLI::App* pm = app.add_subcommand("pingmesh", "R-Pingmesh-style probing and blame (docs/pingmesh.md)");
  pm->require_subcommand(1);

  auto ao = std::make_shared<AgentOptions>();
  CLI::App* ag = pm->add_subcommand("agent", "probe a pinglist's targets over UD, answer probes, trace paths");
  ag->add_option("--pinglist", ao->pinglist, "pinglist JSON (sroce pingmesh pinglist)")->required();
  ag->add_option("--registry", ao->registry, "directory where agents publish address and QPN")->required();
  ag->add_option("--out", ao->out, "JSON lines output ('-': stdout)")->capture_default_str();
  ag->add_option("--metrics", ao->metrics, "Prometheus text file, rewritten every second");
  ag->add_option("--services", ao->services, "`sroce telemetry services --json` output, re-read every 5 s");
  ag->add_option("--dev", ao->dev, "RDMA device (default: the first)");
  ag->add_option("--gid-index", ao->gid_index, "GID index (default: the GID of the pinglist's address)");
  ag->add_option("--duration", ao->duration_s, "seconds to run (default: until SIGINT/SIGTERM)");
  ag->add_option("--timeout-ms", ao->timeout_ms, "probe timeout (default: the pinglist's)");
  ag->add_option("--rate-scale", ao->rate_scale, "multiplies every rate of the pinglist")->capture_default_str();
  ag->add_flag("!--no-trace", ao->trace, "no TTL-limited path traces");
  ag->callback([ao, &rc] { rc = run_agent(*ao); });

  auto po = std::make_shared<PinglistCli>();
  CLI::App* pl = pm->add_subcommand("pinglist", "a host's pinglist from the fabric topology");
  pl->add_option("--topology", po->topology, "topology JSON, or `sroce-fabric status --json` output")->required();
  pl->add_option("--host", po->host, "the host whose pinglist to write");
  pl->add_option("--out", po->out, "output file ('-': stdout)")->capture_default_str();
  pl->add_option("--out-dir", po->out_dir, "write DIR/HOST.json for every host");
  pl->add_option("--services", po->services, "live 5-tuples to probe (sroce telemetry services --json)");
  pl->add_option("--coverage", po->o.coverage, "ECMP path coverage per inter-ToR peer")->capture_default_str();
  pl->add_option("--max-inter-peers", po->o.max_inter_peers, "inter-ToR peers per host")->capture_default_str();
  pl->add_option("--tor-rate", po->o.tor_rate, "probes/s per ToR-mesh peer")->capture_default_str();
  pl->add_option("--inter-rate", po->o.inter_rate, "probes/s over all inter-ToR targets (0: 10 per ECMP path)")
      ->capture_default_str();
  pl->add_option("--trace-rate", po->o.trace_rate, "TTL-limited traces/s")->capture_default_str();
  pl->add_option("--timeout-ms", po->o.timeout_ms, "probe timeout")->capture_default_str();
  pl->callback([po, &rc] { rc = run_pinglist(*po); });

  auto an = std::make_shared<AnalyzeCli>();
  CLI::App* az = pm->add_subcommand("analyze", "anomalies and blame from the agents' JSON lines");
  az->add_option("--topology", an->topology, "topology JSON, or `sroce-fabric status --json` output")->required();
  az->add_option("results", an->results, "the agents' JSON lines files")->required();
  az->add_option("--window", an->o.window_s, "seconds of probes each judgement looks at")->capture_default_str();
  az->add_option("--step", an->step, "seconds between judgements (--timeline)")->capture_default_str();
  az->add_option("--from", an->from, "first judgement (s since the epoch; default: after the baseline)");
  az->add_option("--to", an->to, "last judgement (default: the last probe)");
  az->add_option("--baseline-from", an->o.baseline_from, "start of the clean baseline (default: first probe)");
  az->add_option("--baseline-to", an->o.baseline_to, "end of the baseline (default: 10 s later)");
  az->add_option("--min-failures", an->o.min_failures, "failures before a component is named")->capture_default_str();
  az->add_flag("--timeline", an->timeline, "judge every --step seconds, not only at the end");
  az->add_flag("--json", an->json, "JSON");
  az->callback([an, &rc] { rc = run_analyze(*an); });
}

}  // namespace sroce::cli
