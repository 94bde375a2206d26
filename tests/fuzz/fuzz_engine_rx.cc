// The engine's receive path under hostile packets (docs/security.md, "Fuzzing"):
// Engine::on_packet on QPs of every type (RC, UC, UD) in every state a packet can
// meet (RESET, INIT, RTR, RTS, SQD, ERR), with requests outstanding (SEND, READ,
// atomic) and receives posted, on a compatible engine or one that offers lossy
// mode. Input: one flag byte, then records [qp][flags][len lo][len hi][bytes];
// record flags (bit): 0 put the chosen QP's number into the BTH, 1 the packet
// comes from the connected peer (else a stranger), 2 trimmed (DCP), 3 fill in
// the R_Key of RETH/AtomicETH with the MR's, 4 fill in the UD Q_Key, 5 fix the
// ICRC, 6 advance the clock 10 ms and fire timers. After each packet the engine
// transmits what it wants and every completion is checked.
//
// Invariants (abort on violation):
//  - memory is written only inside the registered MR (the rest is a guard);
//  - a QP in RESET, INIT or ERR accepts no packet and completes nothing, and
//    its state does not change;
//  - no QP goes back to RESET or INIT, and none leaves ERR;
//  - a receive completes only on a QP in RTR, RTS or SQD (at setup), with
//    byte_len within the buffer posted;
//  - completions name QPs of this engine.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "fuzz_check.h"
#include "proto/icrc.h"
#include "proto/roce.h"
#include "sroce/engine/engine.h"

using namespace sroce;

namespace {

constexpr uint64_t kBase = 0x7f0000000000ull;
constexpr size_t kMemSize = 64 * 1024;
constexpr uint64_t kMrOff = 4096, kMrLen = 48 * 1024;  // the rest is a guard
constexpr uint32_t kRecvLen = 1024;
constexpr uint32_t kQkey = 0x11111111;
const Gid kSelf = Gid::from_ipv4(0x0a000002);
const Gid kPeer = Gid::from_ipv4(0x0a000001);
const Gid kStranger = Gid::from_ipv4(0x0a0000ee);

class GuardedMemory : public MemoryAccess {
 public:
  GuardedMemory() : buf_(kMemSize) {}
  bool read(uint64_t addr, std::span<std::byte> out) override {
    if (!inside(addr, out.size())) return false;
    if (!out.empty()) memcpy(out.data(), &buf_[addr - kBase], out.size());
    return true;
  }
  bool write(uint64_t addr, std::span<const std::byte> in) override {
    // The engine checked an lkey or rkey before writing: only the MR may change.
    FUZZ_CHECK(addr >= kBase + kMrOff && in.size() <= kMrLen &&
               addr - kBase - kMrOff <= kMrLen - in.size());
    if (!in.empty()) memcpy(&buf_[addr - kBase], in.data(), in.size());
    return true;
  }

 private:
  static bool inside(uint64_t addr, size_t n) {
    return addr >= kBase && n <= kMemSize && addr - kBase <= kMemSize - n;
  }
  std::vector<std::byte> buf_;
};

struct FuzzQp {
  Qpn qpn = 0;
  QpType type = QpType::kRc;
  QpState state = QpState::kReset;  // at setup
};

struct Rig {
  GuardedMemory mem;
  std::unique_ptr<Engine> eng;
  Handle pd = kNoHandle, cq = kNoHandle, ah = kNoHandle;
  MrKeys mr{};
  std::vector<FuzzQp> qps;
  std::vector<std::byte> tx = std::vector<std::byte>(Engine::kMaxPacket);
  Time now = Time::zero();
};

// SROCE_FUZZ_VERBOSE=1: what each input did (run the seeds with -runs=0 to see them work).
const bool kVerbose = getenv("SROCE_FUZZ_VERBOSE") != nullptr;
unsigned g_ok = 0, g_err = 0, g_tx = 0;

bool receiving(QpState s) { return s == QpState::kRtr || s == QpState::kRts || s == QpState::kSqd; }

void drain_tx(Rig& r) {
  for (int i = 0; i < 256; ++i) {
    if (!r.eng->poll_transmit(r.tx, r.now)) return;
    ++g_tx;
  }
}

const FuzzQp* find(const Rig& r, Qpn q) {
  for (const auto& f : r.qps)
    if (f.qpn == q) return &f;
  return nullptr;
}

void check(Rig& r) {
  Wc wc[64];
  for (;;) {
    int n = r.eng->poll_cq(r.cq, wc);
    FUZZ_CHECK(n >= 0);
    for (int i = 0; i < n; ++i) {
      const FuzzQp* q = find(r, wc[i].qp_num);
      FUZZ_CHECK(q != nullptr);
      FUZZ_CHECK(receiving(q->state));
      bool recv = wc[i].opcode == WcOpcode::kRecv || wc[i].opcode == WcOpcode::kRecvRdmaWithImm;
      if (recv && wc[i].status == WcStatus::kSuccess) FUZZ_CHECK(wc[i].byte_len <= kRecvLen);
      ++(wc[i].status == WcStatus::kSuccess ? g_ok : g_err);
    }
    if (n < 64) break;
  }
  while (r.eng->poll_async_event()) {
  }
  for (const auto& q : r.qps) {
    auto a = r.eng->query_qp(q.qpn);
    FUZZ_CHECK(a.ok());
    QpState s = a->qp_state;
    if (!receiving(q.state)) {
      FUZZ_CHECK(s == q.state);
      auto st = r.eng->qp_stats(q.qpn);
      FUZZ_CHECK(st.ok() && st->rx_packets == 0);
    } else {
      FUZZ_CHECK(s != QpState::kReset && s != QpState::kInit);
    }
  }
}

bool modify(Rig& r, Qpn q, QpType t, QpState to, Qpn dest) {
  QpAttr a;
  a.qp_state = to;
  uint32_t mask = kQpState;
  switch (to) {
    case QpState::kInit:
      a.port_num = 1;
      mask |= kQpPkeyIndex | kQpPort;
      if (t == QpType::kUd) {
        a.qkey = kQkey;
        mask |= kQpQkey;
      } else {
        a.qp_access_flags = kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic;
        mask |= kQpAccessFlags;
      }
      break;
    case QpState::kRtr:
      if (t != QpType::kUd) {
        a.ah_attr.dgid = kPeer;
        a.path_mtu = Mtu::k1024;
        a.dest_qp_num = dest;
        a.rq_psn = 100;
        mask |= kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn;
        if (t == QpType::kRc) {
          a.max_dest_rd_atomic = 4;
          a.min_rnr_timer = 1;
          mask |= kQpMaxDestRdAtomic | kQpMinRnrTimer;
        }
      }
      break;
    case QpState::kRts:
      a.sq_psn = 200;
      mask |= kQpSqPsn;
      if (t == QpType::kRc) {
        a.timeout = 10;
        a.retry_cnt = 3;
        a.rnr_retry = 3;
        a.max_rd_atomic = 4;
        mask |= kQpTimeout | kQpRetryCnt | kQpRnrRetry | kQpMaxQpRdAtomic;
      }
      break;
    default:
      break;
  }
  return r.eng->modify_qp(q, a, mask, r.now).ok();
}

// Requests outstanding on a QP in RTS, so responses and ACKs have something to meet.
void post_requests(Rig& r, const FuzzQp& q) {
  Sge s{kBase + kMrOff + 8192, 256, r.mr.lkey};
  SendWr w;
  w.send_flags = kSendSignaled;
  w.sgl = {&s, 1};
  w.wr_id = 1;
  w.opcode = WrOpcode::kSend;
  if (q.type == QpType::kUd) {
    w.ud.ah = r.ah;
    w.ud.remote_qpn = 0x44;
    w.ud.remote_qkey = kQkey;
  }
  (void)r.eng->post_send(q.qpn, w, r.now);
  if (q.type != QpType::kRc) return;
  w.wr_id = 2;
  w.opcode = WrOpcode::kRdmaRead;
  w.rdma.remote_addr = 0x7f0000001000ull;
  w.rdma.rkey = 0xc0ffee;
  (void)r.eng->post_send(q.qpn, w, r.now);
  Sge a{kBase + kMrOff + 16384, 8, r.mr.lkey};
  w.wr_id = 3;
  w.opcode = WrOpcode::kAtomicFetchAdd;
  w.sgl = {&a, 1};
  w.atomic.remote_addr = 0x7f0000002000ull;
  w.atomic.rkey = 0xc0ffee;
  w.atomic.compare_add = 1;
  (void)r.eng->post_send(q.qpn, w, r.now);
}

std::unique_ptr<Rig> make_rig(bool lossy) {
  auto r = std::make_unique<Rig>();
  EngineConfig cfg;
  cfg.gids = {&kSelf, 1};
  cfg.seed = 7;
  cfg.lossy.enable = lossy;
  // Small tables: the engine is built for every input.
  cfg.max_qps = 32;
  cfg.max_cqs = 4;
  cfg.max_mrs = 8;
  cfg.max_pds = 4;
  cfg.max_srqs = 4;
  cfg.max_ahs = 8;
  cfg.max_cqe = 4096;
  cfg.max_qp_wr = 64;
  cfg.max_sge = 4;
  cfg.max_rd_atomic = 4;
  r->eng = std::make_unique<Engine>(cfg, r->mem);
  r->pd = *r->eng->alloc_pd();
  r->cq = *r->eng->create_cq(4096);
  auto k = r->eng->reg_mr(
      r->pd, kBase + kMrOff, kMrLen,
      kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic);
  FUZZ_CHECK(k.ok());
  r->mr = *k;
  AhAttr ah;
  ah.dgid = kPeer;
  r->ah = *r->eng->create_ah(r->pd, ah);
  const QpState states[] = {QpState::kReset, QpState::kInit, QpState::kRtr,
                            QpState::kRts,   QpState::kSqd,  QpState::kErr};
  Qpn dest = 0x100;
  for (QpType t : {QpType::kRc, QpType::kUc, QpType::kUd}) {
    for (QpState want : states) {
      QpInitAttr ia;
      ia.qp_type = t;
      ia.send_cq = ia.recv_cq = r->cq;
      ia.cap = {16, 16, 2, 2, 64};
      auto q = r->eng->create_qp(r->pd, ia);
      FUZZ_CHECK(q.ok());
      FuzzQp f{*q, t, want};
      ++dest;
      bool ok = true;
      if (want != QpState::kReset) ok = ok && modify(*r, f.qpn, t, QpState::kInit, dest);
      if (want != QpState::kReset) {
        for (uint64_t i = 0; i < 4; ++i) {  // receives: 1 KiB each in the MR
          Sge s{kBase + kMrOff + i * kRecvLen, kRecvLen, r->mr.lkey};
          RecvWr rw{100 + i, {&s, 1}};
          (void)r->eng->post_recv(f.qpn, rw);
        }
      }
      if (want == QpState::kRtr || want == QpState::kRts || want == QpState::kSqd)
        ok = ok && modify(*r, f.qpn, t, QpState::kRtr, dest);
      if (want == QpState::kRts || want == QpState::kSqd)
        ok = ok && modify(*r, f.qpn, t, QpState::kRts, dest);
      if (want == QpState::kRts || want == QpState::kSqd) post_requests(*r, f);
      if (want == QpState::kSqd) ok = ok && modify(*r, f.qpn, t, QpState::kSqd, dest);
      if (want == QpState::kErr) ok = ok && modify(*r, f.qpn, t, QpState::kErr, dest);
      FUZZ_CHECK(ok);
      r->qps.push_back(f);
    }
  }
  drain_tx(*r);
  // Setup's own completions (flushes of the ERR QP) are not the packets' doing.
  Wc wc[64];
  while (r->eng->poll_cq(r->cq, wc) > 0) {
  }
  while (r->eng->poll_async_event()) {
  }
  return r;
}

void patch(Rig& r, const FuzzQp& q, uint8_t flags, std::vector<uint8_t>& p,
           const PacketMeta& meta) {
  if (p.size() < SROCE_BTH_LEN) return;
  if (flags & 1) sroce_put_be24(&p[5], q.qpn);
  const struct sroce_opinfo* oi = sroce_opinfo(p[0]);
  if ((flags & 8) && oi && (oi->flags & (SROCE_HAS_RETH | SROCE_HAS_ATMETH)) &&
      p.size() >= SROCE_BTH_LEN + 12) {
    sroce_put_be64(&p[SROCE_BTH_LEN],
                   kBase + kMrOff + (sroce_get_be64(&p[SROCE_BTH_LEN]) & 0x7fff));
    sroce_put_be32(&p[SROCE_BTH_LEN + 8], r.mr.rkey);
  }
  if ((flags & 16) && oi && (oi->flags & SROCE_HAS_DETH) && p.size() >= SROCE_BTH_LEN + 8)
    sroce_put_be32(&p[SROCE_BTH_LEN], kQkey);
  if ((flags & 32) && p.size() >= SROCE_BTH_LEN + SROCE_ICRC_LEN) {
    sroce_icrc_addr a;
    memcpy(a.src_gid, meta.src.raw, 16);
    memcpy(a.dst_gid, meta.dst.raw, 16);
    a.src_port = meta.src_port;
    a.dst_port = meta.dst_port;
    uint32_t c = sroce_icrc_payload(&a, p.data(), p.size() - SROCE_ICRC_LEN);
    sroce_icrc_put(&p[p.size() - SROCE_ICRC_LEN], c);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  auto r = make_rig((data[0] & 1) != 0);
  g_ok = g_err = g_tx = 0;
  size_t at = 1;
  for (int n = 0; n < 16 && at + 4 <= size; ++n) {
    const FuzzQp& q = r->qps[data[at] % r->qps.size()];
    uint8_t flags = data[at + 1];
    size_t len = data[at + 2] | (size_t{data[at + 3]} << 8);
    at += 4;
    len = std::min(len, size - at);
    std::vector<uint8_t> p(data + at, data + at + len);
    at += len;
    PacketMeta meta;
    meta.src = (flags & 2) ? kPeer : kStranger;
    meta.dst = kSelf;
    meta.src_port = static_cast<uint16_t>(0xc000 | (p.size() & 0xff));
    meta.trimmed = (flags & 4) != 0;
    patch(*r, q, flags, p, meta);
    if (flags & 64) {
      r->now += Duration::millis(10);
      r->eng->on_timer(r->now);
    }
    r->eng->on_packet(std::as_bytes(std::span(p)), meta, r->now);
    drain_tx(*r);
    check(*r);
  }
  r->now += Duration::millis(100);
  r->eng->on_timer(r->now);
  drain_tx(*r);
  check(*r);
  if (kVerbose) {
    const EngineStats& st = r->eng->stats();
    fprintf(
        stderr,
        "engine_rx: %zu bytes: %lu packets, %lu dropped, %u sent, %u completions ok, %u in error\n",
        size, static_cast<unsigned long>(st.rx_packets), static_cast<unsigned long>(st.rx_dropped),
        g_tx, g_ok, g_err);
  }
  return 0;
}
