// sroced: the sroce daemon (docs/sroced.md).
#include <unistd.h>

#include <cstdio>

#include <CLI/CLI.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "config.h"
#include "daemon.h"

int main(int argc, char** argv) {
  using sroce::daemon::Config;
  CLI::App app{"sroced: the sroce RoCEv2 daemon (serves unchanged RDMA programs through libsroce)"};
  std::string config_path = sroce::daemon::kDefaultConfigPath;
  std::string dev, netdev, socket, log_level;
  std::vector<std::string> addresses, sets;
  int port = 0;
  uint64_t seed = 0;
  bool check = false;
  bool kernel = false, no_kernel = false;
  auto* copt = app.add_option("-c,--config", config_path, "TOML configuration file")->capture_default_str();
  app.add_option("--dev", dev, "RDMA device name (device.name)");
  app.add_option("--netdev", netdev, "network interface whose addresses are the GIDs (device.netdev)");
  app.add_option("--address", addresses, "IPv4 address to serve as a GID, repeatable (device.addresses)");
  app.add_option("--socket", socket, "control socket path (control.socket)");
  app.add_option("--port", port, "RoCEv2 UDP port (datapath.port)")->check(CLI::Range(1, 65535));
  app.add_option("--seed", seed, "engine seed for keys and QPNs (engine.seed)");
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error, critical, off (log.level)");
  app.add_option("--set", sets, "override any key: --set datapath.batch=32 (TOML value syntax), repeatable");
  app.add_flag("--kernel", kernel, "serve rdma_sroce.ko's device through /dev/sroce; fail if it cannot (device.kernel)");
  app.add_flag("--no-kernel", no_kernel, "serve the control socket only, even with the module loaded");
  app.add_flag("--check-config", check, "validate the configuration, print it and exit");
  CLI11_PARSE(app, argc, argv);

  auto logger = spdlog::stderr_color_mt("sroced");
  spdlog::set_default_logger(logger);
  spdlog::set_pattern("%Y-%m-%d %H:%M:%S.%e %^%l%$ %v");

  auto loaded = sroce::daemon::load_config(config_path, copt->count() > 0, sets);
  if (!loaded) {
    spdlog::error("{}", loaded.error().message);
    return 2;
  }
  Config cfg = std::move(*loaded);
  if (!dev.empty()) cfg.device.name = dev;
  if (!netdev.empty()) cfg.device.netdev = netdev;
  if (!addresses.empty()) cfg.device.addresses = addresses;
  if (!socket.empty()) cfg.control.socket = socket;
  if (port) cfg.datapath.port = static_cast<uint16_t>(port);
  if (seed) cfg.engine.seed = seed;
  if (!log_level.empty()) cfg.log.level = log_level;
  if (kernel) cfg.device.kernel = "on";
  if (no_kernel) cfg.device.kernel = "off";
  if (auto v = sroce::daemon::validate(cfg); !v) {
    spdlog::error("command line: {}", v.error().message);
    return 2;
  }
  spdlog::set_level(spdlog::level::from_str(cfg.log.level));
  if (check) {
    std::printf("configuration ok: device %s, socket %s, udp port %u\n", cfg.device.name.c_str(),
                cfg.socket_path().c_str(), cfg.datapath.port);
    return 0;
  }

  sroce::daemon::Daemon d(std::move(cfg));
  if (auto s = d.start(); !s) {
    spdlog::error("{}", s.error().message);
    return 1;
  }
  return d.run();
}
