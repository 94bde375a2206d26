// Verbs objects other than the QP: PD, MR, CQ, SRQ (and its receive queue,
// shared with the QP's own RQ), AH. Plain data; the logic is in objects.cc.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "sroce/engine/verbs.h"
#include "table.h"

namespace sroce::eng {

constexpr uint32_t round_pow2(uint32_t v) { return v <= 1 ? 1 : 1u << ceil_log2(v); }

struct Pd {
  uint32_t refs = 0;  // MRs, QPs, AHs, SRQs using it (dealloc_pd -> EBUSY)
};

struct Mr {
  // Its own slot in the MR table (set at allocation): the table is built in
  // segments, so a slot is never a pointer difference.
  uint32_t slot = 0;
  uint32_t lkey = 0;
  uint32_t rkey = 0;
  uint32_t pd = 0;    // PD slot
  uint64_t iova = 0;  // address the keys are used with (0 for ZERO_BASED)
  uint64_t addr = 0;  // host virtual address handed to MemoryAccess
  uint64_t length = 0;
  uint32_t access = 0;
  bool invalidated = false;  // by a SEND with Invalidate (IBA 10.6); a window: not bound
  // Memory windows (mw.cc) live in the MR table so that they share its R_Key space: one
  // lookup finds either. For a window, iova/length/access are the bound window's and addr
  // the host address of its first byte; lkey stays 0 and mr_by_lkey never returns it.
  uint8_t kind = 0;          // 0: MR; kMwType1 / kMwType2: a memory window
  uint32_t mw_mr = 0;        // window: slot of the MR it is bound to (valid while bound)
  Qpn mw_qpn = 0;            // type 2 window: the QP it was bound through (IBA 10.6.7.2.2)
  uint32_t mw_bound = 0;     // MR: windows bound to it (dereg/rereg EBUSY while > 0)
};

// [va, va + len) lies inside the MR's (or bound window's) range; no overflow.
inline bool covers(const Mr& mr, uint64_t va, uint64_t len) {
  return va >= mr.iova && len <= mr.length && va - mr.iova <= mr.length - len;
}

// One receive WQE; its SGEs live in the owning queue's flat SGE array.
struct RecvWqe {
  uint64_t wr_id = 0;
  uint32_t num_sge = 0;
  uint32_t length = 0;  // sum of the SGE lengths
};

// A ring of receive WQEs (a QP's RQ or an SRQ). Capacity fixed at creation.
class RecvQueue {
 public:
  void init(uint32_t max_wr, uint32_t max_sge) {
    max_wr_ = max_wr;
    max_sge_ = max_sge == 0 ? 1 : max_sge;
    mask_ = round_pow2(max_wr == 0 ? 1 : max_wr) - 1;
    wqe_.assign(mask_ + 1, RecvWqe{});
    sge_.assign(static_cast<size_t>(mask_ + 1) * max_sge_, Sge{});
    head_ = tail_ = 0;
  }
  uint32_t count() const { return tail_ - head_; }
  bool empty() const { return head_ == tail_; }
  bool full() const { return count() >= max_wr_; }
  uint32_t max_wr() const { return max_wr_; }
  uint32_t max_sge() const { return max_sge_; }
  void clear() { head_ = tail_; }

  // Caller checked num_sge <= max_sge and !full().
  void push(const RecvWr& wr) {
    const uint32_t i = tail_ & mask_;
    RecvWqe& w = wqe_[i];
    w.wr_id = wr.wr_id;
    w.num_sge = static_cast<uint32_t>(wr.sgl.size());
    uint64_t len = 0;
    Sge* s = &sge_[static_cast<size_t>(i) * max_sge_];
    for (size_t k = 0; k < wr.sgl.size(); ++k) {
      s[k] = wr.sgl[k];
      len += wr.sgl[k].length;
    }
    w.length = len > UINT32_MAX ? UINT32_MAX : static_cast<uint32_t>(len);
    ++tail_;
  }
  // Moves `from`'s front WQE to the back of this queue (caller checked
  // !from.empty(), !full() and from.max_sge() <= max_sge()): a QP on an SRQ
  // holds the WQEs its early lossy SENDs were placed in (docs/lossy.md).
  void take_front(RecvQueue& from) {
    const uint32_t i = tail_ & mask_;
    const RecvWqe& w = from.front();
    wqe_[i] = w;
    std::copy_n(from.front_sges(), w.num_sge, &sge_[static_cast<size_t>(i) * max_sge_]);
    from.pop();
    ++tail_;
  }
  // Puts a WQE back in front of the others (false when full): a QP that
  // leaves the SRQ's WQEs it held unused returns them (qp_error.cc).
  bool push_front(const RecvWqe& w, const Sge* sges) {
    if (full() || w.num_sge > max_sge_) return false;
    --head_;
    const uint32_t i = head_ & mask_;
    wqe_[i] = w;
    std::copy_n(sges, w.num_sge, &sge_[static_cast<size_t>(i) * max_sge_]);
    return true;
  }
  const RecvWqe& front() const { return wqe_[head_ & mask_]; }
  const Sge* front_sges() const { return &sge_[static_cast<size_t>(head_ & mask_) * max_sge_]; }
  void pop() { ++head_; }
  // k-th WQE after the front (k < count()): lossy mode places SEND data into
  // a receive WQE before the earlier ones complete (docs/lossy.md).
  const RecvWqe& at(uint32_t k) const { return wqe_[(head_ + k) & mask_]; }
  const Sge* sges_at(uint32_t k) const {
    return &sge_[static_cast<size_t>((head_ + k) & mask_) * max_sge_];
  }
  size_t memory_bytes() const {
    return wqe_.capacity() * sizeof(RecvWqe) + sge_.capacity() * sizeof(Sge);
  }

 private:
  std::vector<RecvWqe> wqe_;
  std::vector<Sge> sge_;
  uint32_t max_wr_ = 0;
  uint32_t max_sge_ = 1;
  uint32_t mask_ = 0;
  uint32_t head_ = 0;
  uint32_t tail_ = 0;
};

struct Cq {
  std::vector<Wc> ring;
  uint32_t mask = 0;
  uint32_t cqe = 0;  // usable entries (>= the requested count)
  uint32_t head = 0;
  uint32_t tail = 0;
  uint32_t refs = 0;  // QPs using it (destroy_cq -> EBUSY)
  Handle handle = kNoHandle;
  bool armed = false;
  bool solicited_only = false;
  bool notify_queued = false;
  bool overflowed = false;  // IBA 11.4: CQ overflow is a CQ error
};

struct Srq {
  uint32_t pd = 0;
  RecvQueue rq;
  uint32_t limit = 0;  // armed when non-zero (IBA 10.2, 11.2)
  uint32_t refs = 0;   // QPs attached
  Handle handle = kNoHandle;
};

struct Ah {
  uint32_t pd = 0;
  AhAttr attr;
};

}  // namespace sroce::eng
