#include "sroce/sim/verbs_setup.h"

#include <string>

#include "sroce/sim/rng.h"

namespace sroce::sim {

namespace {
Error wrap(const std::string& where, const Error& e) {
  return Error{e.code, where + ": " + e.message};
}
std::string name_of(const Gid& g) {
  if (!g.is_ipv4()) return "host";
  const uint32_t a = g.ipv4();
  return std::to_string(a >> 24) + "." + std::to_string(a >> 16 & 255) + "." +
         std::to_string(a >> 8 & 255) + "." + std::to_string(a & 255);
}
}  // namespace

Result<QpEnd> create_qp_end(Engine& e, Gid addr, const QpOptions& o, Handle pd) {
  const std::string who = name_of(addr);
  QpEnd end;
  end.engine = &e;
  end.addr = addr;
  if (pd == kNoHandle) {
    auto r = e.alloc_pd();
    if (!r) return wrap(who + " alloc_pd", r.error());
    pd = *r;
  }
  end.pd = pd;
  auto cq = e.create_cq(o.cqe);
  if (!cq) return wrap(who + " create_cq", cq.error());
  end.send_cq = end.recv_cq = *cq;
  QpInitAttr ia;
  ia.qp_type = o.type;
  ia.send_cq = end.send_cq;
  ia.recv_cq = end.recv_cq;
  ia.cap.max_send_wr = o.send_wr;
  ia.cap.max_recv_wr = o.recv_wr;
  ia.cap.max_send_sge = o.max_sge;
  ia.cap.max_recv_sge = o.max_sge;
  ia.cap.max_inline_data = o.max_inline;
  ia.sq_sig_all = o.sq_sig_all;
  auto qp = e.create_qp(pd, ia);
  if (!qp) return wrap(who + " create_qp", qp.error());
  end.qpn = *qp;
  return end;
}

Result<QpEnd> create_qp_end(Host& h, const QpOptions& o, Handle pd) {
  auto end = create_qp_end(h.engine(), h.addr(), o, pd);
  if (!end) return end;
  end->host = &h;
  h.watch_cq(end->send_cq);
  return end;
}

Result<void> connect_qp(QpEnd& local, const QpEnd& remote, const QpOptions& o,
                        uint32_t remote_sq_psn, Time now) {
  Engine& e = *local.engine;
  const std::string who = name_of(local.addr) + " qp " + std::to_string(local.qpn);

  // RESET -> INIT (IBA 11.2.5.3 / table 92 required attributes).
  QpAttr a;
  a.qp_state = QpState::kInit;
  a.pkey_index = 0;
  a.port_num = 1;
  uint32_t mask = kQpState | kQpPkeyIndex | kQpPort;
  if (o.type == QpType::kUd) {
    a.qkey = o.qkey;
    mask |= kQpQkey;
  } else {
    a.qp_access_flags = o.access;
    mask |= kQpAccessFlags;
  }
  if (auto r = e.modify_qp(local.qpn, a, mask, now); !r) return wrap(who + " ->INIT", r.error());

  // INIT -> RTR.
  a = QpAttr{};
  a.qp_state = QpState::kRtr;
  mask = kQpState;
  if (o.type != QpType::kUd) {
    a.path_mtu = o.mtu;
    a.dest_qp_num = remote.qpn;
    a.rq_psn = remote_sq_psn;
    a.ah_attr.dgid = remote.addr;
    a.ah_attr.sgid_index = 0;
    a.ah_attr.hop_limit = 64;
    a.ah_attr.traffic_class = o.traffic_class;
    mask |= kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn;
    if (o.type == QpType::kRc) {
      a.max_dest_rd_atomic = o.max_rd_atomic;
      a.min_rnr_timer = o.min_rnr_timer;
      mask |= kQpMaxDestRdAtomic | kQpMinRnrTimer;
    }
  }
  if (auto r = e.modify_qp(local.qpn, a, mask, now); !r) return wrap(who + " ->RTR", r.error());

  // RTR -> RTS.
  a = QpAttr{};
  a.qp_state = QpState::kRts;
  a.sq_psn = local.sq_psn;
  mask = kQpState | kQpSqPsn;
  if (o.type == QpType::kRc) {
    a.timeout = o.timeout;
    a.retry_cnt = o.retry_cnt;
    a.rnr_retry = o.rnr_retry;
    a.max_rd_atomic = o.max_rd_atomic;
    mask |= kQpTimeout | kQpRetryCnt | kQpRnrRetry | kQpMaxQpRdAtomic;
  }
  if (auto r = e.modify_qp(local.qpn, a, mask, now); !r) return wrap(who + " ->RTS", r.error());

  if (o.type == QpType::kUd) {
    AhAttr ah;
    ah.dgid = remote.addr;
    ah.hop_limit = 64;
    auto r = e.create_ah(local.pd, ah);
    if (!r) return wrap(who + " create_ah", r.error());
    local.ah = *r;
  }
  return {};
}

namespace {
Result<std::pair<QpEnd, QpEnd>> connect_pair(Result<QpEnd> ea, Result<QpEnd> eb, const QpOptions& o,
                                             uint64_t psn_seed, Time now) {
  if (!ea) return ea.error();
  if (!eb) return eb.error();
  Rng rng(psn_seed);
  ea->sq_psn = static_cast<uint32_t>(rng.next() & 0xffffff);
  eb->sq_psn = static_cast<uint32_t>(rng.next() & 0xffffff);
  if (auto r = connect_qp(*ea, *eb, o, eb->sq_psn, now); !r) return r.error();
  if (auto r = connect_qp(*eb, *ea, o, ea->sq_psn, now); !r) return r.error();
  return std::pair<QpEnd, QpEnd>{*ea, *eb};
}
}  // namespace

Result<std::pair<QpEnd, QpEnd>> make_qp_pair(Host& a, Host& b, const QpOptions& o,
                                             uint64_t psn_seed) {
  return connect_pair(create_qp_end(a, o), create_qp_end(b, o), o, psn_seed, a.sim().now());
}

Result<std::pair<QpEnd, QpEnd>> make_qp_pair(Engine& a, Gid a_addr, Engine& b, Gid b_addr,
                                             const QpOptions& o, uint64_t psn_seed, Time now) {
  return connect_pair(create_qp_end(a, a_addr, o), create_qp_end(b, b_addr, o), o, psn_seed, now);
}

Result<MrKeys> reg_region(Host& h, Handle pd, uint64_t addr, uint64_t len, uint32_t access) {
  auto r = h.engine().reg_mr(pd, addr, len, access);
  if (!r) {
    char buf[96];
    std::snprintf(buf, sizeof buf, " reg_mr [0x%llx, +%llu)", static_cast<unsigned long long>(addr),
                  static_cast<unsigned long long>(len));
    return wrap(h.name() + buf, r.error());
  }
  return r;
}

}  // namespace sroce::sim
