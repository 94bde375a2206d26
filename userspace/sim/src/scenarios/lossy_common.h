// Shared pieces of issue 4's lossy-mode experiments (lossy_pair.cc,
// lossy_fabric.cc): one RC QP pair across a 100 Gbit/s leaf-spine with
// per-spine loss, delay and a blackhole, run to completion under the real
// engine, with the per-QP and per-lane counters the experiments report.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sroce/engine/engine.h"
#include "sroce/sim/scenario.h"

namespace sroce::sim {

struct PairRun {
  uint32_t spines = 4;
  uint64_t rate_bps = 100'000'000'000ull;
  Duration delay = Duration::micros(1);      // every link
  double loss = 0;                           // random loss on every spine->leaf link
  std::vector<int64_t> spine_delay_ns;       // per spine, both directions (empty: `delay`)
  std::vector<uint64_t> spine_rate_bps;      // per spine, both directions (empty or 0: rate_bps)
  uint64_t ecn_bytes = 0;                    // mark CE on ECT frames above this backlog (0: never)
  int blackhole_spine = -1;                  // < 0: none
  Duration blackhole_at{};                   // from the first post
  uint64_t bytes = 16ull << 20;
  uint32_t msg = 256u << 10;                 // WRITE size
  uint32_t window = 16;                      // WRs in flight
  Mtu mtu = Mtu::k4096;
  uint8_t timeout = 8;                       // IBA local ACK timeout exponent (4.096 us * 2^t)
  LossyConfig lossy;
  bool int_telemetry = false;                // INT stamping + the delay controller (reads INT)
  Duration sample = Duration::micros(10);    // timeline bin
  Duration limit = Duration::millis(2000);
  uint64_t seed = 1;
  bool read = false;  // READs (b's memory to a) instead of WRITEs
};

struct PairResult {
  bool finished = false;
  bool data_ok = false;     // every WR completed once, in order, successfully; bytes verified
  std::string why;
  uint64_t wrs_posted = 0;
  uint64_t wrs_ok = 0;
  uint64_t wr_errors = 0;
  uint64_t bytes_done = 0;
  double elapsed_us = 0;    // first post to last completion
  double goodput_gbps = 0;
  QpStats client{};         // requester side
  QpStats server{};         // responder side
  EngineStats engines{};    // both hosts summed
  std::vector<LaneStats> lanes;
  std::vector<int> lane_spine;  // the spine each lane's data takes (-1: unknown)
  // Receiver-side accepted payload rate per `sample` bin, Gbit/s.
  std::vector<double> rx_gbps;
  // Blackhole: per bin, how many lanes through the dead spine were active.
  std::vector<uint32_t> dead_lanes_active;
  // Blackhole: first sample by which every lane through the dead spine had
  // been retired (at least once), microseconds after the blackhole (-1: never).
  double retire_us = -1;
  double first_retire_us = -1;      // the first of them
  uint64_t lanes_dead_path = 0;     // lanes whose data crosses the dead spine
  uint64_t lanes_retired_wrongly = 0;  // retired lanes on live spines (at the end)
  uint64_t frames_lost = 0;
  uint64_t events = 0;
  std::vector<double> wr_fct_us;         // per WR: post to completion
  std::vector<uint64_t> spine_max_queue; // per spine: largest backlog of the leaf-0 uplink, bytes
  uint64_t ce_marked = 0;                // frames marked CE by the links
};

PairResult run_pair(const PairRun& cfg);

// An N-to-1 incast on a leaf-spine (lossy_incast.cc), after a warm-up flow
// per sender that lets lossy mode be negotiated (see there).
struct IncastRun {
  uint32_t hosts = 32;
  uint32_t hosts_per_leaf = 8;
  uint32_t fanin = 31;
  uint64_t bytes = 1'000'000;
  uint64_t warm_bytes = 16384;            // 0: no warm-up
  Duration warm = Duration::micros(100);  // the incast starts then
  uint64_t rate_bps = 100'000'000'000ull;
  uint64_t buffer_bytes = 4ull << 20;
  bool trim = false;
  bool pfc = false;
  uint16_t lanes = 16;
  uint32_t train_bytes = kDefaultTrainBytes;  // LossyConfig::train_bytes
  uint32_t chunk_bytes = 64u << 10;
  Duration limit = Duration::millis(200);
  uint64_t seed = 1;
};
// The incast flows' FCTs and the fabric's and engines' counters.
Json run_incast(const IncastRun& cfg);

Json lanes_json(const PairResult& r);
std::vector<int64_t> parse_list(const std::string& v);
// Runs another scenario (the `workload` one) with `params` and returns its
// summary; its output goes nowhere.
Json run_quiet(int (*fn)(const ScenarioOptions&, Reporter&), const ScenarioOptions& opt);

}  // namespace sroce::sim
