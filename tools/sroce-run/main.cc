// sroce-run: runs an unchanged RDMA program so that libibverbs finds the sroce device.
//
//   sroce-run [--dev sroce0] [--netdev IFACE] [--socket PATH] [-v] -- PROGRAM ARGS...
//
// 1. learns the device from sroced (or, for discovery only, from --netdev);
// 2. enters a private mount namespace (a user namespace too when not privileged) and puts
//    /dev/infiniband/uverbs0 and a generated sysfs view on a tmpfs there;
// 3. sets SYSFS_PATH (the view), RDMAV_DRIVERS (libsroce by absolute path), SROCE_SOCKET
//    (the daemon) and LD_PRELOAD (libsroce-shim, for completion channels);
// 4. execs PROGRAM, which therefore keeps sroce-run's pid.
// See docs/sroce-run.md.
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <initializer_list>
#include <string>
#include <vector>

#include "control.h"
#include "device_info.h"
#include "mount_ns.h"
#include "sysfs_view.h"

namespace {

constexpr const char* kProviderSuffix = "-rdmav34.so";

std::string self_dir() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return ".";
  buf[n] = '\0';
  std::string p(buf);
  return p.substr(0, p.rfind('/'));
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// The first of `candidates` (relative to sroce-run's directory) that exists: the build tree
// keeps everything in ../lib, an installation puts the provider in libibverbs' directory.
std::string find_beside(std::initializer_list<const char*> candidates) {
  const std::string dir = self_dir();
  for (const char* c : candidates) {
    std::string p = dir + "/" + c;
    if (access(p.c_str(), R_OK) == 0) return p;
  }
  return dir + "/" + *candidates.begin();
}

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = getenv(name);
  return (v != nullptr && v[0] != '\0') ? v : fallback;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Run an unchanged RDMA program on the sroce device (see docs/sroce-run.md)"};
  std::string dev = "sroce0";
  std::string netdev;
  std::string socket_path;
  std::string provider = env_or(
      "SROCE_PROVIDER", find_beside({"../lib/libsroce-rdmav34.so",
                                     "../lib/x86_64-linux-gnu/libibverbs/libsroce-rdmav34.so"}));
  std::string shim = env_or(
      "SROCE_SHIM", find_beside({"../lib/libsroce-shim.so", "../lib/sroce/libsroce-shim.so"}));
  bool verbose = false;
  bool discovery_only = false;
  app.add_option("--dev", dev, "device name libibverbs will see")->capture_default_str();
  app.add_option("--netdev", netdev,
                 "interface whose IPv4 addresses are the GIDs when sroced cannot be asked");
  app.add_option("--socket", socket_path,
                 "sroced control socket (default: $SROCE_SOCKET or " SROCE_RUN_DIR "/DEV.sock)");
  app.add_option("--provider", provider, "path of libsroce-rdmav34.so")->capture_default_str();
  app.add_option("--shim", shim, "path of libsroce-shim.so")->capture_default_str();
  app.add_flag("--discovery-only", discovery_only,
               "describe the device from --netdev without asking sroced");
  app.add_flag("-v,--verbose", verbose, "say what is set up");
  app.prefix_command();
  app.footer("Then: -- PROGRAM [ARGS...], run unchanged with sroce0 visible to libibverbs.");
  CLI11_PARSE(app, argc, argv);
  std::vector<std::string> cmd = app.remaining();
  if (!cmd.empty() && cmd.front() == "--") cmd.erase(cmd.begin());
  if (cmd.empty()) {
    fprintf(stderr, "sroce-run: no program given\n%s", app.help().c_str());
    return 2;
  }
  if (dev.empty() || dev.find('/') != std::string::npos || dev.size() >= 64) {
    fprintf(stderr, "sroce-run: --dev: '%s' is not a device name\n", dev.c_str());
    return 2;
  }
  if (socket_path.empty()) socket_path = sroce::provider::control_socket_path(dev.c_str());
  if (!ends_with(provider, kProviderSuffix)) {
    fprintf(stderr, "sroce-run: --provider must name a file ending in %s\n", kProviderSuffix);
    return 2;
  }
  char resolved[PATH_MAX];
  if (realpath(provider.c_str(), resolved) == nullptr) {
    fprintf(stderr, "sroce-run: provider %s: %s\n", provider.c_str(), strerror(errno));
    return 2;
  }
  provider = resolved;
  if (realpath(shim.c_str(), resolved) == nullptr) {
    fprintf(stderr, "sroce-run: shim %s: %s\n", shim.c_str(), strerror(errno));
    return 2;
  }
  shim = resolved;

  sroce::run::DeviceInfo info;
  std::string err =
      discovery_only ? "--discovery-only" : sroce::run::query_daemon(socket_path, &info);
  if (!err.empty()) {
    if (netdev.empty()) {
      fprintf(stderr,
              "sroce-run: cannot describe %s: %s\n"
              "  start sroced (it serves %s), or pass --netdev IFACE to list the device "
              "without it\n",
              dev.c_str(), err.c_str(), socket_path.c_str());
      return 1;
    }
    if (verbose && !discovery_only)
      fprintf(stderr, "sroce-run: %s; using %s\n", err.c_str(), netdev.c_str());
    err = sroce::run::query_netdev(netdev, &info);
    if (!err.empty()) {
      fprintf(stderr, "sroce-run: %s\n", err.c_str());
      return 1;
    }
  }
  sroce::run::resolve_netdevs(&info, netdev);

  sroce::run::SysfsNames names;
  names.ibdev = dev;
  auto ns = sroce::run::enter_namespace(names.uverbs, verbose);
  if (!ns.error.empty()) {
    fprintf(stderr, "sroce-run: %s\n", ns.error.c_str());
    return 1;
  }
  names.cdev = ns.cdev;
  err = sroce::run::write_sysfs_view(ns.sysfs_root, names, info);
  if (!err.empty()) {
    fprintf(stderr, "sroce-run: %s\n", err.c_str());
    return 1;
  }
  if (verbose) {
    fprintf(stderr, "sroce-run: %s from %s, %zu GID(s)\n", dev.c_str(), info.source.c_str(),
            info.gids.size());
  }

  setenv("SYSFS_PATH", ns.sysfs_root.c_str(), 1);
  setenv("RDMAV_DRIVERS", provider.substr(0, provider.size() - strlen(kProviderSuffix)).c_str(), 1);
  setenv("SROCE_SOCKET", socket_path.c_str(), 1);
  std::string preload = shim;
  if (const char* old = getenv("LD_PRELOAD"); old != nullptr && old[0] != '\0')
    preload += std::string(":") + old;
  setenv("LD_PRELOAD", preload.c_str(), 1);

  std::vector<char*> args;
  for (std::string& s : cmd) args.push_back(s.data());
  args.push_back(nullptr);
  execvp(args[0], args.data());
  fprintf(stderr, "sroce-run: cannot run %s: %s\n", args[0], strerror(errno));
  return 127;
}
