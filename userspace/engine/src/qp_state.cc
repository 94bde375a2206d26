// QP lifecycle and the IBA 10.3 state machine. modify_qp follows the
// attribute table of IBA 11.2 (as encoded by the Linux ib_modify_qp_is_ok
// table that libibverbs users see): for each (current, next) state and QP type
// a set of required and a set of optional attributes; anything else is
// EINVAL. Validation is complete before anything changes (check, then apply).
#include <cerrno>
#include <string>

#include "impl.h"

namespace sroce {

using namespace eng;

namespace {

Error err(int code, std::string msg) { return Error{code, std::move(msg)}; }

std::string hex(uint32_t v) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string s = "0x";
  bool started = false;
  for (int sh = 28; sh >= 0; sh -= 4) {
    const uint32_t d = (v >> sh) & 0xf;
    if (d || started || sh == 0) {
      s += kDigits[d];
      started = true;
    }
  }
  return s;
}

enum TypeIdx { kUd = 0, kUc = 1, kRc = 2 };

struct Rule {
  bool valid = false;
  uint32_t req[3] = {0, 0, 0};
  uint32_t opt[3] = {0, 0, 0};
};

constexpr int kStates = 7;

struct RuleTable {
  Rule r[kStates][kStates];
};

constexpr int st(QpState s) { return static_cast<int>(s); }

constexpr RuleTable make_rules() {
  RuleTable t{};
  using S = QpState;
  auto set = [&](S from, S to, uint32_t req_ud, uint32_t req_uc, uint32_t req_rc, uint32_t opt_ud,
                 uint32_t opt_uc, uint32_t opt_rc) {
    Rule& r = t.r[st(from)][st(to)];
    r.valid = true;
    r.req[kUd] = req_ud;
    r.req[kUc] = req_uc;
    r.req[kRc] = req_rc;
    r.opt[kUd] = opt_ud;
    r.opt[kUc] = opt_uc;
    r.opt[kRc] = opt_rc;
  };
  // Any state -> RESET and -> ERR, with no attributes (IBA 10.3).
  for (int s = 0; s < kStates; ++s) {
    set(static_cast<S>(s), S::kReset, 0, 0, 0, 0, 0, 0);
    set(static_cast<S>(s), S::kErr, 0, 0, 0, 0, 0, 0);
  }
  const uint32_t init_ud = kQpPkeyIndex | kQpPort | kQpQkey;
  const uint32_t init_rc = kQpPkeyIndex | kQpPort | kQpAccessFlags;
  set(S::kReset, S::kInit, init_ud, init_rc, init_rc, 0, 0, 0);
  set(S::kInit, S::kInit, 0, 0, 0, init_ud, init_rc, init_rc);
  const uint32_t rtr_uc = kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn;
  const uint32_t rtr_rc = rtr_uc | kQpMaxDestRdAtomic | kQpMinRnrTimer;
  const uint32_t rtr_opt = kQpAltPath | kQpAccessFlags | kQpPkeyIndex;
  set(S::kInit, S::kRtr, 0, rtr_uc, rtr_rc, kQpPkeyIndex | kQpQkey, rtr_opt, rtr_opt);
  const uint32_t rts_rc = kQpTimeout | kQpRetryCnt | kQpRnrRetry | kQpSqPsn | kQpMaxQpRdAtomic;
  const uint32_t rts_opt_ud = kQpCurState | kQpQkey;
  const uint32_t rts_opt_uc = kQpCurState | kQpAltPath | kQpAccessFlags | kQpPathMigState;
  const uint32_t rts_opt_rc = rts_opt_uc | kQpMinRnrTimer;
  set(S::kRtr, S::kRts, kQpSqPsn, kQpSqPsn, rts_rc, rts_opt_ud, rts_opt_uc, rts_opt_rc);
  set(S::kRts, S::kRts, 0, 0, 0, rts_opt_ud, rts_opt_uc, rts_opt_rc);
  set(S::kRts, S::kSqd, 0, 0, 0, kQpEnSqdAsyncNotify, kQpEnSqdAsyncNotify, kQpEnSqdAsyncNotify);
  set(S::kSqd, S::kRts, 0, 0, 0, rts_opt_ud, rts_opt_uc, rts_opt_rc);
  set(S::kSqd, S::kSqd, 0, 0, 0, kQpPkeyIndex | kQpQkey,
      kQpAv | kQpAltPath | kQpAccessFlags | kQpPkeyIndex | kQpPathMigState,
      kQpPort | kQpAv | kQpTimeout | kQpRetryCnt | kQpRnrRetry | kQpMaxQpRdAtomic |
          kQpMaxDestRdAtomic | kQpAltPath | kQpAccessFlags | kQpPkeyIndex | kQpMinRnrTimer |
          kQpPathMigState);
  // SQE exists only for UC/UD (an RC send error goes to ERR: IBA 10.3).
  set(S::kSqe, S::kRts, 0, 0, 0, kQpCurState | kQpQkey, kQpCurState | kQpAccessFlags, 0);
  return t;
}

constexpr RuleTable kRules = make_rules();

TypeIdx type_idx(QpType t) {
  switch (t) {
    case QpType::kUd:
      return kUd;
    case QpType::kUc:
      return kUc;
    default:
      return kRc;
  }
}

constexpr uint32_t kQpAccessKnown = kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead |
                                    kAccessRemoteAtomic | kAccessMwBind;

}  // namespace

Duration eng::ack_timeout_duration(uint8_t timeout) {
  if (timeout == 0) return Duration{0};
  return Duration::nanos(4096) * (int64_t{1} << timeout);
}

Duration eng::rnr_timer_duration(uint8_t code) {
  // IBA table 45, in microseconds (code 0 is the longest, 655.36 ms).
  static constexpr int64_t kUs[32] = {655360, 10,    20,    30,     40,     60,     80,     120,
                                      160,    240,   320,   480,    640,    960,    1280,   1920,
                                      2560,   3840,  5120,  7680,   10240,  15360,  20480,  30720,
                                      40960,  61440, 81920, 122880, 163840, 245760, 327680, 491520};
  return Duration::micros(kUs[code & 31]);
}

Result<Qpn> Engine::Impl::create_qp(Handle pd, const QpInitAttr& a) {
  const uint32_t p = pd_slot(pd);
  if (p == kNone) return err(EINVAL, "create_qp: no such PD");
  const uint32_t scq = cq_slot(a.send_cq), rcq = cq_slot(a.recv_cq);
  if (scq == kNone || rcq == kNone) return err(EINVAL, "create_qp: send_cq/recv_cq is not a CQ");
  uint32_t srq = kNone;
  if (a.srq != kNoHandle) {
    srq = srq_slot(a.srq);
    if (srq == kNone) return err(EINVAL, "create_qp: srq is not an SRQ");
  }
  if (a.qp_type != QpType::kRc && a.qp_type != QpType::kUc && a.qp_type != QpType::kUd)
    return err(EINVAL, "create_qp: qp_type must be RC, UC or UD");
  const QpCap& c = a.cap;
  if (c.max_send_wr > cfg_.max_qp_wr || (srq == kNone && c.max_recv_wr > cfg_.max_qp_wr))
    return err(EINVAL, "create_qp: max_send_wr/max_recv_wr above the device limit " +
                           std::to_string(cfg_.max_qp_wr));
  if (c.max_send_sge > cfg_.max_sge || (srq == kNone && c.max_recv_sge > cfg_.max_sge))
    return err(EINVAL, "create_qp: max_send_sge/max_recv_sge above the device limit " +
                           std::to_string(cfg_.max_sge));
  if (c.max_inline_data > cfg_.max_inline_data)
    return err(EINVAL, "create_qp: max_inline_data above the device limit " +
                           std::to_string(cfg_.max_inline_data));
  const uint32_t s = qps_.alloc();
  if (s == kNone)
    return err(ENOMEM, "create_qp: all " + std::to_string(cfg_.max_qps) + " QPs in use");
  Qp& qp = qps_[s];
  // QPN 0 and 1 are the SMI and GSI QPs (IBA 10.2): never hand them out.
  for (;;) {
    qp.qpn = perm_qpn_.fwd(qps_.id(s));
    if (qp.qpn > 1) break;
    qps_.bump(s);
  }
  qp.slot = s;
  qp.type = a.qp_type;
  qp.pd = p;
  qp.send_cq = scq;
  qp.recv_cq = rcq;
  qp.srq = srq;
  qp.cap = c;
  if (srq != kNone) {
    qp.cap.max_recv_wr = 0;
    qp.cap.max_recv_sge = 0;
  }
  qp.sq_sig_all = a.sq_sig_all;
  qp.sq_mask = round_pow2(c.max_send_wr == 0 ? 1 : c.max_send_wr) - 1;
  qp.sq.assign(qp.sq_mask + 1, SendWqe{});
  qp.sq_sge.assign(static_cast<size_t>(qp.sq_mask + 1) * c.max_send_sge, Sge{});
  qp.sq_host.assign(qp.sq_sge.size(), 0);
  qp.sq_ref.assign(qp.sq_sge.size(), 0);
  qp.sq_inline.assign(static_cast<size_t>(qp.sq_mask + 1) * c.max_inline_data, std::byte{0});
  uint32_t rsge = 1;
  if (srq == kNone) {
    qp.rq.init(c.max_recv_wr, c.max_recv_sge);
    rsge = qp.rq.max_sge();
  } else {
    rsge = srqs_[srq].rq.max_sge();
  }
  qp.rwqe_sge.assign(rsge, Sge{});
  qp.res.assign(cfg_.max_rd_atomic == 0 ? 1 : cfg_.max_rd_atomic, Resource{});  // see alloc_res()
  // Lossy mode (docs/lossy.md): RC only; its windows come at RTR (lossy_alloc).
  qp.lossy = Lossy{};
  qp.lossy.offer = qp.is_rc() && cfg_.lossy.enable;
  cc_qp_create(*this, qp);
  qp.mtu = qp.is_ud() ? mtu_max_ : 1024;
  qp.src_port = static_cast<uint16_t>(0xc000 | (mix64(cfg_.seed ^ qp.qpn) & 0x3fff));
  qp.attr.cap = qp.cap;
  qp.attr.path_mtu = Mtu::k1024;
  ++pds_[p].refs;
  ++cqs_[scq].refs;
  ++cqs_[rcq].refs;
  if (srq != kNone) ++srqs_[srq].refs;
  return qp.qpn;
}

Result<void> Engine::Impl::destroy_qp(Qpn qpn) {
  const uint32_t s = qp_slot(qpn);
  if (s == kNone) return err(EINVAL, "destroy_qp: no such QP");
  Qp& qp = qps_[s];
  unsched(qp);
  timer_remove(qp);
  cc_qp_stop(*this, qp);
  return_srq_wqes(qp, nullptr);  // a destroyed QP completes nothing: what does not fit is gone
  --pds_[qp.pd].refs;
  --cqs_[qp.send_cq].refs;
  --cqs_[qp.recv_cq].refs;
  if (qp.srq != kNone) --srqs_[qp.srq].refs;
  // Type 2 windows bound through this QP are invalidated with it (IBA 10.6.7.2.2): their
  // MRs can then be deregistered.
  for (uint32_t m = 0; m < mrs_.built(); ++m)
    if (mrs_.used(m) && mrs_[m].kind == kMwType2 && !mrs_[m].invalidated && mrs_[m].mw_qpn == qpn)
      mw_unbind(mrs_[m]);
  qps_.release(s);
  return {};
}

Result<QpAttr> Engine::Impl::query_qp(Qpn qpn) const {
  const uint32_t s = qp_slot(qpn);
  if (s == kNone) return err(EINVAL, "query_qp: no such QP");
  const Qp& qp = qps_[s];
  QpAttr a = qp.attr;
  a.qp_state = qp.state;
  a.cur_qp_state = qp.state;
  a.cap = qp.cap;
  a.sq_draining = qp.state == QpState::kSqd && !qp.sqd_drained_sent;
  return a;
}

Result<QpStats> Engine::Impl::qp_stats(Qpn qpn) const {
  const uint32_t s = qp_slot(qpn);
  if (s == kNone) return err(EINVAL, "qp_stats: no such QP");
  QpStats st = qps_[s].stats;
  const Lossy& l = qps_[s].lossy;
  st.mode = l.tx || l.rx ? QpMode::kLossy : QpMode::kCompatible;
  return st;
}

Result<void> Engine::Impl::modify_qp(Qpn qpn, const QpAttr& a, uint32_t mask, Time now) {
  const uint32_t s = qp_slot(qpn);
  if (s == kNone) return err(EINVAL, "modify_qp: no such QP");
  Qp& qp = qps_[s];
  last_now_ = now;

  // ---------------- check ----------------
  const QpState cur = qp.state;
  if ((mask & kQpCurState) && a.cur_qp_state != cur)
    return err(EINVAL, std::string("modify_qp: cur_qp_state ") + to_string(a.cur_qp_state) +
                           " but the QP is in " + to_string(cur));
  const QpState next = (mask & kQpState) ? a.qp_state : cur;
  if (static_cast<unsigned>(next) >= kStates)
    return err(EINVAL, "modify_qp: qp_state out of range");
  const Rule& rule = kRules.r[st(cur)][st(next)];
  if (!rule.valid)
    return err(EINVAL, std::string("modify_qp: invalid transition ") + to_string(cur) + " -> " +
                           to_string(next));
  const TypeIdx ti = type_idx(qp.type);
  const uint32_t req = rule.req[ti], opt = rule.opt[ti];
  if ((mask & req) != req)
    return err(EINVAL, std::string("modify_qp: ") + to_string(cur) + " -> " + to_string(next) +
                           " needs attribute mask " + hex(req) + "; missing " + hex(req & ~mask));
  const uint32_t extra = mask & ~(req | opt | kQpState);
  if (extra)
    return err(EINVAL, std::string("modify_qp: ") + to_string(cur) + " -> " + to_string(next) +
                           " does not allow attribute mask " + hex(extra));
  if ((mask & kQpAccessFlags) && (a.qp_access_flags & ~kQpAccessKnown))
    return err(EINVAL, "modify_qp: unknown qp_access_flags");
  if ((mask & kQpPkeyIndex) && a.pkey_index != 0)
    return err(EINVAL, "modify_qp: pkey_index must be 0 (one P_Key, the default 0xffff)");
  if ((mask & kQpPort) && a.port_num != 1) return err(EINVAL, "modify_qp: port_num must be 1");
  if (mask & kQpAv) {
    if (a.ah_attr.sgid_index >= gids_.size())
      return err(EINVAL, "modify_qp: ah_attr.sgid_index " + std::to_string(a.ah_attr.sgid_index) +
                             " >= GID table size " + std::to_string(gids_.size()));
    if (a.ah_attr.port_num != 1) return err(EINVAL, "modify_qp: ah_attr.port_num must be 1");
  }
  if (mask & kQpPathMtu) {
    const auto m = static_cast<uint8_t>(a.path_mtu);
    if (m < 1 || m > 5) return err(EINVAL, "modify_qp: path_mtu not a valid IBV_MTU_* value");
    if (m > static_cast<uint8_t>(cfg_.port_mtu))
      return err(EINVAL, "modify_qp: path_mtu larger than the port MTU " +
                             std::to_string(mtu_bytes(cfg_.port_mtu)));
  }
  if ((mask & kQpTimeout) && a.timeout > 31) return err(EINVAL, "modify_qp: timeout > 31");
  if ((mask & kQpRetryCnt) && a.retry_cnt > 7) return err(EINVAL, "modify_qp: retry_cnt > 7");
  if ((mask & kQpRnrRetry) && a.rnr_retry > 7) return err(EINVAL, "modify_qp: rnr_retry > 7");
  if ((mask & kQpMinRnrTimer) && a.min_rnr_timer > 31)
    return err(EINVAL, "modify_qp: min_rnr_timer > 31");
  if ((mask & kQpRqPsn) && a.rq_psn > kPsnMask) return err(EINVAL, "modify_qp: rq_psn > 2^24-1");
  if ((mask & kQpSqPsn) && a.sq_psn > kPsnMask) return err(EINVAL, "modify_qp: sq_psn > 2^24-1");
  if ((mask & kQpDestQpn) && a.dest_qp_num > kPsnMask)
    return err(EINVAL, "modify_qp: dest_qp_num > 2^24-1");
  if ((mask & kQpMaxQpRdAtomic) && a.max_rd_atomic > cfg_.max_rd_atomic)
    return err(EINVAL, "modify_qp: max_rd_atomic above the device limit " +
                           std::to_string(cfg_.max_rd_atomic));
  if ((mask & kQpMaxDestRdAtomic) && a.max_dest_rd_atomic > cfg_.max_rd_atomic)
    return err(EINVAL, "modify_qp: max_dest_rd_atomic above the device limit " +
                           std::to_string(cfg_.max_rd_atomic));
  // Lossy mode's windows (qp.h, LossyTxMem / LossyRxMem): a QP that offers
  // it may get a trailer from its first packet on, so they are there from RTR.
  if (next == QpState::kRtr && qp.lossy.offer && !lossy_alloc(qp))
    return err(ENOMEM, "modify_qp: no memory for the lossy-mode windows");

  // ---------------- apply ----------------
  QpAttr& q = qp.attr;
  if (mask & kQpAccessFlags) q.qp_access_flags = a.qp_access_flags;
  if (mask & kQpPkeyIndex) q.pkey_index = a.pkey_index;
  if (mask & kQpPort) q.port_num = a.port_num;
  if (mask & kQpQkey) q.qkey = a.qkey;
  if (mask & kQpAv) q.ah_attr = a.ah_attr;
  if (mask & kQpPathMtu) {
    q.path_mtu = a.path_mtu;
    if (!qp.is_ud()) qp.mtu = mtu_bytes(a.path_mtu);
  }
  if (mask & kQpTimeout) {
    q.timeout = a.timeout;
    qp.ack_timeout = ack_timeout_duration(a.timeout);
  }
  if (mask & kQpRetryCnt) q.retry_cnt = qp.retry_left = a.retry_cnt;
  if (mask & kQpRnrRetry) q.rnr_retry = qp.rnr_left = a.rnr_retry;
  if (mask & kQpRqPsn) q.rq_psn = a.rq_psn;
  if (mask & kQpSqPsn) q.sq_psn = a.sq_psn;
  if (mask & kQpMaxQpRdAtomic) q.max_rd_atomic = a.max_rd_atomic;
  if (mask & kQpMaxDestRdAtomic) q.max_dest_rd_atomic = a.max_dest_rd_atomic;
  if (mask & kQpMinRnrTimer) {
    q.min_rnr_timer = a.min_rnr_timer;
    qp.min_rnr = rnr_timer_duration(a.min_rnr_timer);
  }
  if (mask & kQpDestQpn) q.dest_qp_num = a.dest_qp_num;
  if (mask & kQpEnSqdAsyncNotify) q.en_sqd_async_notify = a.en_sqd_async_notify;
  qp.max_rd_atomic = q.max_rd_atomic;
  qp.max_dest_rd_atomic = q.max_dest_rd_atomic;  // <= cfg.max_rd_atomic == res.size()
  if (mask & (kQpDestQpn | kQpAv))
    qp.src_port = static_cast<uint16_t>(
        0xc000 | (mix64(cfg_.seed ^ (uint64_t{qp.qpn} << 24 | q.dest_qp_num)) & 0x3fff));

  if (next == cur) {
    if (cur == QpState::kRts || cur == QpState::kSqd) sched_req(qp);
    return {};
  }
  switch (next) {
    case QpState::kReset: {
      std::vector<uint64_t> lost;  // SRQ WQEs held that the SRQ has no room for
      return_srq_wqes(qp, &lost);
      reset_qp_state(qp);
      cq_discard_qp(qp.send_cq, qp.qpn);
      if (qp.recv_cq != qp.send_cq) cq_discard_qp(qp.recv_cq, qp.qpn);
      qp.state = QpState::kReset;
      for (uint64_t id : lost) complete_recv_flushed(qp, id);  // the application learns their buffers are free
      break;
    }
    case QpState::kErr:
      qp_to_error(qp);
      break;
    case QpState::kInit:
      qp.state = QpState::kInit;
      break;
    case QpState::kRtr:
      // Responder starts at rq_psn with MSN 0 and an empty resource table.
      qp.state = QpState::kRtr;
      qp.resp_psn = q.rq_psn;
      qp.msn = 0;
      qp.nak_seq_sent = false;
      qp.in_msg = InMsg::kNone;
      qp.res_alloc = qp.res_tx = 0;
      for (Resource& r : qp.res) r = Resource{};
      lossy_reset_rx(qp);
      break;
    case QpState::kRts:
      if (cur == QpState::kRtr) {
        qp.req_psn = q.sq_psn;
        qp.high_psn = q.sq_psn;
        qp.acked_psn = psn_add(q.sq_psn, -1);
        qp.retry_left = q.retry_cnt;
        qp.rnr_left = q.rnr_retry;
        qp.timeout_probe = false;
        lossy_reset_tx(qp);
        cc_qp_start(*this, qp, now);
      }
      qp.state = QpState::kRts;
      if (cur == QpState::kSqe) {
        // UC/UD SQE -> RTS: the failed WQEs were flushed; resume after them.
        qp.sq_next = qp.sq_head = qp.sq_tail;
      }
      sched_req(qp);
      break;
    case QpState::kSqd:
      qp.state = QpState::kSqd;
      qp.sqd_notify = q.en_sqd_async_notify;
      qp.sqd_drained_sent = false;
      check_sq_drained(qp);
      break;
    case QpState::kSqe:
      break;  // not reachable: no rule enters SQE
  }
  q.qp_state = qp.state;
  return {};
}

}  // namespace sroce
