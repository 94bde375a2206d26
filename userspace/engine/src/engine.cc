// Engine facade: forwards every public entry point to Engine::Impl, and the
// name tables of the public enums.
#include "sroce/engine/engine.h"

#include "impl.h"

namespace sroce {

const char* to_string(QpState s) {
  switch (s) {
    case QpState::kReset:
      return "RESET";
    case QpState::kInit:
      return "INIT";
    case QpState::kRtr:
      return "RTR";
    case QpState::kRts:
      return "RTS";
    case QpState::kSqd:
      return "SQD";
    case QpState::kSqe:
      return "SQE";
    case QpState::kErr:
      return "ERR";
  }
  return "?";
}

const char* to_string(WcStatus s) {
  static constexpr const char* kNames[] = {
      "SUCCESS",          "LOC_LEN_ERR",       "LOC_QP_OP_ERR",     "LOC_EEC_OP_ERR",
      "LOC_PROT_ERR",     "WR_FLUSH_ERR",      "MW_BIND_ERR",       "BAD_RESP_ERR",
      "LOC_ACCESS_ERR",   "REM_INV_REQ_ERR",   "REM_ACCESS_ERR",    "REM_OP_ERR",
      "RETRY_EXC_ERR",    "RNR_RETRY_EXC_ERR", "LOC_RDD_VIOL_ERR",  "REM_INV_RD_REQ_ERR",
      "REM_ABORT_ERR",    "INV_EECN_ERR",      "INV_EEC_STATE_ERR", "FATAL_ERR",
      "RESP_TIMEOUT_ERR", "GENERAL_ERR",
  };
  const auto i = static_cast<size_t>(s);
  return i < std::size(kNames) ? kNames[i] : "?";
}

const char* to_string(NakCode c) {
  static constexpr const char* kNames[] = {"psn_seq_err", "invalid_request", "remote_access",
                                           "remote_op", "invalid_rd_request"};
  static_assert(sizeof kNames / sizeof kNames[0] == kNakCodes);
  return c < kNakCodes ? kNames[c] : "reserved";
}

const char* to_string(RxDropReason r) {
  static constexpr const char* kNames[] = {
      "ok",
      "short",
      "bad_opcode",
      "bad_tver",
      "truncated_hdr",
      "bad_pad",
      "bad_length",
      "bad_icrc",
      "wrong_transport",
      "unknown_qp",
      "qp_state",
      "bad_pkey",
      "bad_qkey",
      "cnp",
      "no_recv_wqe",
      "out_of_sequence",
      "unexpected_response",
      "duplicate",
      "length",
      "access",
      "invalid",
      "bad_int",
      "wrong_peer",
      "wrong_local",
      "wrong_port",
  };
  static_assert(std::size(kNames) == kRxDropCount);
  const auto i = static_cast<size_t>(r);
  return i < std::size(kNames) ? kNames[i] : "?";
}

const char* to_string(QpMode m) { return m == QpMode::kLossy ? "lossy" : "compatible"; }

Engine::Engine(const EngineConfig& cfg, MemoryAccess& mem)
    : impl_(std::make_unique<Impl>(cfg, mem)) {}
Engine::~Engine() = default;

Result<Handle> Engine::alloc_pd() { return impl_->alloc_pd(); }
Result<void> Engine::dealloc_pd(Handle pd) { return impl_->dealloc_pd(pd); }
Result<MrKeys> Engine::reg_mr(Handle pd, uint64_t addr, uint64_t length, uint32_t access) {
  return impl_->reg_mr(pd, addr, length, access);
}
Result<MrKeys> Engine::reg_mr_host(Handle pd, uint64_t host_addr, uint64_t length, uint32_t access,
                                   uint64_t iova) {
  return impl_->reg_mr_host(pd, host_addr, length, access, iova);
}
Result<void> Engine::dereg_mr(uint32_t lkey) { return impl_->dereg_mr(lkey); }
Result<MwKeys> Engine::alloc_mw(Handle pd, uint8_t type) { return impl_->alloc_mw(pd, type); }
Result<void> Engine::dealloc_mw(Handle mw) { return impl_->dealloc_mw(mw); }
Result<void> Engine::rereg_mr(uint32_t lkey, uint32_t flags, Handle pd, uint64_t addr,
                              uint64_t length, uint32_t access) {
  return impl_->rereg_mr(lkey, flags, pd, addr, length, access);
}
Result<Handle> Engine::create_cq(uint32_t cqe) { return impl_->create_cq(cqe); }
Result<void> Engine::destroy_cq(Handle cq) { return impl_->destroy_cq(cq); }
Result<void> Engine::resize_cq(Handle cq, uint32_t cqe) { return impl_->resize_cq(cq, cqe); }
Result<void> Engine::rereg_mr_host(uint32_t lkey, uint32_t flags, Handle pd, uint64_t host_addr,
                                   uint64_t length, uint32_t access, uint64_t iova) {
  return impl_->rereg_mr_host(lkey, flags, pd, host_addr, length, access, iova);
}
Result<Handle> Engine::create_srq(Handle pd, const SrqAttr& attr) {
  return impl_->create_srq(pd, attr);
}
Result<void> Engine::modify_srq(Handle srq, uint32_t limit) {
  return impl_->modify_srq(srq, limit);
}
Result<void> Engine::destroy_srq(Handle srq) { return impl_->destroy_srq(srq); }
Result<Handle> Engine::create_ah(Handle pd, const AhAttr& attr) {
  return impl_->create_ah(pd, attr);
}
Result<void> Engine::destroy_ah(Handle ah) { return impl_->destroy_ah(ah); }
Result<Qpn> Engine::create_qp(Handle pd, const QpInitAttr& attr) {
  return impl_->create_qp(pd, attr);
}
Result<void> Engine::modify_qp(Qpn qpn, const QpAttr& attr, uint32_t mask, Time now) {
  return impl_->modify_qp(qpn, attr, mask, now);
}
Result<QpAttr> Engine::query_qp(Qpn qpn) const { return impl_->query_qp(qpn); }
Result<void> Engine::destroy_qp(Qpn qpn) { return impl_->destroy_qp(qpn); }
Result<QpStats> Engine::qp_stats(Qpn qpn) const { return impl_->qp_stats(qpn); }
size_t Engine::lane_stats(Qpn qpn, std::span<LaneStats> out) const {
  return impl_->lane_stats(qpn, out);
}
Result<size_t> Engine::qp_memory_bytes(Qpn qpn) const { return impl_->qp_memory_bytes(qpn); }
size_t Engine::memory_bytes() const { return impl_->memory_bytes(); }

int Engine::post_send(Qpn qpn, const SendWr& wr, Time now) {
  return impl_->post_send(qpn, wr, now);
}
int Engine::post_recv(Qpn qpn, const RecvWr& wr) { return impl_->post_recv(qpn, wr); }
int Engine::post_srq_recv(Handle srq, const RecvWr& wr) { return impl_->post_srq_recv(srq, wr); }
int Engine::poll_cq(Handle cq, std::span<Wc> out) { return impl_->poll_cq(cq, out); }
int Engine::req_notify_cq(Handle cq, bool solicited_only) {
  return impl_->req_notify_cq(cq, solicited_only);
}
std::optional<Handle> Engine::poll_cq_notification() { return impl_->poll_cq_notification(); }
std::optional<AsyncEvent> Engine::poll_async_event() { return impl_->poll_async_event(); }
uint64_t Engine::output_seq() const { return impl_->output_seq_; }
void Engine::on_packet(std::span<const std::byte> payload, const PacketMeta& meta, Time now) {
  impl_->on_packet(payload, meta, now);
}
void Engine::on_timer(Time now) { impl_->on_timer(now); }
std::optional<TxPacket> Engine::poll_transmit(std::span<std::byte> out, Time now) {
  return impl_->poll_transmit(out, now);
}
Time Engine::next_deadline() const { return impl_->next_deadline(); }
const EngineStats& Engine::stats() const { return impl_->stats_; }

}  // namespace sroce
