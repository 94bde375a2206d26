// Queue pairs: creation (rings mapped from the daemon's memfd), modify/query (the state
// machine itself lives in the daemon's engine), destruction.
#include <errno.h>
#include <rdma/ib_user_verbs.h>
#include <string.h>
#include <time.h>

#include <algorithm>
#include <new>

#include "provider.h"

namespace sroce::provider {
namespace {

constexpr uint64_t kQpExOps = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM |
                              IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM |
                              IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
                              IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD | IBV_QP_EX_WITH_SEND_WITH_INV |
                              IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_LOCAL_INV;  // mw.cc
constexpr uint64_t kQpExOpsUc = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM |
                                IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM |
                                IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_LOCAL_INV;
constexpr uint64_t kQpExOpsUd = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM;

struct CreateArgs {
  ibv_pd* pd;
  ibv_qp_type type;
  ibv_cq* send_cq;
  ibv_cq* recv_cq;
  ibv_srq* srq;
  ibv_qp_cap* cap;
  int sq_sig_all;
  void* qp_context;
  uint64_t send_ops_flags;  // non-zero: extended QP (ibv_wr_* API)
};

int check_create(Context* ctx, const CreateArgs& a) {
  if (a.type != IBV_QPT_RC && a.type != IBV_QPT_UC && a.type != IBV_QPT_UD) return EOPNOTSUPP;
  if (a.pd == nullptr || a.send_cq == nullptr || (a.recv_cq == nullptr && a.srq == nullptr))
    return EINVAL;
  const sroce_device_attr& d = ctx->st->dev_attr;
  const ibv_qp_cap& c = *a.cap;
  if (c.max_send_wr > d.max_qp_wr || c.max_recv_wr > d.max_qp_wr || c.max_send_sge > d.max_sge ||
      c.max_recv_sge > d.max_sge || c.max_inline_data > d.max_inline_data)
    return EINVAL;
  uint64_t allowed = a.type == IBV_QPT_RC   ? kQpExOps
                     : a.type == IBV_QPT_UC ? kQpExOpsUc
                                            : kQpExOpsUd;
  if (a.send_ops_flags & ~allowed) return EOPNOTSUPP;
  return 0;
}

ibv_qp* create_qp_common(Context* ctx, const CreateArgs& a) {
  int err = check_create(ctx, a);
  if (err != 0) {
    errno = err;
    return nullptr;
  }
  auto* qp = new (std::nothrow) Qp();
  if (qp == nullptr) {
    errno = ENOMEM;
    return nullptr;
  }
  sroce_create_qp_resp resp{};
  bool created = false;
  if (ctx->st->kernel) {
    ibv_qp_init_attr_ex ax{};
    ax.qp_context = a.qp_context;
    ax.send_cq = a.send_cq;
    ax.recv_cq = a.recv_cq != nullptr ? a.recv_cq : a.send_cq;
    ax.srq = a.srq;
    ax.cap = *a.cap;
    if (a.srq != nullptr) ax.cap.max_recv_wr = ax.cap.max_recv_sge = 0;
    ax.qp_type = a.type;
    ax.sq_sig_all = a.sq_sig_all;
    ax.comp_mask = IBV_QP_INIT_ATTR_PD;
    ax.pd = a.pd;
    err = kernel_create_qp(ctx, qp, &ax, &resp);  // checked and mapped, or nothing left
  } else {
  sroce_create_qp req{};
  req.pd = a.pd->handle;
  req.send_cq = a.send_cq->handle;
  req.recv_cq = a.recv_cq != nullptr ? a.recv_cq->handle : a.send_cq->handle;
  req.srq = a.srq != nullptr ? a.srq->handle : 0;
  req.qp_type = static_cast<uint8_t>(a.type);
  req.sq_sig_all = a.sq_sig_all ? 1 : 0;
  req.user_handle = reinterpret_cast<uintptr_t>(&qp->vqp.qp);
  req.cap.max_send_wr = a.cap->max_send_wr;
  req.cap.max_recv_wr = a.srq != nullptr ? 0 : a.cap->max_recv_wr;
  req.cap.max_send_sge = a.cap->max_send_sge;
  req.cap.max_recv_sge = a.srq != nullptr ? 0 : a.cap->max_recv_sge;
  req.cap.max_inline_data = a.cap->max_inline_data;
  ReplyFds fds;
  err = ctx->st->control.call(SROCE_OP_CREATE_QP, &req, sizeof(req), &resp, sizeof(resp), &fds);
  created = (err == 0);
  if (err == 0) err = qp->mapping.map(fds.take(0), resp.ring_bytes);
  }
  if (err == 0 && !ring_geometry_ok(qp->mapping, resp.sq_offset, sizeof(sroce_send_wqe)))
    err = EPROTO;
  if (err == 0 && a.srq == nullptr &&
      !ring_geometry_ok(qp->mapping, resp.rq_offset, sizeof(sroce_recv_wqe)))
    err = EPROTO;
  if (err != 0) {
    if (created) {
      sroce_handle_req dreq{resp.qpn, 0};
      sroce_destroy_qp_resp dresp{};
      ctx->st->control.call(SROCE_OP_DESTROY_QP, &dreq, sizeof(dreq), &dresp, sizeof(dresp));
    }
    qp->mapping.unmap();
    delete qp;
    errno = err;
    return nullptr;
  }
  auto* base = static_cast<uint8_t*>(qp->mapping.addr);
  qp->ctx = ctx;
  qp->qpn = resp.qpn;
  qp->type = a.type;
  qp->sq_sig_all = a.sq_sig_all != 0;
  qp->cap = resp.cap;
  qp->send_ops_flags = a.send_ops_flags;
  qp->send_cq = to_cq(a.send_cq);
  qp->recv_cq = to_cq(a.recv_cq != nullptr ? a.recv_cq : a.send_cq);
  qp->srq = a.srq != nullptr ? to_srq(a.srq) : nullptr;
  qp->sq = RingView(base + resp.sq_offset);
  if (a.srq == nullptr) qp->rq = RingView(base + resp.rq_offset);
  qp->sq_shadow.init(std::max<uint32_t>(resp.cap.max_send_wr, 1));
  qp->rq_shadow.init(std::max<uint32_t>(resp.cap.max_recv_wr, 1));

  ibv_qp& q = qp->vqp.qp;
  q.context = &ctx->vctx.context;
  q.qp_context = a.qp_context;
  q.pd = a.pd;
  q.send_cq = a.send_cq;
  q.recv_cq = a.recv_cq;
  q.srq = a.srq;
  if (!ctx->st->kernel) q.handle = resp.qpn;  // else the kernel's uverbs handle
  q.qp_num = resp.qpn;
  q.state = IBV_QPS_RESET;
  q.qp_type = a.type;
  pthread_mutex_init(&q.mutex, nullptr);
  pthread_cond_init(&q.cond, nullptr);
  q.events_completed = 0;

  a.cap->max_send_wr = resp.cap.max_send_wr;
  a.cap->max_send_sge = resp.cap.max_send_sge;
  a.cap->max_inline_data = resp.cap.max_inline_data;
  if (a.srq == nullptr) {
    a.cap->max_recv_wr = resp.cap.max_recv_wr;
    a.cap->max_recv_sge = resp.cap.max_recv_sge;
  }
  if (a.send_ops_flags != 0) {
    qp->vqp.comp_mask |= kVerbsQpEx;
    qp_ex_install(qp);
  }
  cq_attach_qp(qp->send_cq, qp);
  if (qp->recv_cq != qp->send_cq) cq_attach_qp(qp->recv_cq, qp);
  std::lock_guard<std::mutex> lock(ctx->st->objects_mutex);
  ctx->st->qps.push_back(qp);
  return &qp->vqp.qp;
}

}  // namespace

ibv_qp* verb_create_qp(ibv_pd* pd, ibv_qp_init_attr* attr) {
  CreateArgs a{pd,        attr->qp_type, attr->send_cq,    attr->recv_cq,
               attr->srq, &attr->cap,    attr->sq_sig_all, attr->qp_context,
               0};
  return create_qp_common(to_ctx(pd->context), a);
}

ibv_qp* verb_create_qp_ex(ibv_context* ibctx, ibv_qp_init_attr_ex* attr) {
  constexpr uint32_t kKnown =
      IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS | IBV_QP_INIT_ATTR_CREATE_FLAGS;
  // Blocking multicast loopback is trivially honoured: sroce has no multicast.
  constexpr uint32_t kCreateFlags = IBV_QP_CREATE_BLOCK_SELF_MCAST_LB;
  if (!(attr->comp_mask & IBV_QP_INIT_ATTR_PD)) {
    errno = EINVAL;
    return nullptr;
  }
  if ((attr->comp_mask & ~kKnown) ||
      ((attr->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) && (attr->create_flags & ~kCreateFlags))) {
    errno = EOPNOTSUPP;  // no XRC, RSS, TSO, source QPNs or other create flags
    return nullptr;
  }
  uint64_t ops = 0;
  if (attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) {
    ops = attr->send_ops_flags;
    if (ops == 0) {
      errno = EINVAL;
      return nullptr;
    }
  }
  CreateArgs a{attr->pd,         attr->qp_type,    attr->send_cq,
               attr->recv_cq,    attr->srq,        &attr->cap,
               attr->sq_sig_all, attr->qp_context, ops};
  return create_qp_common(to_ctx(ibctx), a);
}

int verb_modify_qp(ibv_qp* ibqp, ibv_qp_attr* attr, int mask) {
  Qp* qp = to_qp(ibqp);
  sroce_modify_qp req{};
  req.qpn = qp->qpn;
  req.attr_mask = static_cast<uint32_t>(mask);
  sroce_qp_attr& r = req.attr;
  r.qp_state = attr->qp_state;
  r.cur_qp_state = attr->cur_qp_state;
  r.path_mtu = attr->path_mtu;
  r.qkey = attr->qkey;
  r.rq_psn = attr->rq_psn;
  r.sq_psn = attr->sq_psn;
  r.dest_qp_num = attr->dest_qp_num;
  r.qp_access_flags = static_cast<uint32_t>(attr->qp_access_flags);
  r.cap.max_send_wr = attr->cap.max_send_wr;
  r.cap.max_recv_wr = attr->cap.max_recv_wr;
  r.cap.max_send_sge = attr->cap.max_send_sge;
  r.cap.max_recv_sge = attr->cap.max_recv_sge;
  r.cap.max_inline_data = attr->cap.max_inline_data;
  fill_ah_attr(&r.ah_attr, attr->ah_attr);
  r.pkey_index = attr->pkey_index;
  r.en_sqd_async_notify = attr->en_sqd_async_notify;
  r.sq_draining = attr->sq_draining;
  r.max_rd_atomic = attr->max_rd_atomic;
  r.max_dest_rd_atomic = attr->max_dest_rd_atomic;
  r.min_rnr_timer = attr->min_rnr_timer;
  r.port_num = attr->port_num;
  r.timeout = attr->timeout;
  r.retry_cnt = attr->retry_cnt;
  r.rnr_retry = attr->rnr_retry;
  int err;
  if (qp->ctx->st->kernel) {
    alignas(8) uint8_t cmd[sizeof(ib_uverbs_cmd_hdr) + sizeof(ib_uverbs_modify_qp)] = {};
    err = ibv_cmd_modify_qp(ibqp, attr, mask, cmd, sizeof(cmd));
  } else {
    err = qp->ctx->st->control.call(SROCE_OP_MODIFY_QP, &req, sizeof(req), nullptr, 0);
  }
  if (err != 0) return err;
  // IBA 10.3: a QP in Reset has no outstanding work; the daemon discarded its rings.
  if ((mask & IBV_QP_STATE) && attr->qp_state == IBV_QPS_RESET) {
    qp->sq_lock.lock();
    qp->sq_shadow.tail.store(qp->sq_shadow.head.load());
    qp->sq_lock.unlock();
    qp->rq_lock.lock();
    qp->rq_shadow.tail.store(qp->rq_shadow.head.load());
    qp->rq_lock.unlock();
    cq_discard_qp(qp->send_cq, qp->qpn);
    if (qp->recv_cq != qp->send_cq) cq_discard_qp(qp->recv_cq, qp->qpn);
  }
  return 0;
}

int verb_query_qp(ibv_qp* ibqp, ibv_qp_attr* attr, int mask, ibv_qp_init_attr* init) {
  Qp* qp = to_qp(ibqp);
  if (qp->ctx->st->kernel) {
    alignas(8) uint8_t cmd[sizeof(ib_uverbs_cmd_hdr) + sizeof(ib_uverbs_query_qp)] = {};
    return ibv_cmd_query_qp(ibqp, attr, mask, init, cmd, sizeof(cmd));
  }
  sroce_handle_req req{qp->qpn, 0};
  sroce_qp_attr r{};
  int err = qp->ctx->st->control.call(SROCE_OP_QUERY_QP, &req, sizeof(req), &r, sizeof(r));
  if (err != 0) return err;
  memset(attr, 0, sizeof(*attr));
  attr->qp_state = static_cast<ibv_qp_state>(r.qp_state);
  attr->cur_qp_state = static_cast<ibv_qp_state>(r.cur_qp_state);
  attr->path_mtu = static_cast<ibv_mtu>(r.path_mtu);
  attr->path_mig_state = IBV_MIG_MIGRATED;
  attr->qkey = r.qkey;
  attr->rq_psn = r.rq_psn;
  attr->sq_psn = r.sq_psn;
  attr->dest_qp_num = r.dest_qp_num;
  attr->qp_access_flags = static_cast<int>(r.qp_access_flags);
  attr->cap.max_send_wr = qp->cap.max_send_wr;
  attr->cap.max_recv_wr = qp->cap.max_recv_wr;
  attr->cap.max_send_sge = qp->cap.max_send_sge;
  attr->cap.max_recv_sge = qp->cap.max_recv_sge;
  attr->cap.max_inline_data = qp->cap.max_inline_data;
  read_ah_attr(&attr->ah_attr, r.ah_attr);
  attr->pkey_index = r.pkey_index;
  attr->en_sqd_async_notify = r.en_sqd_async_notify;
  attr->sq_draining = r.sq_draining;
  attr->max_rd_atomic = r.max_rd_atomic;
  attr->max_dest_rd_atomic = r.max_dest_rd_atomic;
  attr->min_rnr_timer = r.min_rnr_timer;
  attr->port_num = r.port_num;
  attr->timeout = r.timeout;
  attr->retry_cnt = r.retry_cnt;
  attr->rnr_retry = r.rnr_retry;
  if (init != nullptr) {
    memset(init, 0, sizeof(*init));
    init->qp_context = ibqp->qp_context;
    init->send_cq = ibqp->send_cq;
    init->recv_cq = ibqp->recv_cq;
    init->srq = ibqp->srq;
    init->cap = attr->cap;
    init->qp_type = qp->type;
    init->sq_sig_all = qp->sq_sig_all ? 1 : 0;
  }
  return 0;
}

int verb_destroy_qp(ibv_qp* ibqp) {
  Qp* qp = to_qp(ibqp);
  Context* ctx = qp->ctx;
  sroce_handle_req req{qp->qpn, 0};
  sroce_destroy_qp_resp resp{};
  if (ctx->st->kernel) {
    // libibverbs waits for the QP's async events to be acknowledged itself.
    int err = ibv_cmd_destroy_qp(ibqp);
    if (err != 0) return err;
    resp.events_reported = 0;
  }
  int err = ctx->st->kernel ? 0
                            : ctx->st->control.call(SROCE_OP_DESTROY_QP, &req, sizeof(req), &resp,
                                                    sizeof(resp));
  if (err == EIO) {
    err = 0;  // daemon gone: release locally
    resp.events_reported = 0;
  }
  if (err != 0) return err;
  // As with a kernel device, the QP may only go once the app acknowledged the async events
  // reported for it (ibv_ack_async_event), which it may still be holding.
  if (ctx->st->async_read.load(std::memory_order_acquire)) {
    pthread_mutex_lock(&ibqp->mutex);
    while (ibqp->events_completed < resp.events_reported && !ctx_dead(ctx)) {
      timespec ts{};
      clock_gettime(CLOCK_REALTIME, &ts);
      ts.tv_sec += 1;
      pthread_cond_timedwait(&ibqp->cond, &ibqp->mutex, &ts);
    }
    pthread_mutex_unlock(&ibqp->mutex);
  }
  cq_detach_qp(qp->send_cq, qp);
  if (qp->recv_cq != qp->send_cq) cq_detach_qp(qp->recv_cq, qp);
  {
    std::lock_guard<std::mutex> lock(ctx->st->objects_mutex);
    auto& v = ctx->st->qps;
    v.erase(std::remove(v.begin(), v.end(), qp), v.end());
  }
  qp->mapping.unmap();
  pthread_mutex_destroy(&ibqp->mutex);
  pthread_cond_destroy(&ibqp->cond);
  delete qp;
  return 0;
}

}  // namespace sroce::provider
