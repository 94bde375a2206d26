// One randomized, seeded property case over the impaired fabric, hosting the
// real engine. Everything (topology, link rates, MTU, impairments, QPs, the
// operations, their sizes and SGLs, an optional protection fault) derives from
// the seed, so a failing case replays exactly with
//     sroce-sim run property --seed N
//
// Properties checked:
//  * every posted work request completes exactly once, in posting order per
//    queue, with the expected status, opcode, length and immediate;
//  * memory of both hosts equals a shadow model byte for byte at the end:
//    received/written/read data is right, atomics did what they say, and
//    nothing else changed (guard bytes around every region included);
//  * protection faults (bad R_Key, out of bounds, missing access, bad L_Key,
//    receive buffer too small) end in the right error completion on the right
//    side and write nothing;
//  * the engine writes only inside registered regions and never outside its
//    host's memory;
//  * every corrupted frame delivered to a host is dropped by the engine
//    (ICRC or parse check) before it can act;
//  * no hang: all completions arrive within a bounded simulated time, and the
//    engines go idle afterwards;
//  * lossy mode (most cases): the same, with lanes, trimming switches; and
//    under pure path reordering no spurious retransmission.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sroce/engine/types.h"

namespace sroce::sim {

class FrameTap;

struct PropertyConfig {
  uint32_t max_ops = 40;        // operations per case: 1..max_ops
  bool faults = true;           // end some cases with a protection fault
  Duration limit = Duration::millis(2000);  // simulated-time bound ("no hang")
  bool verbose = false;         // fill PropertyResult::trace
  FrameTap* tap = nullptr;      // sees every delivered frame (e.g. a PcapWriter)
  // Operation classes to generate (kOp* bits); a run can leave one out to
  // isolate a failing area.
  uint32_t ops = kOpAll;

  // Deliberate harness-side faults, to prove the checkers catch them.
  enum class Sabotage : uint8_t {
    kNone,
    kCorruptWrite,         // one engine memory write lands with a bit flipped
    kDropCompletion,       // one completion is hidden from the oracle
    kDuplicateCompletion,  // one completion is shown to the oracle twice
    kWriteOutside,         // a write through the engine's MemoryAccess into guard bytes
  };
  Sabotage sabotage = Sabotage::kNone;

  // Lossy mode (docs/lossy.md). kAuto: most cases offer it (the engines
  // negotiate it), with 1, 4 or 16 lanes, some leaf-spine cases with trimming
  // switches (a slow downlink fills a small shared buffer) and some with pure
  // path reordering (every spine a different fixed delay, nothing lost), where
  // the oracle also demands zero spurious retransmissions; the rest stay
  // compatible. These choices come from their own seed stream, so the case
  // itself (fabric, impairments, operations) is the same as without them.
  // kOff: compatible mode only.
  enum class Lossy : uint8_t { kAuto, kOff };
  Lossy lossy = Lossy::kAuto;

  static constexpr uint32_t kOpSend = 1, kOpWrite = 2, kOpRead = 4, kOpAtomic = 8;
  static constexpr uint32_t kOpAll = kOpSend | kOpWrite | kOpRead | kOpAtomic;
  // "send,write,read,atomic" (any subset) -> bits; 0 if a name is unknown.
  static uint32_t parse_ops(const std::string& list);
};

struct PropertyResult {
  uint64_t seed = 0;
  bool ok = true;
  std::vector<std::string> failures;  // first few, each one sentence
  std::string description;            // the generated case in one line
  std::string fault;                  // protection fault exercised ("" = none)
  std::vector<std::string> trace;     // verbose: posts and completions
  uint64_t ops = 0;
  uint64_t bytes = 0;
  uint64_t completions = 0;
  uint64_t events = 0;
  double sim_time_us = 0;
  uint64_t frames_lost = 0;
  uint64_t frames_corrupted = 0;
  uint64_t frames_duplicated = 0;
  uint64_t retransmits = 0;
  uint64_t naks = 0;
  uint64_t rnr_naks = 0;
  uint64_t timeouts = 0;
  // lossy mode (QpStats summed over the case's QPs)
  bool lossy = false;            // the case offered lossy mode
  bool pure_reorder = false;     // per-spine delays, no impairments
  bool trimming = false;         // trimming switches
  uint64_t lossy_qps = 0;        // QP ends that switched to lossy mode
  uint64_t selective_retransmits = 0;
  uint64_t spurious_retransmits = 0;
  uint64_t trims_received = 0;
  uint64_t sacks_sent = 0;
};

PropertyResult run_property_case(uint64_t seed, const PropertyConfig& cfg = {});

// "sroce-sim run property --seed N" and the test-binary form, for messages.
std::string property_replay_hint(uint64_t seed);

}  // namespace sroce::sim
