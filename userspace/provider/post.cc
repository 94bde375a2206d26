// The data path: ibv_post_send / ibv_post_recv / ibv_post_srq_recv write work requests into
// the shared rings and move the producer index. No system call, except the doorbell when the
// daemon has gone to sleep on the ring.
#include <arpa/inet.h>
#include <errno.h>
#include <string.h>

#include "post_util.h"
#include "provider.h"

namespace sroce::provider {

uint32_t wc_opcode_for(ibv_wr_opcode op) {
  switch (op) {
    case IBV_WR_RDMA_WRITE:
    case IBV_WR_RDMA_WRITE_WITH_IMM:
      return IBV_WC_RDMA_WRITE;
    case IBV_WR_RDMA_READ:
      return IBV_WC_RDMA_READ;
    case IBV_WR_ATOMIC_CMP_AND_SWP:
      return IBV_WC_COMP_SWAP;
    case IBV_WR_ATOMIC_FETCH_AND_ADD:
      return IBV_WC_FETCH_ADD;
    case IBV_WR_LOCAL_INV:
      return IBV_WC_LOCAL_INV;
    case IBV_WR_BIND_MW:
      return IBV_WC_BIND_MW;
    default:
      return IBV_WC_SEND;
  }
}

// Which operations each transport carries (IBA ch. 9, the operations each transport service
// supports).
bool opcode_valid(ibv_qp_type type, ibv_wr_opcode op) {
  switch (op) {
    case IBV_WR_SEND:
    case IBV_WR_SEND_WITH_IMM:
      return true;
    case IBV_WR_RDMA_WRITE:
    case IBV_WR_RDMA_WRITE_WITH_IMM:
      return type == IBV_QPT_RC || type == IBV_QPT_UC;
    case IBV_WR_RDMA_READ:
    case IBV_WR_ATOMIC_CMP_AND_SWP:
    case IBV_WR_ATOMIC_FETCH_AND_ADD:
    case IBV_WR_SEND_WITH_INV:
      return type == IBV_QPT_RC;
    case IBV_WR_BIND_MW:  // memory windows (mw.cc): connected QPs
    case IBV_WR_LOCAL_INV:
      return type == IBV_QPT_RC || type == IBV_QPT_UC;
    default:
      return false;
  }
}

bool send_state_ok(const Qp* qp) {
  // IBA 10.8: work requests may be posted to the send queue in RTS, SQD, SQE and Error
  // (where they are flushed), not before the QP is ready to send.
  ibv_qp_state s = qp->vqp.qp.state;
  return s != IBV_QPS_RESET && s != IBV_QPS_INIT && s != IBV_QPS_RTR;
}

bool send_space(Qp* qp, uint32_t prod, uint32_t shadow_head) {
  if (prod - qp->sq.load_cons_acquire() >= qp->sq.size()) return false;
  return shadow_head - qp->sq_shadow.tail.load(std::memory_order_acquire) < qp->sq_shadow.capacity;
}

void record_send(Qp* qp, uint32_t shadow_index, uint64_t wr_id, uint32_t flags, ibv_wr_opcode op) {
  Shadow::Entry& e = qp->sq_shadow.at(shadow_index);
  e.wr_id = wr_id;
  e.signaled = (qp->sq_sig_all || (flags & IBV_SEND_SIGNALED)) ? 1 : 0;
  e.opcode = wc_opcode_for(op);
}

namespace {

int build_send(Qp* qp, const ibv_send_wr* wr, uint8_t* slot) {
  if (!opcode_valid(qp->type, wr->opcode)) return EINVAL;
  if (wr->num_sge < 0 || static_cast<uint32_t>(wr->num_sge) > qp->cap.max_send_sge) return EINVAL;
  auto* w = reinterpret_cast<sroce_send_wqe*>(slot);
  memset(w, 0, sizeof(*w));
  w->wr_id = wr->wr_id;
  w->opcode = static_cast<uint8_t>(wr->opcode);
  w->send_flags = wr->send_flags;
  if (wr->opcode == IBV_WR_BIND_MW) return fill_bind(w, wr->bind_mw.mw, wr->bind_mw.rkey,
                                                     &wr->bind_mw.bind_info);  // mw.cc
  if (wr->opcode == IBV_WR_SEND_WITH_INV || wr->opcode == IBV_WR_LOCAL_INV) {
    w->imm_data = wr->invalidate_rkey;
  } else if (wr->opcode == IBV_WR_SEND_WITH_IMM || wr->opcode == IBV_WR_RDMA_WRITE_WITH_IMM) {
    w->imm_data = ntohl(wr->imm_data);
  }
  switch (wr->opcode) {
    case IBV_WR_RDMA_WRITE:
    case IBV_WR_RDMA_WRITE_WITH_IMM:
    case IBV_WR_RDMA_READ:
      w->remote_addr = wr->wr.rdma.remote_addr;
      w->rkey = wr->wr.rdma.rkey;
      break;
    case IBV_WR_ATOMIC_CMP_AND_SWP:
    case IBV_WR_ATOMIC_FETCH_AND_ADD:
      w->remote_addr = wr->wr.atomic.remote_addr;
      w->rkey = wr->wr.atomic.rkey;
      w->compare_add = wr->wr.atomic.compare_add;
      w->swap = wr->wr.atomic.swap;
      break;
    default:
      break;
  }
  if (qp->type == IBV_QPT_UD) {
    if (wr->wr.ud.ah == nullptr) return EINVAL;
    w->ah = to_ah(wr->wr.ud.ah)->wqe_handle;
    w->remote_qpn = wr->wr.ud.remote_qpn;
    w->remote_qkey = wr->wr.ud.remote_qkey;
  }
  const uint32_t room = qp->sq.entry_size() - sizeof(sroce_send_wqe);
  uint8_t* payload = slot + sizeof(sroce_send_wqe);
  if ((wr->send_flags & IBV_SEND_INLINE) && wr->opcode != IBV_WR_RDMA_READ &&
      wr->opcode != IBV_WR_ATOMIC_CMP_AND_SWP && wr->opcode != IBV_WR_ATOMIC_FETCH_AND_ADD) {
    // The verbs let the caller reuse the buffer as soon as post returns: copy now.
    uint32_t total = 0;
    for (int i = 0; i < wr->num_sge; ++i) {
      uint32_t len = wr->sg_list[i].length;
      if (len > qp->cap.max_inline_data - total || len > room - total) return EINVAL;
      memcpy(payload + total, reinterpret_cast<const void*>(wr->sg_list[i].addr), len);
      total += len;
    }
    w->inline_len = total;
    return 0;
  }
  w->send_flags &= ~uint32_t{IBV_SEND_INLINE};
  if (wr->opcode == IBV_WR_LOCAL_INV) return 0;  // no SGEs
  if (static_cast<uint32_t>(wr->num_sge) * sizeof(sroce_sge) > room) return EINVAL;
  auto* sge = reinterpret_cast<sroce_sge*>(payload);
  for (int i = 0; i < wr->num_sge; ++i) {
    sge[i].addr = wr->sg_list[i].addr;
    sge[i].length = wr->sg_list[i].length;
    sge[i].lkey = wr->sg_list[i].lkey;
  }
  w->num_sge = static_cast<uint16_t>(wr->num_sge);
  return 0;
}

int build_recv(const ibv_recv_wr* wr, uint8_t* slot, uint32_t max_sge, uint32_t entry_size) {
  if (wr->num_sge < 0 || static_cast<uint32_t>(wr->num_sge) > max_sge) return EINVAL;
  if (sizeof(sroce_recv_wqe) + static_cast<size_t>(wr->num_sge) * sizeof(sroce_sge) > entry_size)
    return EINVAL;
  auto* w = reinterpret_cast<sroce_recv_wqe*>(slot);
  w->wr_id = wr->wr_id;
  w->num_sge = static_cast<uint32_t>(wr->num_sge);
  w->reserved = 0;
  auto* sge = reinterpret_cast<sroce_sge*>(slot + sizeof(sroce_recv_wqe));
  for (int i = 0; i < wr->num_sge; ++i) {
    sge[i].addr = wr->sg_list[i].addr;
    sge[i].length = wr->sg_list[i].length;
    sge[i].lkey = wr->sg_list[i].lkey;
  }
  return 0;
}

}  // namespace

int verb_post_send(ibv_qp* ibqp, ibv_send_wr* wr, ibv_send_wr** bad_wr) {
  Qp* qp = to_qp(ibqp);
  if (!send_state_ok(qp)) {
    *bad_wr = wr;
    return EINVAL;
  }
  qp->sq_lock.lock();
  uint32_t prod = qp->sq.header()->prod;  // we are the only writer of prod
  uint32_t head = qp->sq_shadow.head.load(std::memory_order_relaxed);
  const uint32_t first = prod;
  int err = 0;
  for (; wr != nullptr; wr = wr->next) {
    if (!send_space(qp, prod, head)) {
      err = ENOMEM;
      break;
    }
    err = build_send(qp, wr, qp->sq.slot(prod));
    if (err != 0) break;
    record_send(qp, head, wr->wr_id, wr->send_flags, wr->opcode);
    ++prod;
    ++head;
  }
  if (err != 0) *bad_wr = wr;
  if (prod != first) {
    qp->sq_shadow.head.store(head, std::memory_order_release);
    qp->sq.store_prod_release(prod);
    ring_doorbell(qp->ctx, qp->sq, IB_USER_VERBS_CMD_POST_SEND, qp->vqp.qp.handle);
  }
  qp->sq_lock.unlock();
  return err;
}

int verb_post_recv(ibv_qp* ibqp, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) {
  Qp* qp = to_qp(ibqp);
  // A QP attached to an SRQ has no receive queue of its own (IBA 10.2, shared receive queues);
  // receive work cannot be posted before the QP leaves Reset (IBA 10.8).
  if (qp->srq != nullptr || qp->vqp.qp.state == IBV_QPS_RESET) {
    *bad_wr = wr;
    return EINVAL;
  }
  qp->rq_lock.lock();
  uint32_t prod = qp->rq.header()->prod;
  uint32_t head = qp->rq_shadow.head.load(std::memory_order_relaxed);
  const uint32_t first = prod;
  int err = 0;
  for (; wr != nullptr; wr = wr->next) {
    if (prod - qp->rq.load_cons_acquire() >= qp->rq.size() ||
        head - qp->rq_shadow.tail.load(std::memory_order_acquire) >= qp->rq_shadow.capacity) {
      err = ENOMEM;
      break;
    }
    err = build_recv(wr, qp->rq.slot(prod), qp->cap.max_recv_sge, qp->rq.entry_size());
    if (err != 0) break;
    Shadow::Entry& e = qp->rq_shadow.at(head);
    e.wr_id = wr->wr_id;
    e.signaled = 1;
    e.opcode = IBV_WC_RECV;
    ++prod;
    ++head;
  }
  if (err != 0) *bad_wr = wr;
  if (prod != first) {
    qp->rq_shadow.head.store(head, std::memory_order_release);
    qp->rq.store_prod_release(prod);
    ring_doorbell(qp->ctx, qp->rq, IB_USER_VERBS_CMD_POST_RECV, qp->vqp.qp.handle);
  }
  qp->rq_lock.unlock();
  return err;
}

int verb_post_srq_recv(ibv_srq* ibsrq, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) {
  Srq* srq = to_srq(ibsrq);
  srq->lock.lock();
  uint32_t prod = srq->ring.header()->prod;
  const uint32_t first = prod;
  int err = 0;
  for (; wr != nullptr; wr = wr->next) {
    if (prod - srq->ring.load_cons_acquire() >= srq->ring.size()) {
      err = ENOMEM;
      break;
    }
    err = build_recv(wr, srq->ring.slot(prod), srq->max_sge, srq->ring.entry_size());
    if (err != 0) break;
    ++prod;
  }
  if (err != 0) *bad_wr = wr;
  if (prod != first) {
    srq->ring.store_prod_release(prod);
    ring_doorbell(srq->ctx, srq->ring, IB_USER_VERBS_CMD_POST_SRQ_RECV, srq->srq.handle);
  }
  srq->lock.unlock();
  return err;
}

}  // namespace sroce::provider
