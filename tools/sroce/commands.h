// Subcommand groups of `sroce`. Each group registers its subcommands on the
// app and stores its exit status in `rc` when it runs. One file per group:
// telemetry_cmd.cc (attach, detach, dump, stats, services, serve),
// top_cmd.cc (top). Daemon commands (status, qps, lanes) go in their own file.
#pragma once

#include <CLI/CLI.hpp>

namespace sroce::cli {

void add_telemetry_commands(CLI::App& app, int& rc);
void add_top_command(CLI::App& app, int& rc);
void add_pingmesh_commands(CLI::App& app, int& rc);  // pingmesh_cmd.cc

}  // namespace sroce::cli
