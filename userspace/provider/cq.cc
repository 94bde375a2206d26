// Completion queues: the daemon produces sroce_cqe entries into a shared ring, the application
// consumes them here without any system call. Also: ibv_req_notify_cq (a flag in the ring the
// daemon reads), the extended polling API, and the flush completions made up after the daemon
// died.
#include <arpa/inet.h>
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <algorithm>
#include <new>

#include "provider.h"

namespace sroce::provider {
namespace {

bool is_recv_opcode(uint32_t opcode) { return (opcode & IBV_WC_RECV) != 0; }

uint64_t clock_ns(clockid_t id) {
  timespec ts;
  clock_gettime(id, &ts);
  return uint64_t(ts.tv_sec) * 1000000000u + uint64_t(ts.tv_nsec);
}

QpTable* new_table(uint32_t count) {
  size_t bytes = sizeof(QpTable) + sizeof(QpTable::items[0]) * (count > 0 ? count - 1 : 0);
  auto* t = static_cast<QpTable*>(calloc(1, bytes));
  if (t != nullptr) t->count = count;
  return t;
}

Qp* lookup_qp(Cq* cq, uint32_t qpn) {
  QpTable* t = cq->qps.load(std::memory_order_acquire);
  if (t == nullptr) return nullptr;
  for (uint32_t i = 0; i < t->count; ++i)
    if (t->items[i].qpn == qpn) return t->items[i].qp;
  return nullptr;
}

// Retires the shadow entries a completion accounts for. Send queues complete in order
// (IBA 10.8: completions of one work queue come back in posting order), and an
// unsignaled WR is complete once a later one is: so a successful send completion retires
// everything up to the first signaled entry with its wr_id, and an error completion (always
// reported, signaled or not) the first entry with its wr_id.
void retire(Cq* cq, const sroce_cqe& e) {
  Qp* qp = lookup_qp(cq, e.qp_num);
  if (qp == nullptr) return;
  bool recv_side;
  if (qp->send_cq != qp->recv_cq) {
    recv_side = (cq == qp->recv_cq);
  } else {
    recv_side = is_recv_opcode(e.opcode);
  }
  if (recv_side) {
    if (qp->srq != nullptr) return;
    Shadow& s = qp->rq_shadow;
    if (s.outstanding() > 0) s.tail.store(s.tail.load() + 1, std::memory_order_release);
    return;
  }
  Shadow& s = qp->sq_shadow;
  uint32_t head = s.head.load(std::memory_order_acquire);
  uint32_t tail = s.tail.load(std::memory_order_relaxed);
  for (uint32_t i = tail; i != head; ++i) {
    const Shadow::Entry& entry = s.at(i);
    if (entry.wr_id == e.wr_id && (entry.signaled || e.status != IBV_WC_SUCCESS)) {
      s.tail.store(i + 1, std::memory_order_release);
      return;
    }
  }
}

// After the daemon died: the next outstanding work request of any QP on this CQ, as a flush
// error (IBA 10.3: in the Error state all outstanding WRs complete with "flushed").
bool take_flush(Cq* cq, sroce_cqe* out) {
  QpTable* t = cq->qps.load(std::memory_order_acquire);
  if (t == nullptr) return false;
  for (uint32_t k = 0; k < t->count; ++k) {
    uint32_t i = (cq->flush_cursor + k) % t->count;
    Qp* qp = t->items[i].qp;
    for (int side = 0; side < 2; ++side) {
      Shadow& s = side == 0 ? qp->sq_shadow : qp->rq_shadow;
      Cq* owner = side == 0 ? qp->send_cq : qp->recv_cq;
      if (owner != cq || (side == 1 && qp->srq != nullptr)) continue;
      if (s.outstanding() == 0) continue;
      uint32_t tail = s.tail.load(std::memory_order_relaxed);
      const Shadow::Entry& entry = s.at(tail);
      memset(out, 0, sizeof(*out));
      out->wr_id = entry.wr_id;
      out->status = IBV_WC_WR_FLUSH_ERR;
      out->opcode = static_cast<uint8_t>(entry.opcode);
      out->qp_num = qp->qpn;
      out->timestamp = device_clock_ns();  // flushed now: made up here, the daemon is gone
      s.tail.store(tail + 1, std::memory_order_release);
      cq->flush_cursor = i;
      return true;
    }
  }
  return false;
}

// Takes the next completion: from the ring, or made up once the daemon is gone. Caller holds
// cq->lock. Entries cq_discard_qp marked (reserved0 = kCqeDiscarded) are consumed unseen.
bool take_cqe(Cq* cq, sroce_cqe* out, bool* is_flush) {
  sroce_ring* hdr = cq->ring.header();
  uint32_t cons = hdr->cons;  // we are the only writer of cons
  const uint32_t prod = cq->ring.load_prod_acquire();
  while (cons != prod) {
    memcpy(out, cq->ring.slot(cons), sizeof(*out));
    cq->ring.store_cons_release(++cons);
    if (out->reserved0 == kCqeDiscarded) continue;
    retire(cq, *out);
    *is_flush = false;
    return true;
  }
  if (ctx_dead(cq->ctx) || cq->ring.error() != 0) {
    *is_flush = true;
    return take_flush(cq, out);
  }
  return false;
}

void to_wc(const sroce_cqe& e, ibv_wc* wc) {
  wc->wr_id = e.wr_id;
  wc->status = static_cast<ibv_wc_status>(e.status);
  wc->opcode = static_cast<ibv_wc_opcode>(e.opcode);
  wc->vendor_err = e.vendor_err;
  wc->byte_len = e.byte_len;
  // The ring carries host order; ibv_wc.imm_data is network order, invalidated_rkey is not.
  wc->imm_data = (e.wc_flags & IBV_WC_WITH_INV) ? e.imm_data : htonl(e.imm_data);
  wc->qp_num = e.qp_num;
  wc->src_qp = e.src_qp;
  wc->wc_flags = e.wc_flags;
  wc->pkey_index = e.pkey_index;
  wc->slid = 0;
  wc->sl = e.sl;
  wc->dlid_path_bits = 0;
}

// An application that spins on an empty CQ competes for a core with the
// daemon that must produce its completion (on a host with fewer cores than
// spinning threads, which is where software RDMA runs: the daemon is the
// NIC). After SROCE_POLL_YIELD empty polls in a row (default 8; 0 = never)
// the poll gives the core away with sched_yield(), so a runnable daemon runs
// now instead of at the end of the spinner's time slice. When nothing else is
// runnable the yield returns at once and the spin goes on.
uint32_t poll_yield_after() {
  static const uint32_t n = [] {
    const char* e = getenv("SROCE_POLL_YIELD");
    if (e == nullptr || *e == '\0') return 8u;
    char* end = nullptr;
    unsigned long v = strtoul(e, &end, 10);
    return *end == '\0' && v <= UINT32_MAX ? static_cast<uint32_t>(v) : 8u;
  }();
  return n;
}

// Called with the CQ lock held after each poll (`found`: it returned a
// completion). True when the caller should sched_yield() once it has
// released the lock.
bool poll_found(Cq* cq, bool found) {
  if (found) {
    cq->empty_polls = 0;
    return false;
  }
  const uint32_t after = poll_yield_after();
  if (after == 0 || ++cq->empty_polls < after) return false;
  cq->empty_polls = 0;
  return true;
}

// --- extended polling (ibv_start_poll / ibv_next_poll / ibv_end_poll) ---

int cqx_load(ibv_cq_ex* cqx) {
  Cq* cq = to_cq(cqx);
  bool flush = false;
  if (!take_cqe(cq, &cq->current, &flush)) return ENOENT;
  cq->current_is_flush = flush;
  cqx->wr_id = cq->current.wr_id;
  cqx->status = static_cast<ibv_wc_status>(cq->current.status);
  return 0;
}

int cqx_start_poll(ibv_cq_ex* cqx, ibv_poll_cq_attr* attr) {
  if (attr->comp_mask != 0) return EINVAL;
  Cq* cq = to_cq(cqx);
  cq->lock.lock();
  int err = cqx_load(cqx);
  const bool yield = poll_found(cq, err == 0);
  if (err != 0) cq->lock.unlock();  // ENOENT: the caller must not call end_poll
  if (yield) sched_yield();
  return err;
}

int cqx_next_poll(ibv_cq_ex* cqx) { return cqx_load(cqx); }

void cqx_end_poll(ibv_cq_ex* cqx) { to_cq(cqx)->lock.unlock(); }

ibv_wc_opcode cqx_read_opcode(ibv_cq_ex* cqx) {
  return static_cast<ibv_wc_opcode>(to_cq(cqx)->current.opcode);
}
uint32_t cqx_read_vendor_err(ibv_cq_ex* cqx) { return to_cq(cqx)->current.vendor_err; }
uint32_t cqx_read_byte_len(ibv_cq_ex* cqx) { return to_cq(cqx)->current.byte_len; }
__be32 cqx_read_imm_data(ibv_cq_ex* cqx) {
  const sroce_cqe& e = to_cq(cqx)->current;
  return (e.wc_flags & IBV_WC_WITH_INV) ? e.imm_data : htonl(e.imm_data);
}
uint32_t cqx_read_qp_num(ibv_cq_ex* cqx) { return to_cq(cqx)->current.qp_num; }
uint32_t cqx_read_src_qp(ibv_cq_ex* cqx) { return to_cq(cqx)->current.src_qp; }
unsigned int cqx_read_wc_flags(ibv_cq_ex* cqx) { return to_cq(cqx)->current.wc_flags; }
uint32_t cqx_read_slid(ibv_cq_ex*) { return 0; }
uint8_t cqx_read_sl(ibv_cq_ex* cqx) { return to_cq(cqx)->current.sl; }
uint8_t cqx_read_dlid_path_bits(ibv_cq_ex*) { return 0; }
// Completion timestamps: the device clock is the daemon's CLOCK_MONOTONIC in nanoseconds
// (hca_core_clock 1000000 kHz); the wall clock is that instant moved by the current
// difference between CLOCK_REALTIME and CLOCK_MONOTONIC (both read here, vDSO calls).
uint64_t cqx_read_completion_ts(ibv_cq_ex* cqx) { return to_cq(cqx)->current.timestamp; }
uint64_t cqx_read_completion_wallclock_ns(ibv_cq_ex* cqx) {
  const uint64_t ts = to_cq(cqx)->current.timestamp;
  const uint64_t mono = clock_ns(CLOCK_MONOTONIC);
  const uint64_t real = clock_ns(CLOCK_REALTIME);
  return real - (mono - ts);
}

Cq* create_cq_common(ibv_context* ibctx, int cqe, ibv_comp_channel* channel, int comp_vector) {
  Context* ctx = to_ctx(ibctx);
  if (cqe < 1 || static_cast<uint32_t>(cqe) > ctx->st->dev_attr.max_cqe || comp_vector < 0 ||
      comp_vector >= ibctx->num_comp_vectors) {
    errno = EINVAL;
    return nullptr;
  }
  auto* cq = new (std::nothrow) Cq();
  if (cq == nullptr) {
    errno = ENOMEM;
    return nullptr;
  }
  sroce_create_cq_resp resp{};
  if (ctx->st->kernel) {
    int err = kernel_create_cq(ctx, cq, cqe, channel, comp_vector, &resp);
    if (err != 0) {
      delete cq;
      errno = err;
      return nullptr;
    }
  } else {
  sroce_create_cq req{};
  req.cqe = static_cast<uint32_t>(cqe);
  req.channel = channel != nullptr ? reinterpret_cast<CompChannel*>(channel)->handle : 0;
  req.user_handle = reinterpret_cast<uintptr_t>(&cq->vcq.cq);
  ReplyFds fds;
  int err = ctx->st->control.call(SROCE_OP_CREATE_CQ, &req, sizeof(req), &resp, sizeof(resp), &fds);
  if (err == 0) err = cq->mapping.map(fds.take(0), resp.ring_bytes);
  if (err == 0 && !ring_geometry_ok(cq->mapping, 0, sizeof(sroce_cqe))) err = EPROTO;
  if (err != 0) {
    if (resp.handle != 0) {
      sroce_handle_req dreq{resp.handle, 0};
      ctx->st->control.call(SROCE_OP_DESTROY_CQ, &dreq, sizeof(dreq), nullptr, 0);
    }
    cq->mapping.unmap();
    delete cq;
    errno = err;
    return nullptr;
  }
  }
  cq->ctx = ctx;
  cq->handle = resp.handle;
  cq->ring = RingView(cq->mapping.addr);
  cq->vcq.cq.handle = resp.handle;
  cq->vcq.cq.cqe = static_cast<int>(resp.cqe);
  std::lock_guard<std::mutex> lock(ctx->st->objects_mutex);
  ctx->st->cqs.push_back(cq);
  return cq;
}

}  // namespace

uint64_t device_clock_ns() { return clock_ns(CLOCK_MONOTONIC); }

// ibv_query_rt_values_ex: the device clock now, in ticks, in raw_clock.tv_nsec (tv_sec 0), as
// mlx5 reports its cycle counter; ticks are nanoseconds here.
int verb_query_rt_values(ibv_context*, ibv_values_ex* values) {
  if (values->comp_mask & ~uint32_t{IBV_VALUES_MASK_RAW_CLOCK}) return EINVAL;
  uint32_t done = 0;
  if (values->comp_mask & IBV_VALUES_MASK_RAW_CLOCK) {
    values->raw_clock.tv_sec = 0;
    values->raw_clock.tv_nsec = static_cast<long>(device_clock_ns());
    done |= IBV_VALUES_MASK_RAW_CLOCK;
  }
  values->comp_mask = done;
  return 0;
}

ibv_cq* verb_create_cq(ibv_context* ibctx, int cqe, ibv_comp_channel* channel, int comp_vector) {
  Cq* cq = create_cq_common(ibctx, cqe, channel, comp_vector);
  return cq != nullptr ? &cq->vcq.cq : nullptr;
}

ibv_cq_ex* verb_create_cq_ex(ibv_context* ibctx, ibv_cq_init_attr_ex* attr) {
  constexpr uint64_t kTimestamps =
      IBV_WC_EX_WITH_COMPLETION_TIMESTAMP | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK;
  if (attr->wc_flags & ~(uint64_t{IBV_WC_STANDARD_FLAGS} | kTimestamps)) {
    errno = EOPNOTSUPP;  // no VLANs, flow tags or tag matching
    return nullptr;
  }
  if (attr->comp_mask & ~uint32_t{IBV_CQ_INIT_ATTR_MASK_FLAGS | IBV_CQ_INIT_ATTR_MASK_PD}) {
    errno = EOPNOTSUPP;
    return nullptr;
  }
  if ((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS) &&
      (attr->flags & ~uint32_t{IBV_CREATE_CQ_ATTR_SINGLE_THREADED})) {
    errno = EOPNOTSUPP;
    return nullptr;
  }
  Cq* cq = create_cq_common(ibctx, static_cast<int>(attr->cqe), attr->channel,
                            static_cast<int>(attr->comp_vector));
  if (cq == nullptr) return nullptr;
  cq->extended = true;
  cq->wc_flags = attr->wc_flags;
  ibv_cq_ex& x = cq->vcq.cq_ex;
  x.start_poll = cqx_start_poll;
  x.next_poll = cqx_next_poll;
  x.end_poll = cqx_end_poll;
  x.read_opcode = cqx_read_opcode;
  x.read_vendor_err = cqx_read_vendor_err;
  x.read_wc_flags = cqx_read_wc_flags;
  if (attr->wc_flags & IBV_WC_EX_WITH_BYTE_LEN) x.read_byte_len = cqx_read_byte_len;
  if (attr->wc_flags & IBV_WC_EX_WITH_IMM) x.read_imm_data = cqx_read_imm_data;
  if (attr->wc_flags & IBV_WC_EX_WITH_QP_NUM) x.read_qp_num = cqx_read_qp_num;
  if (attr->wc_flags & IBV_WC_EX_WITH_SRC_QP) x.read_src_qp = cqx_read_src_qp;
  if (attr->wc_flags & IBV_WC_EX_WITH_SLID) x.read_slid = cqx_read_slid;
  if (attr->wc_flags & IBV_WC_EX_WITH_SL) x.read_sl = cqx_read_sl;
  if (attr->wc_flags & IBV_WC_EX_WITH_DLID_PATH_BITS)
    x.read_dlid_path_bits = cqx_read_dlid_path_bits;
  if (attr->wc_flags & IBV_WC_EX_WITH_COMPLETION_TIMESTAMP)
    x.read_completion_ts = cqx_read_completion_ts;
  if (attr->wc_flags & IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK)
    x.read_completion_wallclock_ns = cqx_read_completion_wallclock_ns;
  return &x;
}

int verb_destroy_cq(ibv_cq* ibcq) {
  Cq* cq = to_cq(ibcq);
  Context* ctx = cq->ctx;
  QpTable* t = cq->qps.load(std::memory_order_acquire);
  if (t != nullptr && t->count > 0) return EBUSY;  // QPs still complete into it (IBA 11.2)
  sroce_handle_req req{cq->handle, 0};
  int err = ctx->st->kernel
                ? ibv_cmd_destroy_cq(ibcq)
                : ctx->st->control.call(SROCE_OP_DESTROY_CQ, &req, sizeof(req), nullptr, 0);
  if (err == EIO) err = 0;  // daemon gone: release locally
  if (err != 0) return err;
  {
    std::lock_guard<std::mutex> lock(ctx->st->objects_mutex);
    auto& v = ctx->st->cqs;
    v.erase(std::remove(v.begin(), v.end(), cq), v.end());
  }
  cq->mapping.unmap();
  free(t);
  for (QpTable* old : cq->retired_tables) free(old);
  delete cq;
  return 0;
}

int verb_poll_cq(ibv_cq* ibcq, int num_entries, ibv_wc* wc) {
  Cq* cq = to_cq(ibcq);
  cq->lock.lock();
  int n = 0;
  sroce_cqe e;
  bool flush;
  while (n < num_entries && take_cqe(cq, &e, &flush)) to_wc(e, &wc[n++]);
  const bool yield = poll_found(cq, n > 0 || num_entries <= 0);
  cq->lock.unlock();
  if (yield) sched_yield();
  return n;
}

// IBA 11.4 (request completion notification): the next completion (or the next solicited one)
// raises a completion event. The daemon reads and clears `armed` when it adds a completion.
int verb_req_notify_cq(ibv_cq* ibcq, int solicited_only) {
  Cq* cq = to_cq(ibcq);
  cq->ring.set_armed(solicited_only ? 2u : 1u);
  return 0;
}

void verb_cq_event(ibv_cq*) {}

// Completions this CQ still owes the application: signaled send WRs outstanding on the QPs
// that complete into it (their completions are in the ring or will be), and receive
// completions already in the ring (posted receives are not counted: they may wait forever).
// Caller holds cq->lock.
uint32_t cq_pending(Cq* cq) {
  uint32_t n = 0;
  const uint32_t prod = cq->ring.load_prod_acquire();
  for (uint32_t i = cq->ring.header()->cons; i != prod; ++i) {
    const auto* e = reinterpret_cast<const sroce_cqe*>(cq->ring.slot(i));
    if (e->reserved0 != kCqeDiscarded && is_recv_opcode(e->opcode)) ++n;
  }
  QpTable* t = cq->qps.load(std::memory_order_acquire);
  for (uint32_t k = 0; t != nullptr && k < t->count; ++k) {
    Qp* qp = t->items[k].qp;
    if (qp->send_cq != cq) continue;
    Shadow& s = qp->sq_shadow;
    const uint32_t head = s.head.load(std::memory_order_acquire);
    for (uint32_t i = s.tail.load(std::memory_order_relaxed); i != head; ++i)
      if (s.at(i).signaled) ++n;
  }
  return n;
}

// ibv_resize_cq (IBA 11.2.6.3): a new ring from sroced (socket path) or the module (kernel
// path) with the unpolled completions moved over in order. The poll lock is held throughout,
// so no poller reads the old ring while they move; EINVAL below what the CQ owes (above), as
// rxe refuses a size below the completions it holds; a failure leaves the old ring in use.
int verb_resize_cq(ibv_cq* ibcq, int cqe) {
  Cq* cq = to_cq(ibcq);
  Context* ctx = cq->ctx;
  if (cqe < 1 || static_cast<uint32_t>(cqe) > ctx->st->dev_attr.max_cqe) return EINVAL;
  if (ctx_dead(ctx)) return EIO;
  cq->lock.lock();
  if (static_cast<uint32_t>(cqe) < cq_pending(cq)) {
    cq->lock.unlock();
    return EINVAL;
  }
  Mapping fresh;
  int err;
  if (ctx->st->kernel) {
    err = kernel_resize_cq(ctx, cq, cqe, &fresh);
  } else {
    sroce_resize_cq req{cq->handle, static_cast<uint32_t>(cqe)};
    sroce_create_cq_resp resp{};
    ReplyFds fds;
    err = ctx->st->control.call(SROCE_OP_RESIZE_CQ, &req, sizeof(req), &resp, sizeof(resp), &fds);
    if (err == 0) err = fresh.map(fds.take(0), resp.ring_bytes);
    if (err == 0 && !ring_geometry_ok(fresh, 0, sizeof(sroce_cqe))) err = EPROTO;
    if (err == 0) ibcq->cqe = static_cast<int>(resp.cqe);
    if (err != 0) fresh.unmap();
  }
  if (err == 0) {
    cq->mapping.unmap();
    cq->mapping = fresh;
    cq->ring = RingView(cq->mapping.addr);
  }
  cq->lock.unlock();
  return err;
}

// A QP moved to Reset: its completions still in the ring are not to be reported (mlx4/mlx5
// clean the CQ on that transition, and programs such as rdma-core's tests restate a QP after
// an error and poll again). Entries between cons and prod belong to the consumer, so they can
// be marked in place; the daemon's engine dropped those it had not moved to the ring yet.
void cq_discard_qp(Cq* cq, uint32_t qpn) {
  cq->lock.lock();
  const uint32_t prod = cq->ring.load_prod_acquire();
  for (uint32_t i = cq->ring.header()->cons; i != prod; ++i) {
    auto* e = reinterpret_cast<sroce_cqe*>(cq->ring.slot(i));
    if (e->qp_num == qpn) e->reserved0 = kCqeDiscarded;
  }
  cq->lock.unlock();
}

// Control path: replaces the CQ's QP table with one that has (or lacks) qp.
void cq_attach_qp(Cq* cq, Qp* qp) {
  std::lock_guard<std::mutex> lock(cq->ctx->st->objects_mutex);
  QpTable* old = cq->qps.load(std::memory_order_acquire);
  uint32_t n = old != nullptr ? old->count : 0;
  QpTable* t = new_table(n + 1);
  if (t == nullptr) return;  // lookups miss: only flush bookkeeping is lost
  for (uint32_t i = 0; i < n; ++i) t->items[i] = old->items[i];
  t->items[n].qpn = qp->qpn;
  t->items[n].qp = qp;
  cq->qps.store(t, std::memory_order_release);
  if (old != nullptr) cq->retired_tables.push_back(old);
}

void cq_detach_qp(Cq* cq, Qp* qp) {
  std::lock_guard<std::mutex> lock(cq->ctx->st->objects_mutex);
  QpTable* old = cq->qps.load(std::memory_order_acquire);
  if (old == nullptr) return;
  QpTable* t = new_table(old->count);
  if (t == nullptr) return;
  uint32_t k = 0;
  for (uint32_t i = 0; i < old->count; ++i)
    if (old->items[i].qp != qp) t->items[k++] = old->items[i];
  t->count = k;
  // Make sure no poller still walks the old table into a QP that is about to be freed.
  cq->lock.lock();
  cq->qps.store(t, std::memory_order_release);
  cq->lock.unlock();
  cq->retired_tables.push_back(old);
}

}  // namespace sroce::provider
