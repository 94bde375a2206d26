// Built with CONFIG_EBPF off: the telemetry commands say so instead of vanishing.
#include <cstdio>

#include "commands.h"

namespace sroce::cli {

namespace {
int unavailable(const char* what) {
  std::fprintf(stderr, "sroce %s: built without eBPF telemetry (CONFIG_EBPF=n)\n", what);
  return 1;
}
}  // namespace

void add_telemetry_commands(CLI::App& app, int& rc) {
  auto* t = app.add_subcommand("telemetry", "per-path RoCEv2 telemetry (not built)");
  t->allow_extras();
  t->callback([&rc] { rc = unavailable("telemetry"); });
}

void add_top_command(CLI::App& app, int& rc) {
  auto* t = app.add_subcommand("top", "live view of RoCEv2 paths (not built)");
  t->allow_extras();
  t->callback([&rc] { rc = unavailable("top"); });
}

}  // namespace sroce::cli
