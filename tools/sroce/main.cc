// sroce: the command-line tool. A small main; each subcommand group lives in
// its own file (commands.h).
#include <CLI/CLI.hpp>

#include "cmd_daemon.h"
#include "commands.h"

int main(int argc, char** argv) {
  CLI::App app{"sroce: software RoCEv2 transport: telemetry, status and tools"};
  app.require_subcommand(1);
  int rc = 0;
  sroce::cli::add_telemetry_commands(app, rc);
  sroce::cli::add_top_command(app, rc);
  sroce::cli::add_daemon_commands(app, rc);
  sroce::cli::add_pingmesh_commands(app, rc);
  CLI11_PARSE(app, argc, argv);
  return rc;
}
