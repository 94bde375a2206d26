// What the engine holds in memory (Engine::memory_bytes, qp_memory_bytes):
// the sum of the sizes it allocated, object by object, so that a test and
// sroce-sim can check that memory follows the caps and the QPs in use
// (docs/engine.md, "Memory").
#include "impl.h"

namespace sroce {

using namespace eng;

namespace {

template <typename T>
size_t vec_bytes(const std::vector<T>& v) {
  return v.capacity() * sizeof(T);
}

// Heap memory of one QP beyond its table slot.
size_t qp_heap_bytes(const Qp& q) {
  size_t n = vec_bytes(q.sq) + vec_bytes(q.sq_sge) + vec_bytes(q.sq_host) +
             vec_bytes(q.sq_inline) + vec_bytes(q.rwqe_sge) + vec_bytes(q.res) +
             q.rq.memory_bytes() + vec_bytes(q.cc.lanes) + vec_bytes(q.cc.sent);
  const Lossy& l = q.lossy;
  if (l.tx_mem) n += sizeof(LossyTxMem);
  if (l.rx_mem) n += sizeof(LossyRxMem);
  n += l.lanes.size() * sizeof(LaneTx) + l.rd_tx.size() * sizeof(RdLaneTx);
  return n;
}

}  // namespace

Result<size_t> Engine::Impl::qp_memory_bytes(Qpn qpn) const {
  const uint32_t s = qp_slot(qpn);
  if (s == kNone) return Error{EINVAL, "qp_memory_bytes: no such QP"};
  return sizeof(Qp) + qp_heap_bytes(qps_[s]);
}

size_t Engine::Impl::memory_bytes() const {
  size_t n = sizeof(Impl) + pds_.memory_bytes() + mrs_.memory_bytes() + cqs_.memory_bytes() +
             srqs_.memory_bytes() + ahs_.memory_bytes() + qps_.memory_bytes() +
             events_.memory_bytes() + notifications_.memory_bytes() + vec_bytes(heap_) +
             vec_bytes(heap_key_) + vec_bytes(gids_);
  if (cc_.nic) n += sizeof(*cc_.nic);
  for (uint32_t s = 0; s < cqs_.built(); ++s)
    if (cqs_.used(s)) n += vec_bytes(cqs_[s].ring);
  for (uint32_t s = 0; s < srqs_.built(); ++s)
    if (srqs_.used(s)) n += srqs_[s].rq.memory_bytes();
  for (uint32_t s = 0; s < qps_.built(); ++s)
    if (qps_.used(s)) n += qp_heap_bytes(qps_[s]);
  return n;
}

}  // namespace sroce
