// Memory windows (IBA 10.6.7) and invalidation (10.6.7.2.3, 9.4.1.1.5).
//
// A window is an entry of the MR table (objects.h) so that it shares the MRs' R_Key space:
// the responder's one lookup finds an MR or a window, and check_rkey (memory.cc) treats a
// bound window as a small MR (its range, rights and host address are set at bind time).
// Type 1 windows belong to their PD; type 2 windows (type 2B, which is what the
// IBV_DEVICE_MEM_WINDOW_TYPE_2B capability promises) are also associated with the QP that
// bound them, and only that QP's responder accepts their R_Key.
//
// Binds and local invalidations are send-queue work requests that move no packet: the
// requester runs them when it reaches them (req_local_ops), in order with the WRs around
// them, and they complete after every earlier WR (IBA 10.8.3: completions in order).
#include <cerrno>
#include <string>

#include "impl.h"

namespace sroce {

using namespace eng;

namespace {

Error err(int code, std::string msg) { return Error{code, std::move(msg)}; }

// IBA 10.6.7.2: the access a window may grant (local write is accepted and meaningless,
// as libibverbs programs pass it; zero-based addressing only for type 2).
constexpr uint32_t kMwAccessKnown = kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead |
                                    kAccessRemoteAtomic | kAccessZeroBased;

bool is_local_op(WrOpcode op) { return op == WrOpcode::kBindMw || op == WrOpcode::kLocalInv; }

}  // namespace

Mr* Engine::Impl::mw_by_handle(Handle h) {
  if (h == kNoHandle) return nullptr;
  const uint32_t s = mrs_.slot_of(h);
  if (s == kNone || mrs_[s].kind == 0) return nullptr;
  return &mrs_[s];
}

Result<MwKeys> Engine::Impl::alloc_mw(Handle pd, uint8_t type) {
  const uint32_t p = pd_slot(pd);
  if (p == kNone) return err(EINVAL, "alloc_mw: no such PD");
  if (type != kMwType1 && type != kMwType2)
    return err(EINVAL, "alloc_mw: type " + std::to_string(type) + " is not 1 or 2");
  const uint32_t s = mrs_.alloc();
  if (s == kNone)
    return err(ENOMEM, "alloc_mw: all " + std::to_string(cfg_.max_mrs) + " MRs/MWs in use");
  Mr& mw = mrs_[s];
  mw.slot = s;
  const uint32_t id = mrs_.id(s);
  const uint32_t k = key_bits();
  mw.kind = type;
  mw.rkey = (perm_rkey_.fwd(id) << 8) | static_cast<uint32_t>(k & 0xff);
  mw.pd = p;
  mw.invalidated = true;  // nothing bound yet: the R_Key grants nothing
  ++pds_[p].refs;
  return MwKeys{id, mw.rkey};
}

void Engine::Impl::mw_unbind(Mr& mw) {
  if (!mw.invalidated && mrs_.used(mw.mw_mr) && mrs_[mw.mw_mr].mw_bound > 0)
    --mrs_[mw.mw_mr].mw_bound;
  mw.invalidated = true;
  fence_mr(mw);
  mw.length = 0;
  mw.access = 0;
  mw.mw_qpn = 0;
}

// IBA 11.2.9 (Deallocate Memory Window): a bound window is unbound first; its R_Key is
// refused from then on (the slot's next tenant gets another generation, hence other keys).
Result<void> Engine::Impl::dealloc_mw(Handle h) {
  Mr* mw = mw_by_handle(h);
  if (!mw) return err(EINVAL, "dealloc_mw: no such memory window");
  mw_unbind(*mw);
  --pds_[mw->pd].refs;
  fence_mr(*mw);
  mrs_.release(mw->slot);
  return {};
}

// IBA 10.6.7.2 (binding), checked before anything changes; any failure is
// IBV_WC_MW_BIND_ERR and the QP goes to the error state (as rxe).
// The WQE carries (post.cc): remote_addr/compare_add = window address/length, rkey = the new
// R_Key, swap = MW handle | MR lkey << 32, imm = the window's access.
WcStatus Engine::Impl::mw_bind(Qp& qp, const SendWqe& w) {
  const Handle h = static_cast<Handle>(w.swap & 0xffffffffu);
  const uint32_t lkey = static_cast<uint32_t>(w.swap >> 32);
  const uint64_t addr = w.remote_addr, length = w.compare_add;
  const uint32_t access = w.imm;
  Mr* mw = mw_by_handle(h);
  if (!mw || mw->pd != qp.pd) return WcStatus::kMwBindErr;  // C10-72: same PD as the QP
  if ((w.rkey >> 8) != (mw->rkey >> 8)) return WcStatus::kMwBindErr;  // only the key byte changes
  // A bound type 2 window must be invalidated before it is bound again (IBA 10.6.7.2.2).
  if (mw->kind == kMwType2 && !mw->invalidated) return WcStatus::kMwBindErr;
  if (access & ~kMwAccessKnown) return WcStatus::kMwBindErr;
  if ((access & kAccessZeroBased) && mw->kind == kMwType1) return WcStatus::kMwBindErr;
  if (length == 0) {
    // A zero-length bind unbinds (type 1's way to invalidate, IBA 10.6.7.2.1).
    mw_unbind(*mw);
    mw->rkey = w.rkey;
    return WcStatus::kSuccess;
  }
  Mr* mr = mr_by_lkey(lkey);
  if (!mr || mr->pd != qp.pd || mr->invalidated) return WcStatus::kMwBindErr;  // C10-74
  if (!(mr->access & kAccessMwBind)) return WcStatus::kMwBindErr;               // C10-75
  // Remote write or atomic through the window needs local write on the MR.
  if ((access & (kAccessRemoteWrite | kAccessRemoteAtomic)) && !(mr->access & kAccessLocalWrite))
    return WcStatus::kMwBindErr;
  if (!covers(*mr, addr, length)) return WcStatus::kMwBindErr;  // the window lies in the MR
  const uint32_t mr_slot = mr->slot;
  mw_unbind(*mw);  // type 1: a bind replaces the previous binding
  mw->mw_mr = mr_slot;
  ++mr->mw_bound;
  mw->iova = (access & kAccessZeroBased) ? 0 : addr;
  mw->addr = mr->addr + (addr - mr->iova);
  mw->length = length;
  mw->access = access;
  mw->mw_qpn = mw->kind == kMwType2 ? qp.qpn : 0;
  mw->rkey = w.rkey;
  mw->invalidated = false;
  return WcStatus::kSuccess;
}

// IBV_WR_LOCAL_INV (IBA 10.6.7.2.3): a type 2 window of the QP's PD, or an MR (the
// extension SEND with Invalidate already had). A type 1 window cannot be invalidated
// this way. Failure: LOC_QP_OP_ERR (as rxe).
WcStatus Engine::Impl::local_invalidate(Qp& qp, uint32_t rkey) {
  Mr* m = mr_by_rkey(rkey);
  if (!m || m->pd != qp.pd || m->kind == kMwType1) return WcStatus::kLocQpOpErr;
  if (m->kind == kMwType2) {
    if (m->invalidated) return WcStatus::kLocQpOpErr;
    mw_unbind(*m);
    return WcStatus::kSuccess;
  }
  m->invalidated = true;
  fence_mr(*m);
  return WcStatus::kSuccess;
}

// SEND with Invalidate (IBA 9.4.1.1.5, 10.6.7.2.3): a type 2 window only through the QP it
// is bound to; an MR of the QP's PD (an extension, see docs/engine.md).
bool Engine::Impl::remote_invalidate(Qp& qp, uint32_t rkey) {
  Mr* m = mr_by_rkey(rkey);
  if (!m || m->pd != qp.pd || m->kind == kMwType1) return false;
  if (m->kind == kMwType2) {
    if (m->invalidated || m->mw_qpn != qp.qpn) return false;
    mw_unbind(*m);
    return true;
  }
  m->invalidated = true;
  fence_mr(*m);
  return true;
}

bool Engine::Impl::req_local_ops(Qp& qp) {
  while (qp.sq_next != qp.sq_tail && is_local_op(qp.wqe(qp.sq_next).opcode)) {
    const uint32_t idx = qp.sq_next;
    SendWqe& w = qp.wqe(idx);
    if (w.started) {
      if (w.err != WcStatus::kSuccess) {
        if (qp.sq_head == idx) req_fatal(qp, w.err);
        return false;
      }
      ++qp.sq_next;  // executed before a rewind to an earlier WQE: not again
      continue;
    }
    if (qp.state == QpState::kSqd) return false;  // IBA 10.3: no new WQE in SQD
    // Fence (IBA 10.8.3.3): wait for the earlier READ/atomic responses.
    if ((w.flags & kWqeFence) && qp.rd_atomic_inflight > 0) return false;
    if (w.err == WcStatus::kSuccess)
      w.err = w.opcode == WrOpcode::kBindMw ? mw_bind(qp, w) : local_invalidate(qp, w.imm);
    w.started = true;
    w.done = true;
    w.counted = false;
    // No PSN: [first, last] is empty, so rewinds and the lossy sender never find it.
    w.first_psn = qp.req_psn;
    w.last_psn = psn_add(qp.req_psn, -1);
    if (w.err != WcStatus::kSuccess) {
      if (qp.sq_head == idx) req_fatal(qp, w.err);
      return false;
    }
    ++qp.sq_next;
    if (qp.sq_head == idx) {
      // Everything before it has completed: so has it. Otherwise the completer retires
      // it right after the WQE before it (its empty PSN range is already acknowledged).
      ++qp.sq_head;
      complete_send(qp, w, WcStatus::kSuccess);
      check_sq_drained(qp);
    }
  }
  return true;
}

}  // namespace sroce
