// sroce-sim: run the deterministic fabric scenarios.
//
//   sroce-sim list
//   sroce-sim run NAME [--seed N] [--pcap FILE] [--json] [--set key=value ...]
#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>
#include <vector>

#include "sroce/sim/scenario.h"

int main(int argc, char** argv) {
  using namespace sroce::sim;
  CLI::App app{"sroce-sim: the deterministic discrete-event fabric that hosts the sroce engine"};
  app.require_subcommand(1);

  auto* list = app.add_subcommand("list", "list scenarios with a one-line description");
  auto* run = app.add_subcommand("run", "run one scenario");
  std::string name;
  ScenarioOptions opt;
  std::vector<std::string> sets;
  run->add_option("name", name, "scenario (see `sroce-sim list`)")->required();
  run->add_option("--seed", opt.seed, "RNG seed: the same seed gives the same run, byte for byte");
  run->add_option("--pcap", opt.pcap, "write every frame any link delivers to this pcap file");
  run->add_flag("--pcap-edge", opt.pcap_edge_only,
                "capture only frames delivered to hosts (one copy per frame, not one per hop)");
  run->add_flag("--json", opt.json, "one JSON object per line; the last is the summary");
  run->add_flag("-q,--quiet", opt.quiet, "print only the summary");
  run->add_option("--set", sets, "scenario parameter key=value (repeatable)");

  CLI11_PARSE(app, argc, argv);

  if (list->parsed()) {
    size_t w = 0;
    for (const auto& s : scenarios()) w = std::max(w, std::string(s.name).size());
    for (const auto& s : scenarios())
      std::printf("%-*s  %s\n", static_cast<int>(w), s.name, s.description);
    return 0;
  }
  const Scenario* sc = find_scenario(name);
  if (sc == nullptr) {
    std::fprintf(stderr, "sroce-sim: no scenario '%s' (try `sroce-sim list`)\n", name.c_str());
    return 2;
  }
  for (const auto& kv : sets) {
    const auto eq = kv.find('=');
    if (eq == std::string::npos) {
      std::fprintf(stderr, "sroce-sim: --set wants key=value, got '%s'\n", kv.c_str());
      return 2;
    }
    opt.params[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  Reporter rep(stdout, opt.json, opt.quiet);
  return sc->run(opt, rep);
}
