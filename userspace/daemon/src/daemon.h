// sroced: the engine, the datapath and the service in one loop.
//
// The loop (one thread, DPDK l2fwd style):
//   read the clock once -> rx bursts into the engine (drained, bounded) -> new work requests
//   from the rings -> due timers -> tx burst out of the engine -> flush ->
//   completions and events back to the rings.
// While anything moved it spins; after an adaptive spin of at most
// `datapath.busy_poll_us` without work (spin.h) it publishes `sleeping` on
// every ring and sleeps in epoll until a doorbell,
// a socket, a datapath completion or the engine's next deadline.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "config.h"
#include "datapath.h"
#include "memory.h"
#include "random_source.h"
#include "service.h"
#include "spin.h"
#include "sroce/engine/engine.h"

namespace sroce::daemon {

struct LoopStats {
  uint64_t passes = 0;
  uint64_t sleeps = 0;
  uint64_t wakeups_doorbell = 0;
  uint64_t timer_runs = 0;
  uint64_t rx_drains = 0;  // passes that took more than one burst of receives
};

class Daemon {
 public:
  explicit Daemon(Config cfg);
  ~Daemon();

  // Finds the GIDs, opens the datapath and the control socket.
  Result<void> start();
  // Runs until SIGTERM/SIGINT (signalfd) or stop(); returns the exit code.
  int run();
  void stop() { stop_.store(true); }

  // `viewer`: the caller's uid (Service::sees_all).
  std::string stats_json(uint32_t what, uid_t viewer = 0) const;

 private:
  static Time now();
  void watch(int fd, uint64_t key);
  void unwatch(int fd);
  bool handle_events(int timeout_ns);
  bool pass(Time t);
  bool crowded();
  // Receive bursts a pass takes at most before its timers (pass()): 8 x `batch`.
  static constexpr uint32_t kRxDrainBursts = 8;
  // A warn line for NAKs other than sequence errors (access faults and the like), at most one
  // per kNakLogInterval with what came since the last (docs/sroced.md, "Faults").
  void log_naks(Time t);
  static constexpr Duration kNakLogInterval = Duration::millis(10'000);

  Config cfg_;
  std::vector<Gid> gids_;
  std::vector<uint32_t> addrs_;
  std::vector<Gid> addrs6_;  // IPv6 GIDs (device.ipv6), after the IPv4 ones in gids_
  std::string netdev_;
  uint32_t mtu_ = 1500;
  std::unique_ptr<GetrandomSource> random_;  // before engine_: the engine draws keys from it
  std::unique_ptr<ProcessMemory> mem_;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<Datapath> dp_;
  std::unique_ptr<Service> svc_;
  int epfd_ = -1;
  int sigfd_ = -1;
  std::atomic<bool> stop_{false};
  std::vector<RxPacket> rx_;
  LoopStats loop_;
  AdaptiveSpin spin_{cfg_.datapath.busy_poll_us};
  int loadavg_fd_ = -1;
  unsigned ncpus_ = 1;
  Time started_;
  Time nak_log_at_ = Time::never();  // the last NAK line (never: none yet)
  uint64_t nak_faults_seen_ = 0;     // sent + received NAKs of the fault codes at that line
  uint64_t nak_logged_sent_[kNakCodes] = {};
  uint64_t nak_logged_received_[kNakCodes] = {};
};

}  // namespace sroce::daemon
