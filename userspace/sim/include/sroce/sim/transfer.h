// A verified bulk transfer over one connected RC (or UC) QP pair: the
// application both scenarios and tests use. The client moves `total_bytes` in
// messages of `msg_bytes`, each a WRITE, SEND or READ by the mix, keeping
// `window` work requests outstanding:
//
//   WRITE i: client a[i] -> server b[i]
//   SEND  i: client a[i] -> server receive buffer b[i] (receives posted in order)
//   READ  i: server b[i] -> client a[i]
//
// a and b are both filled with the expected pattern where they are the source,
// so at the end both regions must equal the pattern byte for byte. Every work
// request must complete exactly once, successfully and in posting order.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sroce/sim/verbs_setup.h"

namespace sroce::sim {

struct TransferConfig {
  uint64_t total_bytes = 64ull << 20;
  uint32_t msg_bytes = 1u << 20;
  uint32_t window = 8;
  std::vector<WrOpcode> mix = {WrOpcode::kRdmaWrite, WrOpcode::kSend, WrOpcode::kRdmaRead};
  uint64_t pattern_seed = 1;
};

struct TransferStats {
  uint64_t posted = 0;
  uint64_t completed = 0;          // client send-queue completions
  uint64_t recv_completed = 0;     // server receive completions
  uint64_t by_op[3] = {};          // completions: WRITE, SEND, READ
  uint64_t errors = 0;             // completions with a status other than success
  uint64_t out_of_order = 0;       // completions not in posting order
  uint64_t duplicates = 0;         // a wr_id completed twice
  uint64_t bytes_done = 0;
  Time first_post = Time::never();
  Time last_completion;
  std::string first_error;
};

class RcTransfer {
 public:
  RcTransfer(QpEnd client, QpEnd server, const TransferConfig& cfg);

  // Allocates and fills the regions, registers them, posts the server's
  // first receives. Must run before start().
  Result<void> setup();
  // Posts the first window; completions drive the rest.
  void start();
  bool done() const { return stats_.completed + stats_.errors >= messages_ && recvs_done(); }
  bool failed() const { return stats_.errors > 0 || stats_.out_of_order > 0 || stats_.duplicates > 0; }
  // Byte-for-byte comparison of both regions with the pattern; on mismatch
  // *why says where.
  bool verify(std::string* why) const;

  const TransferStats& stats() const { return stats_; }
  uint64_t messages() const { return messages_; }
  // Called (if set) whenever a message completes.
  std::function<void(const RcTransfer&, Time)> on_progress;

 private:
  bool recvs_done() const { return stats_.recv_completed >= sends_; }
  uint32_t msg_len(uint64_t i) const;
  WrOpcode op_of(uint64_t i) const { return cfg_.mix[i % cfg_.mix.size()]; }
  void post_next();
  void post_recv_next();
  void on_client_wc(const Wc& wc, Time now);
  void on_server_wc(const Wc& wc, Time now);
  void fill_pattern(std::span<std::byte> out, uint64_t offset) const;

  QpEnd client_;
  QpEnd server_;
  TransferConfig cfg_;
  uint64_t messages_ = 0;
  uint64_t sends_ = 0;  // how many messages are SENDs
  uint64_t a_ = 0, b_ = 0;
  MrKeys a_keys_, b_keys_;
  uint64_t next_post_ = 0;
  uint64_t next_complete_ = 0;
  uint64_t next_recv_msg_ = 0;  // next message index to post a receive for
  uint64_t next_recv_done_ = 0;
  std::vector<uint8_t> completed_;
  uint64_t outstanding_ = 0;
  TransferStats stats_;
};

}  // namespace sroce::sim
