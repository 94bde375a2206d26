// One UD QP with completion timestamps: what the pingmesh agent sends probes and ACKs
// through, on sroce or on any RNIC (plain libibverbs). Sends and receives share one
// extended CQ created with IBV_WC_EX_WITH_COMPLETION_TIMESTAMP when the device has it; the
// stamps are converted to nanoseconds by hca_core_clock. Without them the host's
// CLOCK_MONOTONIC at poll time stands in, and hw_timestamps() says so.
#pragma once

#include <infiniband/verbs.h>

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "probe_wire.h"
#include "sroce/engine/result.h"

namespace sroce::pingmesh {

using Gid = std::array<uint8_t, 16>;

// An address ("10.1.1.2" or an IPv6 one) as a RoCEv2 GID (IPv4-mapped for IPv4).
bool parse_gid(const std::string& addr, Gid& out);
std::string gid_text(const Gid& g);  // dotted quad for IPv4-mapped

struct Completion {
  uint64_t wr_id = 0;
  bool ok = false;
  bool recv = false;
  uint64_t ts_ns = 0;    // the device's completion time (or the host's at poll), ns
  uint32_t src_qp = 0;   // receives
  Gid src{};             // receives: the sender's address from the GRH
  const uint8_t* payload = nullptr;  // receives: after the 40-byte GRH area
  uint32_t len = 0;                  // receives: payload bytes
};

class UdPort {
 public:
  static constexpr uint32_t kRecvDepth = 512;
  static constexpr uint32_t kSendDepth = 1024;
  static constexpr size_t kSlot = 128;  // bytes per buffer slot (GRH + payload fits)

  UdPort() = default;
  UdPort(const UdPort&) = delete;
  UdPort& operator=(const UdPort&) = delete;
  ~UdPort();

  // Opens `dev` (empty: the first device), picks the GID of `addr` (or gid_index >= 0), and
  // brings a UD QP to RTS with every receive posted.
  Result<void> open(const std::string& dev, int gid_index, const std::string& addr);

  uint32_t qpn() const { return qp_ ? qp_->qp_num : 0; }
  const Gid& gid() const { return gid_; }
  int gid_index() const { return gid_index_; }
  bool hw_timestamps() const { return hw_ts_; }
  std::string device_name() const;
  int event_fd() const { return channel_ ? channel_->fd : -1; }

  // A send of msg to (dgid, dqpn) with the AV's flow label `label` (its UDP source port on
  // RoCEv2). EAGAIN when the send queue is full, ENOMEM when the AH cache is full, else the
  // errno of ibv_post_send / ibv_create_ah.
  int send(const Gid& dgid, uint32_t dqpn, uint32_t label, const ProbeMsg& m, uint64_t wr_id);

  // Up to `max` completions into `out`; receives are reposted after the caller's callback,
  // so their payload pointer is valid only until the next poll.
  size_t poll(std::vector<Completion>& out, size_t max);
  // Arms the CQ and consumes a pending channel event (after poll() found nothing).
  void arm();

  uint64_t host_ns() const;  // CLOCK_MONOTONIC
  uint64_t sends_outstanding() const { return outstanding_; }
  uint64_t ah_cache_full() const { return ah_full_; }

 private:
  ibv_ah* ah_for(const Gid& dgid, uint32_t label, int& err);
  int post_recv(uint32_t slot);
  uint64_t to_ns(uint64_t raw) const;

  ibv_context* ctx_ = nullptr;
  ibv_pd* pd_ = nullptr;
  ibv_comp_channel* channel_ = nullptr;
  ibv_cq_ex* cqx_ = nullptr;
  ibv_cq* cq_ = nullptr;
  ibv_qp* qp_ = nullptr;
  ibv_mr* mr_ = nullptr;
  std::vector<uint8_t> buf_;
  Gid gid_{};
  int gid_index_ = 0;
  bool hw_ts_ = false;
  uint64_t clock_khz_ = 0;
  uint32_t send_next_ = 0;
  uint64_t outstanding_ = 0;
  uint64_t ah_full_ = 0;
  std::map<std::pair<Gid, uint32_t>, ibv_ah*> ahs_;
  std::vector<uint32_t> repost_;
};

// wr_id layout: the top byte says what the work request was.
enum class WrKind : uint8_t { kRecv = 1, kProbe = 2, kAck1 = 3, kAck2 = 4 };
inline uint64_t make_wr_id(WrKind k, uint64_t v) { return (uint64_t{static_cast<uint8_t>(k)} << 56) | (v & ((1ull << 56) - 1)); }
inline WrKind wr_kind(uint64_t id) { return static_cast<WrKind>(id >> 56); }
inline uint64_t wr_value(uint64_t id) { return id & ((1ull << 56) - 1); }

}  // namespace sroce::pingmesh
