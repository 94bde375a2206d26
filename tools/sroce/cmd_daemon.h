// `sroce status`, `sroce qps`, `sroce lanes`: what sroced reports about
// itself (SROCE_OP_STATS over its control socket), as tables or --json.
#pragma once

#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "sroce/engine/result.h"

namespace sroce::cli {

void add_daemon_commands(CLI::App& app, int& rc);

// The socket of a device: $SROCE_SOCKET, else SROCE_RUN_DIR/<dev>.sock.
std::string daemon_socket_path(const std::string& dev);
// One SROCE_OP_STATS round trip (the JSON text may come in a memfd).
Result<nlohmann::json> fetch_daemon_stats(const std::string& socket_path);

std::string render_status(const nlohmann::json& s);
std::string render_qps(const nlohmann::json& s);
std::string render_lanes(const nlohmann::json& s);

}  // namespace sroce::cli
