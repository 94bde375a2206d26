// Shared-memory rings: work requests in (SQ, RQ, SRQ), completions out (CQ),
// completion-channel and async events.
#include <infiniband/verbs.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include <spdlog/spdlog.h>

#include "service.h"

namespace sroce::daemon {

namespace {

// Work requests taken from one ring per pass: bounds the time one busy QP
// can hold the loop (fairness between QPs and with the wire).
constexpr uint32_t kRingBudget = 64;

uint8_t wc_opcode_for(uint8_t wr_opcode) {
  switch (wr_opcode) {
    case IBV_WR_RDMA_WRITE:
    case IBV_WR_RDMA_WRITE_WITH_IMM: return IBV_WC_RDMA_WRITE;
    case IBV_WR_RDMA_READ: return IBV_WC_RDMA_READ;
    case IBV_WR_ATOMIC_CMP_AND_SWP: return IBV_WC_COMP_SWAP;
    case IBV_WR_ATOMIC_FETCH_AND_ADD: return IBV_WC_FETCH_ADD;
    case IBV_WR_LOCAL_INV: return IBV_WC_LOCAL_INV;
    case IBV_WR_BIND_MW: return IBV_WC_BIND_MW;
    default: return IBV_WC_SEND;
  }
}

// sroce_cqe.timestamp: nanoseconds of the loop's clock (CLOCK_MONOTONIC, Daemon::now), the
// device clock the provider reports (hca_core_clock 1 GHz, docs/provider.md).
uint64_t cqe_timestamp(Time t) { return t.ps > 0 ? static_cast<uint64_t>(t.ps / 1000) : 0; }

// A producer index more than a ring ahead of what was consumed is no producer's:
// the application broke its own ring. The entries cannot be told from garbage, so
// none is taken: the consumer index jumps to the producer's and the ring counts
// one bad entry. (Capping at one ring's worth instead took a ring of garbage per
// pass, for the next 2^32 / size passes.)
bool ring_index_corrupt(uint32_t avail, uint32_t size) { return avail > size; }

}  // namespace

bool Service::poll_rings(Time now) {
  now_ = now;
  reap_gone_contexts(now);
  bool any = false;
  for (auto& [id, c] : contexts_) {
    if (!c->hello) continue;
    for (auto& [qpn, qp] : c->qps) {
      any |= poll_send_ring(*c, qp, now);
      if (qp.rq.valid()) any |= poll_recv_ring(*c, qp);
    }
    for (auto& [h, srq] : c->srqs) any |= poll_srq_ring(*c, srq);
  }
  return any;
}

void Service::push_error_cqe(Context& c, uint32_t cq_local, uint64_t wr_id, uint32_t qpn, uint8_t opcode,
                             uint8_t status) {
  auto it = c.cqs.find(cq_local);
  if (it == c.cqs.end()) return;
  CqObj& cq = it->second;
  uint32_t prod = cq.ring.prod_acquire();
  if (prod - cq.ring.cons_acquire() >= cq.ring.size()) {
    ++stats_.event_drops;  // CQ overrun: the application stopped polling
    return;
  }
  sroce_cqe e{};
  e.wr_id = wr_id;
  e.status = status;
  e.opcode = opcode;
  e.qp_num = qpn;
  e.timestamp = cqe_timestamp(now_);
  memcpy(cq.ring.slot(prod), &e, sizeof e);
  cq.ring.set_prod(prod + 1);
  ++stats_.cqes;
  uint32_t armed = cq.ring.armed();
  if (armed && cq.ring.disarm(armed)) send_comp_event(c, cq);
}

bool Service::poll_send_ring(Context& c, QpObj& qp, Time now) {
  ShmRing& r = qp.sq;
  uint32_t prod = r.prod_acquire();
  uint32_t avail = prod - qp.sq_cons;
  if (avail == 0) return false;
  if (ring_index_corrupt(avail, r.size())) {
    ++stats_.ring_bad_wqes;
    spdlog::debug("context {}: QP {}: send ring producer {} is {} entries ahead of a ring of {}", c.id,
                  qp.qpn, prod, avail, r.size());
    qp.sq_cons = prod;
    r.set_cons(prod);
    return false;
  }
  uint32_t n = 0;
  for (; n < avail && n < kRingBudget; ++n) {
    const std::byte* slot = r.slot(qp.sq_cons);
    sroce_send_wqe w;
    memcpy(&w, slot, sizeof w);  // copy first, then validate the copy
    SendWr wr;
    wr.wr_id = w.wr_id;
    wr.opcode = static_cast<WrOpcode>(w.opcode);
    wr.send_flags = w.send_flags;
    wr.imm_data = w.imm_data;
    wr.invalidate_rkey = w.imm_data;
    wr.rdma.remote_addr = w.remote_addr;
    wr.rdma.rkey = w.rkey;
    wr.atomic.remote_addr = w.remote_addr;
    wr.atomic.rkey = w.rkey;
    wr.atomic.compare_add = w.compare_add;
    wr.atomic.swap = w.swap;
    wr.ud.remote_qpn = w.remote_qpn;
    wr.ud.remote_qkey = w.remote_qkey;
    if (w.opcode == IBV_WR_BIND_MW) {
      // The window by this context's handle; an unknown one reaches the engine as no
      // window at all and completes with MW_BIND_ERR there.
      auto mw = c.mws.find(static_cast<uint32_t>(w.swap & 0xffffffffu));
      wr.bind.mw = mw == c.mws.end() ? kNoHandle : mw->second.engine;
      wr.bind.mr_lkey = static_cast<uint32_t>(w.swap >> 32);
      wr.bind.rkey = w.rkey;
      wr.bind.addr = w.remote_addr;
      wr.bind.length = w.compare_add;
      wr.bind.access = w.imm_data;
    }
    int err = 0;
    size_t room = r.entry_size() - sizeof w;
    if (qp.qp_type == IBV_QPT_UD) {
      auto ah = c.ahs.find(w.ah);
      if (ah == c.ahs.end()) {
        err = EINVAL;
      } else {
        wr.ud.ah = ah->second.engine;
      }
    }
    bool inl = (w.send_flags & IBV_SEND_INLINE) != 0;
    if (!err && inl) {
      // The provider copied the data into the slot at post time (the verbs
      // let the application reuse its buffer at once); the engine reads it
      // from daemon memory through a local window.
      if (w.inline_len > qp.cap.max_inline_data || w.inline_len > room || w.inline_len > inline_scratch_.size()) {
        err = EINVAL;
      } else {
        memcpy(inline_scratch_.data(), slot + sizeof w, w.inline_len);
        sge_scratch_[0] = Sge{mem_.allow_local(inline_scratch_.data(), w.inline_len), w.inline_len, 0};
        wr.sgl = {sge_scratch_.data(), w.inline_len ? 1u : 0u};
      }
    } else if (!err) {
      if (w.num_sge > qp.cap.max_send_sge || w.num_sge * sizeof(sroce_sge) > room) {
        err = EINVAL;
      } else {
        for (uint32_t i = 0; i < w.num_sge; ++i) {
          sroce_sge s;
          memcpy(&s, slot + sizeof w + i * sizeof s, sizeof s);
          sge_scratch_[i] = Sge{s.addr, s.length, s.lkey};
        }
        wr.sgl = {sge_scratch_.data(), w.num_sge};
      }
    }
    if (!err) err = engine_.post_send(qp.qpn, wr, now);
    if (inl) mem_.clear_local();
    if (err == ENOMEM) break;  // engine queue full: leave it in the ring, retry next pass
    if (err) {
      // The provider validated this request, so it is malformed or refused
      // by the engine: complete it in error rather than lose it.
      ++stats_.ring_bad_wqes;
      push_error_cqe(c, qp.send_cq, w.wr_id, qp.qpn, wc_opcode_for(w.opcode), IBV_WC_LOC_QP_OP_ERR);
    }
    ++qp.sq_cons;
    ++qp.wqes_posted;
    ++stats_.ring_wqes;
  }
  r.set_cons(qp.sq_cons);
  return n > 0;
}

bool Service::poll_recv_ring(Context& c, QpObj& qp) {
  ShmRing& r = qp.rq;
  uint32_t prod = r.prod_acquire();
  uint32_t avail = prod - qp.rq_cons;
  if (avail == 0) return false;
  if (ring_index_corrupt(avail, r.size())) {
    ++stats_.ring_bad_wqes;
    qp.rq_cons = prod;
    r.set_cons(prod);
    return false;
  }
  uint32_t n = 0;
  for (; n < avail && n < kRingBudget; ++n) {
    const std::byte* slot = r.slot(qp.rq_cons);
    sroce_recv_wqe w;
    memcpy(&w, slot, sizeof w);
    int err = 0;
    if (w.num_sge > qp.cap.max_recv_sge || sizeof w + w.num_sge * sizeof(sroce_sge) > r.entry_size()) {
      err = EINVAL;
    } else {
      for (uint32_t i = 0; i < w.num_sge; ++i) {
        sroce_sge s;
        memcpy(&s, slot + sizeof w + i * sizeof s, sizeof s);
        sge_scratch_[i] = Sge{s.addr, s.length, s.lkey};
      }
      RecvWr wr{w.wr_id, {sge_scratch_.data(), w.num_sge}};
      err = engine_.post_recv(qp.qpn, wr);
    }
    if (err == ENOMEM) break;
    if (err) {
      ++stats_.ring_bad_wqes;
      push_error_cqe(c, qp.recv_cq, w.wr_id, qp.qpn, IBV_WC_RECV, IBV_WC_LOC_QP_OP_ERR);
    }
    ++qp.rq_cons;
    ++qp.recvs_posted;
    ++stats_.ring_wqes;
  }
  r.set_cons(qp.rq_cons);
  return n > 0;
}

bool Service::poll_srq_ring(Context&, SrqObj& srq) {
  ShmRing& r = srq.ring;
  uint32_t prod = r.prod_acquire();
  uint32_t avail = prod - srq.cons;
  if (avail == 0) return false;
  if (ring_index_corrupt(avail, r.size())) {
    ++stats_.ring_bad_wqes;
    srq.cons = prod;
    r.set_cons(prod);
    return false;
  }
  uint32_t n = 0;
  for (; n < avail && n < kRingBudget; ++n) {
    const std::byte* slot = r.slot(srq.cons);
    sroce_recv_wqe w;
    memcpy(&w, slot, sizeof w);
    int err = 0;
    if (w.num_sge > srq.max_sge || sizeof w + w.num_sge * sizeof(sroce_sge) > r.entry_size()) {
      err = EINVAL;
    } else {
      for (uint32_t i = 0; i < w.num_sge; ++i) {
        sroce_sge s;
        memcpy(&s, slot + sizeof w + i * sizeof s, sizeof s);
        sge_scratch_[i] = Sge{s.addr, s.length, s.lkey};
      }
      RecvWr wr{w.wr_id, {sge_scratch_.data(), w.num_sge}};
      err = engine_.post_srq_recv(srq.engine, wr);
    }
    if (err == ENOMEM) break;
    // An SRQ entry belongs to no QP yet, so a bad one has no CQ to report
    // to: it is dropped and counted.
    if (err) ++stats_.ring_bad_wqes;
    ++srq.cons;
    ++stats_.ring_wqes;
  }
  r.set_cons(srq.cons);
  return n > 0;
}

void Service::send_comp_event(Context& c, CqObj& cq) {
  if (c.kernel) {
    // Every CQ of a kernel context has the kernel's completion channel:
    // the module runs the CQ's handler (docs/kmod.md).
    sroce_comp_event_desc d{cq.user_handle};
    int rc = kchan_ ? kchan_->write_message(SROCE_KMSG_COMP_EVENT, 0, &d, sizeof d) : -ENODEV;
    if (rc == 0)
      ++stats_.comp_events;
    else if (rc != -ENOENT)  // ENOENT: the CQ was destroyed meanwhile
      ++stats_.event_drops;
    return;
  }
  auto ch = c.channels.find(cq.channel);
  if (ch == c.channels.end()) return;
  sroce_comp_event_desc d{cq.user_handle};
  if (send(ch->second.fd, &d, sizeof d, MSG_DONTWAIT | MSG_NOSIGNAL) != sizeof d) {
    ++stats_.event_drops;
    return;
  }
  ++stats_.comp_events;
}

void Service::send_async_event(Context& c, uint64_t element, uint32_t type) {
  if (c.kernel) {
    sroce_async_event_desc d{element, type, 0};
    int rc = kchan_ ? kchan_->write_message(SROCE_KMSG_ASYNC_EVENT, 0, &d, sizeof d) : -ENODEV;
    if (rc == 0)
      ++stats_.async_events;
    else if (rc != -ENOENT)
      ++stats_.event_drops;
    return;
  }
  if (c.async_fd < 0) return;
  sroce_async_event_desc d{element, type, 0};
  if (send(c.async_fd, &d, sizeof d, MSG_DONTWAIT | MSG_NOSIGNAL) != sizeof d) {
    ++stats_.event_drops;
    return;
  }
  ++stats_.async_events;
}

void Service::deliver_async(const AsyncEvent& ev) {
  uint32_t type = static_cast<uint32_t>(ev.type);
  switch (ev.type) {
    case AsyncEventType::kCqErr: {
      auto it = cq_owner_.find(ev.element);
      if (it == cq_owner_.end()) return;
      Context* c = find(it->second.first);
      if (!c) return;
      auto cq = c->cqs.find(it->second.second);
      if (cq != c->cqs.end()) send_async_event(*c, cq->second.user_handle, type);
      return;
    }
    case AsyncEventType::kSrqLimitReached: {
      auto it = srq_owner_.find(ev.element);
      if (it == srq_owner_.end()) return;
      Context* c = find(it->second.first);
      if (!c) return;
      auto s = c->srqs.find(it->second.second);
      if (s != c->srqs.end()) send_async_event(*c, s->second.user_handle, type);
      return;
    }
    default: {  // QP events
      auto it = qp_owner_.find(ev.element);
      if (it == qp_owner_.end()) return;
      Context* c = find(it->second);
      if (!c) return;
      auto q = c->qps.find(ev.element);
      if (q == c->qps.end()) return;
      ++q->second.events_reported;
      send_async_event(*c, q->second.user_handle, type);
      return;
    }
  }
}

bool Service::drain_cq(Context& c, CqObj& cq) {
  // Solicited-only arming needs the engine: a completion does not say
  // whether its request was solicited. Plain arming is done here, on the
  // ring, because only the daemon knows when an entry becomes visible.
  uint32_t armed = cq.ring.armed();
  if (armed == 2 && !cq.engine_armed) {
    engine_.req_notify_cq(cq.engine, true);
    cq.engine_armed = true;
  }
  bool any = false;
  for (;;) {
    uint32_t prod = cq.ring.prod_acquire();
    uint32_t used = prod - cq.ring.cons_acquire();
    if (used >= cq.ring.size()) break;  // full: the rest waits in the engine
    uint32_t room = std::min<uint32_t>(cq.ring.size() - used, static_cast<uint32_t>(wc_scratch_.size()));
    int n = engine_.poll_cq(cq.engine, {wc_scratch_.data(), room});
    if (n <= 0) break;
    bool error = false;
    for (int i = 0; i < n; ++i) {
      const Wc& w = wc_scratch_[i];
      sroce_cqe e{};
      e.wr_id = w.wr_id;
      e.status = static_cast<uint8_t>(w.status);
      e.opcode = static_cast<uint8_t>(w.opcode);
      e.sl = w.sl;
      e.vendor_err = w.vendor_err;
      e.byte_len = w.byte_len;
      e.imm_data = w.imm_data;
      e.qp_num = w.qp_num;
      e.src_qp = w.src_qp;
      e.wc_flags = w.wc_flags;
      e.pkey_index = w.pkey_index;
      e.timestamp = cqe_timestamp(w.timestamp);
      memcpy(cq.ring.slot(prod + static_cast<uint32_t>(i)), &e, sizeof e);
      error |= w.status != WcStatus::kSuccess;
    }
    cq.ring.set_prod(prod + static_cast<uint32_t>(n));
    stats_.cqes += static_cast<uint64_t>(n);
    any = true;
    // ibv_req_notify_cq: one event for the next completion (armed 1), or
    // for the next solicited or unsuccessful one (armed 2, IBA 11.4.2.2).
    armed = cq.ring.armed();
    if ((armed == 1 || (armed == 2 && error)) && cq.ring.disarm(armed)) {
      cq.engine_armed = false;
      send_comp_event(c, cq);
    }
    if (n < static_cast<int>(room)) break;
  }
  return any;
}

bool Service::poll_completions() {
  bool any = false;
  for (auto& [id, c] : contexts_) {
    if (!c->hello) continue;
    for (auto& [h, cq] : c->cqs) any |= drain_cq(*c, cq);
  }
  while (auto h = engine_.poll_cq_notification()) {
    auto it = cq_owner_.find(*h);
    if (it == cq_owner_.end()) continue;
    Context* c = find(it->second.first);
    if (!c) continue;
    auto cq = c->cqs.find(it->second.second);
    if (cq == c->cqs.end()) continue;
    cq->second.engine_armed = false;
    uint32_t armed = cq->second.ring.armed();
    if (armed && cq->second.ring.disarm(armed)) send_comp_event(*c, cq->second);
    any = true;
  }
  while (auto ev = engine_.poll_async_event()) {
    deliver_async(*ev);
    any = true;
  }
  return any;
}

bool Service::prepare_sleep(Time now) {
  for (auto& [id, c] : contexts_) {
    if (!c->hello) continue;
    for (auto& [qpn, qp] : c->qps) {
      qp.sq.set_sleeping(true);
      if (qp.rq.valid()) qp.rq.set_sleeping(true);
    }
    for (auto& [h, srq] : c->srqs) srq.ring.set_sleeping(true);
  }
  // The last look after publishing `sleeping` (see ShmRing::set_sleeping).
  bool work = poll_rings(now);
  if (work) after_sleep();
  return work;
}

void Service::after_sleep() {
  for (auto& [id, c] : contexts_) {
    if (!c->hello) continue;
    for (auto& [qpn, qp] : c->qps) {
      qp.sq.set_sleeping(false);
      if (qp.rq.valid()) qp.rq.set_sleeping(false);
    }
    for (auto& [h, srq] : c->srqs) srq.ring.set_sleeping(false);
  }
}

}  // namespace sroce::daemon
