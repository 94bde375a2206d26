// sroce top: a live view of the paths, worst first, refreshed every interval.
// Plain text and one ANSI "clear screen" per frame, so it works over ssh in
// any terminal; --once prints a single frame (with rates over one interval)
// and exits, for scripts and tests.
//
// The wire's side comes from the telemetry maps; the transport's side (sroced's
// per-QP and per-lane counters) from the daemon's control socket, joined to
// the wire's lanes by source port. Either may be missing (no telemetry
// attached, no daemon running): top shows what there is, and fails only when
// there is neither.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>

#include "cmd_daemon.h"
#include "commands.h"
#include "telemetry/tm_loader.h"
#include "telemetry_view.h"
#include "top_view.h"

namespace sroce::cli {

namespace {

volatile sig_atomic_t g_stop = 0;
void on_signal(int) { g_stop = 1; }

struct TopOpts {
  std::string pin_dir = SROCE_TM_DEFAULT_PIN_DIR;
  std::string by;  // "", "peer", "lane", "path"
  double interval_s = 1.0;
  size_t limit = 20;
  bool once = false;
  std::string dev = "sroce0";  // sroced's device (socket SROCE_RUN_DIR/<dev>.sock or $SROCE_SOCKET)
  std::string socket;          // sroced's control socket, overrides dev
  bool no_daemon = false;
  bool require_daemon = false;  // --socket/--dev given: the daemon must answer
};

void sleep_for(double s) {
  // Sleep in small steps so Ctrl-C is prompt.
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(s);
  while (!g_stop && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

int run_top(const TopOpts& o) {
  telemetry::TopOptions t;
  if (!o.by.empty()) {
    t.peers = o.by == "peer";
    t.lanes = o.by == "lane";
    t.paths = o.by == "path";
  }
  t.limit = o.limit;
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  const bool tty = isatty(STDOUT_FILENO);

  // Each source: the wire (telemetry maps) and the transport (sroced).
  struct Sources {
    Result<telemetry::Snapshot> wire = Error{ENOENT, ""};
    Result<nlohmann::json> daemon = Error{ENOENT, ""};
  };
  const std::string sock = o.socket.empty() ? daemon_socket_path(o.dev) : o.socket;
  auto read = [&] {
    Sources s;
    s.wire = telemetry::read_snapshot(o.pin_dir);
    if (!o.no_daemon) s.daemon = fetch_daemon_stats(sock);
    return s;
  };
  Sources prev = read();
  if (!prev.wire && (o.no_daemon || !prev.daemon)) {
    std::fprintf(stderr, "sroce top: %s\n", prev.wire.error().message.c_str());
    if (!o.no_daemon) std::fprintf(stderr, "sroce top: %s\n", prev.daemon.error().message.c_str());
    return 1;
  }
  if (o.require_daemon && !prev.daemon) {
    std::fprintf(stderr, "sroce top: %s\n", prev.daemon.error().message.c_str());
    return 1;
  }
  auto t0 = std::chrono::steady_clock::now();
  while (!g_stop) {
    sleep_for(o.interval_s);
    Sources now = read();
    auto t1 = std::chrono::steady_clock::now();
    if (!now.wire && !now.daemon) {
      std::fprintf(stderr, "sroce top: %s\n", now.wire.error().message.c_str());
      return 1;
    }
    std::string frame;
    if (now.wire) {
      const telemetry::Snapshot* before = prev.wire ? &*prev.wire : nullptr;
      const double secs = before ? static_cast<double>(now.wire->taken_ns - before->taken_ns) * 1e-9 : 0;
      frame = telemetry::render_top(*now.wire, before, secs, t);
    } else {
      frame = "sroce top: no telemetry (" + now.wire.error().message +
              "; `sroce telemetry attach IFACE` shows the wire's side)\n\n";
    }
    if (now.daemon) {
      const double secs = std::chrono::duration<double>(t1 - t0).count();
      frame += telemetry::render_top_daemon(*now.daemon, prev.daemon ? &*prev.daemon : nullptr, secs,
                                            now.wire ? &*now.wire : nullptr, t.limit);
    }
    if (tty && !o.once) frame = "\x1b[H\x1b[2J" + frame;  // home + clear: any ANSI terminal
    std::fwrite(frame.data(), 1, frame.size(), stdout);
    std::fflush(stdout);
    if (o.once) break;
    prev = std::move(now);
    t0 = t1;
  }
  return 0;
}

}  // namespace

void add_top_command(CLI::App& app, int& rc) {
  auto o = std::make_shared<TopOpts>();
  auto* c = app.add_subcommand("top", "live view of RoCEv2 paths ranked by loss, retx and RTT");
  c->add_option("--by", o->by, "one section only: peer, lane or path (default: peer and lane)")
      ->check(CLI::IsMember({"peer", "lane", "path"}));
  c->add_option("--interval", o->interval_s, "seconds between frames")
      ->capture_default_str()
      ->check(CLI::Range(0.01, 3600.0));
  c->add_option("--limit", o->limit, "rows per section")->capture_default_str();
  c->add_flag("--once", o->once, "print one frame (rates over one interval) and exit");
  c->add_option("--pin-dir", o->pin_dir, "BPF filesystem directory of the telemetry maps")
      ->capture_default_str();
  auto* dev = c->add_option("--dev", o->dev, "sroced's device, whose QPs and lanes join the view")
                  ->capture_default_str();
  auto* sock = c->add_option("--socket", o->socket, "sroced's control socket (overrides --dev and $SROCE_SOCKET)");
  c->add_flag("--no-daemon", o->no_daemon, "the wire's side only")->excludes(dev)->excludes(sock);
  c->callback([&rc, o, dev, sock] {
    o->require_daemon = dev->count() > 0 || sock->count() > 0;
    rc = run_top(*o);
  });
}

}  // namespace sroce::cli
