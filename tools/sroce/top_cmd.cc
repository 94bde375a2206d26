// sroce top: a live view of the paths, worst first, refreshed every interval.
// Plain text and one ANSI "clear screen" per frame, so it works over ssh in
// any terminal; --once prints a single frame (with rates over one interval)
// and exits, for scripts and tests.
//
// The wire's side comes from the telemetry maps. The transport's own per-QP
// and per-lane counters (sroced) are meant to join as further sections of the
// same frame when the daemon exists; render_top() is where they go.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>

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

  auto prev = telemetry::read_snapshot(o.pin_dir);
  if (!prev) {
    std::fprintf(stderr, "sroce top: %s\n", prev.error().message.c_str());
    return 1;
  }
  while (!g_stop) {
    sleep_for(o.interval_s);
    auto now = telemetry::read_snapshot(o.pin_dir);
    if (!now) {
      std::fprintf(stderr, "sroce top: %s\n", now.error().message.c_str());
      return 1;
    }
    const double secs = static_cast<double>(now->taken_ns - prev->taken_ns) * 1e-9;
    std::string frame = telemetry::render_top(*now, &*prev, secs, t);
    if (tty && !o.once) frame = "\x1b[H\x1b[2J" + frame;  // home + clear: any ANSI terminal
    std::fwrite(frame.data(), 1, frame.size(), stdout);
    std::fflush(stdout);
    if (o.once) break;
    prev = std::move(now);
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
  c->callback([&rc, o] { rc = run_top(*o); });
}

}  // namespace sroce::cli
