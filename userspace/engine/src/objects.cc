// PD, MR, CQ, SRQ and AH verbs; completion queue rings, CQ notifications and
// affiliated asynchronous events (IBA 11.2, 11.4, 11.6).
#include <algorithm>
#include <cerrno>
#include <string>

#include "impl.h"

namespace sroce {

using namespace eng;

namespace {

Error err(int code, std::string msg) { return Error{code, std::move(msg)}; }

// Handles of PDs, CQs, SRQs and AHs: generation-checked slot ids, never 0.
template <typename T>
Handle handle_of(Table<T>& t, uint32_t s) {
  if (t.id(s) == kNoHandle) t.bump(s);
  return t.id(s);
}

uint32_t clamp_count(uint32_t v, uint32_t hi) { return std::clamp<uint32_t>(v, 1, hi); }

constexpr uint32_t kAccessKnown = kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead |
                                  kAccessRemoteAtomic | kAccessMwBind | kAccessZeroBased;

}  // namespace

Engine::Impl::Impl(const EngineConfig& cfg, MemoryAccess& mem)
    : cfg_(cfg), gids_(cfg.gids.begin(), cfg.gids.end()), mem_(mem) {
  cfg_.gids = {};  // the caller's span may not outlive us: use gids_
  if (gids_.empty()) gids_.push_back(Gid{});
  // QPNs and keys are 24-bit identifiers: keep at least 8 bits of generation.
  cfg_.max_qps = clamp_count(cfg_.max_qps, 1u << 16);
  cfg_.max_mrs = clamp_count(cfg_.max_mrs, 1u << 16);
  cfg_.max_cqs = clamp_count(cfg_.max_cqs, 1u << 20);
  cfg_.max_pds = clamp_count(cfg_.max_pds, 1u << 20);
  cfg_.max_srqs = clamp_count(cfg_.max_srqs, 1u << 20);
  cfg_.max_ahs = clamp_count(cfg_.max_ahs, 1u << 20);
  cfg_.max_cqe = clamp_count(cfg_.max_cqe, 1u << 22);
  cfg_.max_qp_wr = clamp_count(cfg_.max_qp_wr, 1u << 20);
  cfg_.max_sge = clamp_count(cfg_.max_sge, 256);
  cfg_.max_rd_atomic = std::min<uint32_t>(cfg_.max_rd_atomic, 255);
  cfg_.ack_every = std::max<uint32_t>(cfg_.ack_every, 1);
  cfg_.max_unacked_psns = std::clamp<uint32_t>(cfg_.max_unacked_psns, 1, 1u << 22);
  if (static_cast<uint8_t>(cfg_.port_mtu) < 1 || static_cast<uint8_t>(cfg_.port_mtu) > 5)
    cfg_.port_mtu = Mtu::k4096;
  mtu_max_ = mtu_bytes(cfg_.port_mtu);

  perm_qpn_.init(cfg_.seed, 1);
  perm_lkey_.init(cfg_.seed, 2);
  perm_rkey_.init(cfg_.seed, 3);
  key_seed_ = mix64(cfg_.seed ^ 0x5eed5eed5eed5eedull);

  pds_.init(cfg_.max_pds, 32);
  mrs_.init(cfg_.max_mrs, 24);
  mr_fence_.assign(cfg_.max_mrs, 0);
  cqs_.init(cfg_.max_cqs, 32);
  srqs_.init(cfg_.max_srqs, 32);
  ahs_.init(cfg_.max_ahs, 32);
  qps_.init(cfg_.max_qps, 24);
  events_.init(std::max<uint32_t>(1024, 4 * cfg_.max_qps));
  notifications_.init(cfg_.max_cqs);
  heap_.reserve(cfg_.max_qps);
  heap_key_.assign(cfg_.max_qps, Time::never());
}

// Fresh key bits for one registration: the host's RandomSource (getrandom in
// sroced), else a reproducible stream from the seed (simulator, tests).
uint32_t Engine::Impl::key_bits() {
  if (cfg_.random) return cfg_.random->next32();
  return static_cast<uint32_t>(mix64(key_seed_ ^ ++key_counter_));
}

// ---------------------------------------------------------------- lookups
uint32_t Engine::Impl::pd_slot(Handle h) const { return h == kNoHandle ? kNone : pds_.slot_of(h); }
uint32_t Engine::Impl::cq_slot(Handle h) const { return h == kNoHandle ? kNone : cqs_.slot_of(h); }
uint32_t Engine::Impl::srq_slot(Handle h) const {
  return h == kNoHandle ? kNone : srqs_.slot_of(h);
}
uint32_t Engine::Impl::ah_slot(Handle h) const { return h == kNoHandle ? kNone : ahs_.slot_of(h); }

uint32_t Engine::Impl::qp_slot(Qpn qpn) const {
  if (qpn == cache_qpn_ && qps_.used(cache_qp_slot_) && qps_[cache_qp_slot_].qpn == qpn)
    return cache_qp_slot_;
  if (qpn > kPsnMask) return kNone;
  const uint32_t s = qps_.slot_of(perm_qpn_.inv(qpn));
  if (s == kNone || qps_[s].qpn != qpn) return kNone;
  cache_qpn_ = qpn;
  cache_qp_slot_ = s;
  return s;
}

Mr* Engine::Impl::mr_by_lkey(uint32_t lkey) {
  if (lkey == cache_lkey_ && mrs_.used(cache_lkey_slot_) && mrs_[cache_lkey_slot_].lkey == lkey)
    return &mrs_[cache_lkey_slot_];
  const uint32_t s = mrs_.slot_of(perm_lkey_.inv(lkey >> 8));
  if (s == kNone || mrs_[s].lkey != lkey || mrs_[s].kind != 0) return nullptr;  // not a window
  cache_lkey_ = lkey;
  cache_lkey_slot_ = s;
  return &mrs_[s];
}

Mr* Engine::Impl::mr_by_rkey(uint32_t rkey) {
  if (rkey == cache_rkey_ && mrs_.used(cache_rkey_slot_) && mrs_[cache_rkey_slot_].rkey == rkey)
    return &mrs_[cache_rkey_slot_];
  const uint32_t s = mrs_.slot_of(perm_rkey_.inv(rkey >> 8));
  if (s == kNone || mrs_[s].rkey != rkey) return nullptr;
  cache_rkey_ = rkey;
  cache_rkey_slot_ = s;
  return &mrs_[s];
}

// ---------------------------------------------------------------- PD
Result<Handle> Engine::Impl::alloc_pd() {
  const uint32_t s = pds_.alloc();
  if (s == kNone)
    return err(ENOMEM, "alloc_pd: all " + std::to_string(cfg_.max_pds) + " PDs in use");
  return handle_of(pds_, s);
}

Result<void> Engine::Impl::dealloc_pd(Handle pd) {
  const uint32_t s = pd_slot(pd);
  if (s == kNone) return err(EINVAL, "dealloc_pd: no such PD");
  if (pds_[s].refs != 0)
    return err(EBUSY, "dealloc_pd: PD still used by " + std::to_string(pds_[s].refs) +
                          " MRs/QPs/AHs/SRQs");
  pds_.release(s);
  return {};
}

// ---------------------------------------------------------------- MR
Result<MrKeys> Engine::Impl::reg_mr(Handle pd, uint64_t addr, uint64_t length, uint32_t access) {
  return reg_mr_host(pd, addr, length, access, (access & kAccessZeroBased) ? 0 : addr);
}

Result<MrKeys> Engine::Impl::reg_mr_host(Handle pd, uint64_t addr, uint64_t length, uint32_t access,
                                         uint64_t iova) {
  const uint32_t p = pd_slot(pd);
  if (p == kNone) return err(EINVAL, "reg_mr: no such PD");
  if (access & ~kAccessKnown) return err(EINVAL, "reg_mr: unknown access flags");
  // IBA 10.6: remote write or atomic access needs local write.
  if ((access & (kAccessRemoteWrite | kAccessRemoteAtomic)) && !(access & kAccessLocalWrite))
    return err(EINVAL, "reg_mr: REMOTE_WRITE/REMOTE_ATOMIC require LOCAL_WRITE");
  if (length > UINT64_MAX - addr || length > UINT64_MAX - iova)
    return err(EINVAL, "reg_mr: addr + length overflows");
  const uint32_t s = mrs_.alloc();
  if (s == kNone) return err(ENOMEM, "reg_mr: all " + std::to_string(cfg_.max_mrs) + " MRs in use");
  Mr& mr = mrs_[s];
  mr.slot = s;
  const uint32_t id = mrs_.id(s);
  // The low byte of a key is a per-registration "key" byte (IBA 10.6).
  const uint32_t k = key_bits();
  mr.lkey = (perm_lkey_.fwd(id) << 8) | static_cast<uint32_t>(k & 0xff);
  mr.rkey = (perm_rkey_.fwd(id) << 8) | static_cast<uint32_t>((k >> 8) & 0xff);
  mr.pd = p;
  mr.addr = addr;
  mr.iova = iova;
  mr.length = length;
  mr.access = access;
  ++pds_[p].refs;
  return MrKeys{mr.lkey, mr.rkey};
}

Result<void> Engine::Impl::dereg_mr(uint32_t lkey) {
  Mr* mr = mr_by_lkey(lkey);
  if (!mr) return err(EINVAL, "dereg_mr: no MR with this lkey");
  if (mr->mw_bound != 0)  // IBA 11.2.8.? / rxe: windows still bound to it
    return err(EBUSY, "dereg_mr: " + std::to_string(mr->mw_bound) + " memory windows bound");
  --pds_[mr->pd].refs;
  fence_mr(*mr);  // in-flight work using it ends in error (mr_live)
  mrs_.release(mr->slot);
  return {};
}

// Check, then apply: the MR changes only when every requested change is valid. The keys stay
// (a peer holding the rkey sees the new range and rights at once, as on rxe and mlx4); the
// key byte is not renewed because programs do not exchange keys again after a rereg.
Result<void> Engine::Impl::rereg_mr(uint32_t lkey, uint32_t flags, Handle pd, uint64_t addr,
                                    uint64_t length, uint32_t access) {
  Mr* mr = mr_by_lkey(lkey);
  if (!mr) return err(EINVAL, "rereg_mr: no MR with this lkey");
  if (mr->mw_bound != 0)  // the windows' translation would go stale
    return err(EBUSY, "rereg_mr: " + std::to_string(mr->mw_bound) + " memory windows bound");
  constexpr uint32_t kKnown = kReregTranslation | kReregPd | kReregAccess;
  if (flags == 0 || (flags & ~kKnown)) return err(EINVAL, "rereg_mr: flags must be a non-empty set of kRereg*");
  uint32_t p = mr->pd;
  if (flags & kReregPd) {
    p = pd_slot(pd);
    if (p == kNone) return err(EINVAL, "rereg_mr: no such PD");
  }
  uint32_t acc = mr->access;
  if (flags & kReregAccess) {
    if (access & ~kAccessKnown) return err(EINVAL, "rereg_mr: unknown access flags");
    // IBA 10.6: remote write or atomic access needs local write.
    if ((access & (kAccessRemoteWrite | kAccessRemoteAtomic)) && !(access & kAccessLocalWrite))
      return err(EINVAL, "rereg_mr: REMOTE_WRITE/REMOTE_ATOMIC require LOCAL_WRITE");
    acc = access;
  }
  uint64_t a = mr->addr, len = mr->length;
  if (flags & kReregTranslation) {
    if (length > UINT64_MAX - addr) return err(EINVAL, "rereg_mr: addr + length overflows");
    a = addr;
    len = length;
  }
  --pds_[mr->pd].refs;
  ++pds_[p].refs;
  const uint32_t old_access = mr->access;
  mr->pd = p;
  mr->access = acc;
  mr->addr = a;
  mr->length = len;
  // The iova follows a new translation (or a change of ZERO_BASED); otherwise it stays,
  // which keeps an iova registered apart from the host address (reg_mr_host).
  if ((flags & kReregTranslation) || ((acc ^ old_access) & kAccessZeroBased))
    mr->iova = (acc & kAccessZeroBased) ? 0 : a;
  fence_mr(*mr);  // work checked against the old range, PD or rights ends in error (mr_live)
  return {};
}

// reg_mr_host's MRs: the host address moves with a new translation and the iova is set apart
// (rereg_mr would make it follow the host address).
Result<void> Engine::Impl::rereg_mr_host(uint32_t lkey, uint32_t flags, Handle pd,
                                         uint64_t host_addr, uint64_t length, uint32_t access,
                                         uint64_t iova) {
  Mr* mr = mr_by_lkey(lkey);
  if (!mr) return err(EINVAL, "rereg_mr: no MR with this lkey");
  if ((flags & kReregTranslation) && length > UINT64_MAX - iova)
    return err(EINVAL, "rereg_mr: iova + length overflows");
  const uint64_t old_iova = mr->iova;
  const bool zero_based_flips = (flags & kReregAccess) && ((access ^ mr->access) & kAccessZeroBased);
  auto r = rereg_mr(lkey, flags, pd, host_addr, length, access);
  if (!r) return r;
  mr->iova = ((flags & kReregTranslation) || zero_based_flips) ? iova : old_iova;
  return {};
}

// ---------------------------------------------------------------- CQ
Result<Handle> Engine::Impl::create_cq(uint32_t cqe) {
  if (cqe == 0 || cqe > cfg_.max_cqe)
    return err(EINVAL, "create_cq: cqe " + std::to_string(cqe) + " not in [1, " +
                           std::to_string(cfg_.max_cqe) + "]");
  const uint32_t s = cqs_.alloc();
  if (s == kNone) return err(ENOMEM, "create_cq: all CQs in use");
  Cq& cq = cqs_[s];
  cq.cqe = cqe;
  cq.mask = round_pow2(cqe) - 1;
  cq.ring.assign(cq.mask + 1, Wc{});
  cq.handle = handle_of(cqs_, s);
  return cq.handle;
}

Result<void> Engine::Impl::destroy_cq(Handle h) {
  const uint32_t s = cq_slot(h);
  if (s == kNone) return err(EINVAL, "destroy_cq: no such CQ");
  if (cqs_[s].refs != 0) return err(EBUSY, "destroy_cq: CQ still used by a QP");
  cqs_.release(s);
  return {};
}

// IBA 11.2.6.3 (Resize CQ): the completions not yet polled move to the new ring in order; a
// size below their count is refused (EINVAL, as rxe's resize check) and changes nothing.
// Control path: the new ring is allocated here, never on the data path.
Result<void> Engine::Impl::resize_cq(Handle h, uint32_t cqe) {
  const uint32_t s = cq_slot(h);
  if (s == kNone) return err(EINVAL, "resize_cq: no such CQ");
  if (cqe == 0 || cqe > cfg_.max_cqe)
    return err(EINVAL, "resize_cq: cqe " + std::to_string(cqe) + " not in [1, " +
                           std::to_string(cfg_.max_cqe) + "]");
  Cq& cq = cqs_[s];
  const uint32_t held = cq.tail - cq.head;
  if (cqe < held)
    return err(EINVAL, "resize_cq: " + std::to_string(held) + " completions held, more than " +
                           std::to_string(cqe));
  std::vector<Wc> ring(round_pow2(cqe), Wc{});
  for (uint32_t i = 0; i < held; ++i) ring[i] = cq.ring[(cq.head + i) & cq.mask];
  cq.ring = std::move(ring);
  cq.mask = static_cast<uint32_t>(cq.ring.size()) - 1;
  cq.cqe = cqe;
  cq.head = 0;
  cq.tail = held;
  return {};
}

// A QP moved to Reset leaves no completions behind in its CQs (as Linux's mlx4/mlx5 clean
// the CQ on that transition): a program that restates a QP after an error, then polls, must
// not see the old flush errors. Order of the other completions is kept.
void Engine::Impl::cq_discard_qp(uint32_t s, Qpn qpn) {
  Cq& cq = cqs_[s];
  uint32_t out = cq.head;
  for (uint32_t i = cq.head; i != cq.tail; ++i) {
    const Wc& wc = cq.ring[i & cq.mask];
    if (wc.qp_num == qpn) continue;
    if (out != i) cq.ring[out & cq.mask] = wc;
    ++out;
  }
  cq.tail = out;
}

void Engine::Impl::cq_push(uint32_t s, const Wc& wc, bool solicited) {
  Cq& cq = cqs_[s];
  ++output_seq_;
  if (cq.overflowed) return;
  if (cq.tail - cq.head >= cq.cqe) {
    // IBA 11.4: a CQ overrun is a CQ error, reported as an
    // unaffiliated-to-QP asynchronous event; later completions are lost.
    cq.overflowed = true;
    ++stats_.cq_overflows;
    raise(AsyncEventType::kCqErr, cq.handle);
    return;
  }
  Wc& slot = cq.ring[cq.tail++ & cq.mask];
  slot = wc;
  slot.timestamp = last_now_;  // completion time (Wc::timestamp): the current entry point's
  // IBA 11.4: an armed CQ notifies on the next completion, or with
  // "solicited" on a solicited one or any completion in error.
  if (cq.armed && (!cq.solicited_only || solicited || wc.status != WcStatus::kSuccess)) {
    cq.armed = false;
    if (!cq.notify_queued) {
      cq.notify_queued = true;
      notifications_.push(cq.handle);
    }
  }
}

int Engine::Impl::poll_cq(Handle h, std::span<Wc> out) {
  const uint32_t s = cq_slot(h);
  if (s == kNone) return -EINVAL;
  Cq& cq = cqs_[s];
  int n = 0;
  while (static_cast<size_t>(n) < out.size() && cq.head != cq.tail)
    out[n++] = cq.ring[cq.head++ & cq.mask];
  return n;
}

int Engine::Impl::req_notify_cq(Handle h, bool solicited_only) {
  const uint32_t s = cq_slot(h);
  if (s == kNone) return EINVAL;
  cqs_[s].armed = true;
  cqs_[s].solicited_only = solicited_only;
  return 0;
}

std::optional<Handle> Engine::Impl::poll_cq_notification() {
  while (auto h = notifications_.pop()) {
    const uint32_t s = cq_slot(*h);
    if (s == kNone) continue;  // destroyed meanwhile
    cqs_[s].notify_queued = false;
    return h;
  }
  return std::nullopt;
}

void Engine::Impl::raise(AsyncEventType type, uint32_t element) {
  ++output_seq_;
  if (!events_.push(AsyncEvent{type, element})) ++stats_.async_events_lost;
}

std::optional<AsyncEvent> Engine::Impl::poll_async_event() { return events_.pop(); }

// ---------------------------------------------------------------- SRQ
Result<Handle> Engine::Impl::create_srq(Handle pd, const SrqAttr& attr) {
  const uint32_t p = pd_slot(pd);
  if (p == kNone) return err(EINVAL, "create_srq: no such PD");
  if (attr.max_wr == 0 || attr.max_wr > cfg_.max_qp_wr)
    return err(EINVAL, "create_srq: max_wr not in [1, " + std::to_string(cfg_.max_qp_wr) + "]");
  if (attr.max_sge == 0 || attr.max_sge > cfg_.max_sge)
    return err(EINVAL, "create_srq: max_sge not in [1, " + std::to_string(cfg_.max_sge) + "]");
  const uint32_t s = srqs_.alloc();
  if (s == kNone) return err(ENOMEM, "create_srq: all SRQs in use");
  Srq& srq = srqs_[s];
  srq.pd = p;
  srq.rq.init(attr.max_wr, attr.max_sge);
  // ibv_create_srq ignores srq_limit: the limit is armed by modify_srq only.
  srq.limit = 0;
  srq.handle = handle_of(srqs_, s);
  ++pds_[p].refs;
  return srq.handle;
}

Result<void> Engine::Impl::modify_srq(Handle h, uint32_t limit) {
  const uint32_t s = srq_slot(h);
  if (s == kNone) return err(EINVAL, "modify_srq: no such SRQ");
  if (limit > srqs_[s].rq.max_wr()) return err(EINVAL, "modify_srq: srq_limit larger than max_wr");
  srqs_[s].limit = limit;
  return {};
}

Result<void> Engine::Impl::destroy_srq(Handle h) {
  const uint32_t s = srq_slot(h);
  if (s == kNone) return err(EINVAL, "destroy_srq: no such SRQ");
  if (srqs_[s].refs != 0) return err(EBUSY, "destroy_srq: SRQ still attached to a QP");
  --pds_[srqs_[s].pd].refs;
  srqs_.release(s);
  return {};
}

// IBA 10.2: when the number of WQEs drops below the armed limit, raise
// SRQ_LIMIT_REACHED once and disarm.
void Engine::Impl::srq_check_limit(Srq& srq, uint32_t /*slot*/) {
  if (srq.limit != 0 && srq.rq.count() < srq.limit) {
    srq.limit = 0;
    raise(AsyncEventType::kSrqLimitReached, srq.handle);
  }
}

// ---------------------------------------------------------------- AH
Result<Handle> Engine::Impl::create_ah(Handle pd, const AhAttr& attr) {
  const uint32_t p = pd_slot(pd);
  if (p == kNone) return err(EINVAL, "create_ah: no such PD");
  if (attr.sgid_index >= gids_.size())
    return err(EINVAL, "create_ah: sgid_index " + std::to_string(attr.sgid_index) +
                           " >= GID table size " + std::to_string(gids_.size()));
  if (attr.port_num != 1) return err(EINVAL, "create_ah: port_num must be 1");
  const uint32_t s = ahs_.alloc();
  if (s == kNone) return err(ENOMEM, "create_ah: all AHs in use");
  ahs_[s].pd = p;
  ahs_[s].attr = attr;
  ++pds_[p].refs;
  return handle_of(ahs_, s);
}

Result<void> Engine::Impl::destroy_ah(Handle h) {
  const uint32_t s = ah_slot(h);
  if (s == kNone) return err(EINVAL, "destroy_ah: no such AH");
  --pds_[ahs_[s].pd].refs;
  ahs_.release(s);
  return {};
}

}  // namespace sroce
