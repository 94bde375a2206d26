// The extended send API of ibv_create_qp_ex (ibv_wr_start, ibv_wr_send, ibv_wr_set_sge, ...,
// ibv_wr_complete). A batch builds WQEs past the published producer index under the send lock;
// wr_complete publishes them all at once, wr_abort forgets them. Errors found while building
// are remembered and returned by wr_complete, as the verbs specify.
#include <arpa/inet.h>
#include <errno.h>
#include <string.h>

#include "post_util.h"
#include "provider.h"

namespace sroce::provider {
namespace {

void wr_start(ibv_qp_ex* qpx) {
  Qp* qp = to_qp(qpx);
  qp->sq_lock.lock();
  qp->wr_open = true;
  qp->wr_error = send_state_ok(qp) ? 0 : EINVAL;
  qp->wr_prod = qp->sq.header()->prod;
  qp->wr_shadow = qp->sq_shadow.head.load(std::memory_order_relaxed);
  qp->wr_cur = nullptr;
}

int wr_complete(ibv_qp_ex* qpx) {
  Qp* qp = to_qp(qpx);
  int err = qp->wr_error;
  if (err == 0 && qp->wr_prod != qp->sq.header()->prod) {
    qp->sq_shadow.head.store(qp->wr_shadow, std::memory_order_release);
    qp->sq.store_prod_release(qp->wr_prod);
    ring_doorbell(qp->ctx, qp->sq, IB_USER_VERBS_CMD_POST_SEND, qp->vqp.qp.handle);
  }
  qp->wr_open = false;
  qp->wr_cur = nullptr;
  qp->sq_lock.unlock();
  return err;
}

void wr_abort(ibv_qp_ex* qpx) {
  Qp* qp = to_qp(qpx);
  qp->wr_open = false;
  qp->wr_cur = nullptr;
  qp->sq_lock.unlock();
}

void fail(Qp* qp, int err) {
  if (qp->wr_error == 0) qp->wr_error = err;
  qp->wr_cur = nullptr;
}

// Starts the next WQE of the batch; later wr_set_* calls fill in its data.
sroce_send_wqe* begin(ibv_qp_ex* qpx, ibv_wr_opcode op) {
  Qp* qp = to_qp(qpx);
  if (qp->wr_error != 0) return nullptr;
  if (!opcode_valid(qp->type, op)) {
    fail(qp, EINVAL);
    return nullptr;
  }
  if (!send_space(qp, qp->wr_prod, qp->wr_shadow)) {
    fail(qp, ENOMEM);
    return nullptr;
  }
  auto* w = reinterpret_cast<sroce_send_wqe*>(qp->sq.slot(qp->wr_prod));
  memset(w, 0, sizeof(*w));
  w->wr_id = qpx->wr_id;
  w->opcode = static_cast<uint8_t>(op);
  w->send_flags = qpx->wr_flags & ~uint32_t{IBV_SEND_INLINE};
  record_send(qp, qp->wr_shadow, qpx->wr_id, qpx->wr_flags, op);
  ++qp->wr_prod;
  ++qp->wr_shadow;
  qp->wr_cur = w;
  return w;
}

void wr_send(ibv_qp_ex* qpx) { begin(qpx, IBV_WR_SEND); }

void wr_send_imm(ibv_qp_ex* qpx, __be32 imm) {
  if (auto* w = begin(qpx, IBV_WR_SEND_WITH_IMM)) w->imm_data = ntohl(imm);
}

void wr_send_inv(ibv_qp_ex* qpx, uint32_t rkey) {
  if (auto* w = begin(qpx, IBV_WR_SEND_WITH_INV)) w->imm_data = rkey;
}

void wr_rdma_write(ibv_qp_ex* qpx, uint32_t rkey, uint64_t addr) {
  if (auto* w = begin(qpx, IBV_WR_RDMA_WRITE)) {
    w->rkey = rkey;
    w->remote_addr = addr;
  }
}

void wr_rdma_write_imm(ibv_qp_ex* qpx, uint32_t rkey, uint64_t addr, __be32 imm) {
  if (auto* w = begin(qpx, IBV_WR_RDMA_WRITE_WITH_IMM)) {
    w->rkey = rkey;
    w->remote_addr = addr;
    w->imm_data = ntohl(imm);
  }
}

void wr_rdma_read(ibv_qp_ex* qpx, uint32_t rkey, uint64_t addr) {
  if (auto* w = begin(qpx, IBV_WR_RDMA_READ)) {
    w->rkey = rkey;
    w->remote_addr = addr;
  }
}

void wr_atomic_cmp_swp(ibv_qp_ex* qpx, uint32_t rkey, uint64_t addr, uint64_t compare,
                       uint64_t swap) {
  if (auto* w = begin(qpx, IBV_WR_ATOMIC_CMP_AND_SWP)) {
    w->rkey = rkey;
    w->remote_addr = addr;
    w->compare_add = compare;
    w->swap = swap;
  }
}

void wr_atomic_fetch_add(ibv_qp_ex* qpx, uint32_t rkey, uint64_t addr, uint64_t add) {
  if (auto* w = begin(qpx, IBV_WR_ATOMIC_FETCH_AND_ADD)) {
    w->rkey = rkey;
    w->remote_addr = addr;
    w->compare_add = add;
  }
}

void wr_set_ud_addr(ibv_qp_ex* qpx, ibv_ah* ah, uint32_t remote_qpn, uint32_t remote_qkey) {
  Qp* qp = to_qp(qpx);
  if (qp->wr_cur == nullptr) return;
  if (ah == nullptr) {
    fail(qp, EINVAL);
    return;
  }
  qp->wr_cur->ah = to_ah(ah)->wqe_handle;
  qp->wr_cur->remote_qpn = remote_qpn;
  qp->wr_cur->remote_qkey = remote_qkey;
}

void wr_set_sge_list(ibv_qp_ex* qpx, size_t num_sge, const ibv_sge* list) {
  Qp* qp = to_qp(qpx);
  sroce_send_wqe* w = qp->wr_cur;
  if (w == nullptr) return;
  if (num_sge > qp->cap.max_send_sge ||
      sizeof(sroce_send_wqe) + num_sge * sizeof(sroce_sge) > qp->sq.entry_size()) {
    fail(qp, EINVAL);
    return;
  }
  auto* sge = reinterpret_cast<sroce_sge*>(w + 1);
  for (size_t i = 0; i < num_sge; ++i) {
    sge[i].addr = list[i].addr;
    sge[i].length = list[i].length;
    sge[i].lkey = list[i].lkey;
  }
  w->num_sge = static_cast<uint16_t>(num_sge);
}

void wr_set_sge(ibv_qp_ex* qpx, uint32_t lkey, uint64_t addr, uint32_t length) {
  ibv_sge sge{addr, length, lkey};
  wr_set_sge_list(qpx, 1, &sge);
}

void wr_set_inline_data_list(ibv_qp_ex* qpx, size_t num_buf, const ibv_data_buf* bufs) {
  Qp* qp = to_qp(qpx);
  sroce_send_wqe* w = qp->wr_cur;
  if (w == nullptr) return;
  const size_t room = qp->sq.entry_size() - sizeof(sroce_send_wqe);
  size_t total = 0;
  auto* out = reinterpret_cast<uint8_t*>(w + 1);
  for (size_t i = 0; i < num_buf; ++i) {
    if (bufs[i].length > qp->cap.max_inline_data - total || bufs[i].length > room - total) {
      fail(qp, EINVAL);
      return;
    }
    memcpy(out + total, bufs[i].addr, bufs[i].length);
    total += bufs[i].length;
  }
  w->inline_len = static_cast<uint32_t>(total);
  w->num_sge = 0;
  w->send_flags |= IBV_SEND_INLINE;
}

void wr_set_inline_data(ibv_qp_ex* qpx, void* addr, size_t length) {
  ibv_data_buf buf{addr, length};
  wr_set_inline_data_list(qpx, 1, &buf);
}

void wr_bind_mw(ibv_qp_ex* qpx, ibv_mw* mw, uint32_t rkey, const ibv_mw_bind_info* info) {
  if (auto* w = begin(qpx, IBV_WR_BIND_MW)) {
    if (int err = fill_bind(w, mw, rkey, info); err != 0) fail(to_qp(qpx), err);
  }
}
void wr_local_inv(ibv_qp_ex* qpx, uint32_t rkey) {
  if (auto* w = begin(qpx, IBV_WR_LOCAL_INV)) w->imm_data = rkey;
}
// Operations sroce does not carry: the batch fails with EOPNOTSUPP at wr_complete.
void wr_send_tso(ibv_qp_ex* qpx, void*, uint16_t, uint16_t) { fail(to_qp(qpx), EOPNOTSUPP); }
void wr_set_xrc_srqn(ibv_qp_ex* qpx, uint32_t) { fail(to_qp(qpx), EOPNOTSUPP); }
void wr_atomic_write(ibv_qp_ex* qpx, uint32_t, uint64_t, const void*) {
  fail(to_qp(qpx), EOPNOTSUPP);
}

}  // namespace

void qp_ex_install(Qp* qp) {
  ibv_qp_ex& x = qp->vqp.qp_ex;
  x.wr_start = wr_start;
  x.wr_complete = wr_complete;
  x.wr_abort = wr_abort;
  x.wr_send = wr_send;
  x.wr_send_imm = wr_send_imm;
  x.wr_send_inv = wr_send_inv;
  x.wr_rdma_write = wr_rdma_write;
  x.wr_rdma_write_imm = wr_rdma_write_imm;
  x.wr_rdma_read = wr_rdma_read;
  x.wr_atomic_cmp_swp = wr_atomic_cmp_swp;
  x.wr_atomic_fetch_add = wr_atomic_fetch_add;
  x.wr_set_ud_addr = wr_set_ud_addr;
  x.wr_set_sge = wr_set_sge;
  x.wr_set_sge_list = wr_set_sge_list;
  x.wr_set_inline_data = wr_set_inline_data;
  x.wr_set_inline_data_list = wr_set_inline_data_list;
  x.wr_bind_mw = wr_bind_mw;
  x.wr_local_inv = wr_local_inv;
  x.wr_send_tso = wr_send_tso;
  x.wr_set_xrc_srqn = wr_set_xrc_srqn;
  x.wr_atomic_write = wr_atomic_write;
}

}  // namespace sroce::provider
