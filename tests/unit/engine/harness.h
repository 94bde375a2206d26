// Test harness: two engines back to back through an in-test "wire" that can
// drop, duplicate, hold (reorder) and inspect packets, a fake clock that
// jumps to the engines' next deadline when the wire is quiet, and a simple
// MemoryAccess over a std::vector per host.
#pragma once

#include <catch2/catch.hpp>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "proto/icrc.h"
#include "proto/int.h"
#include "proto/packet.h"
#include "sroce/engine/engine.h"

namespace sroce::test {

class VecMemory : public MemoryAccess {
 public:
  VecMemory(uint64_t base, size_t size) : base_(base), buf_(size) {}
  bool read(uint64_t addr, std::span<std::byte> out) override {
    ++reads;
    if (fail_reads || !inside(addr, out.size())) return false;
    if (!out.empty()) std::memcpy(out.data(), &buf_[addr - base_], out.size());
    return true;
  }
  // `fused_copy`: the copy and its CRC in one pass (sroce_crc32_copy), as the simulator's
  // and sroced's memory do; otherwise MemoryAccess's default (read, then the CRC).
  bool read_mr_crc(uint32_t lkey, uint64_t addr, std::span<std::byte> out, uint32_t& crc) override {
    ++crc_reads;
    if (!fused_copy) return MemoryAccess::read_mr_crc(lkey, addr, out, crc);
    ++reads;
    if (fail_reads || !inside(addr, out.size())) return false;
    crc = sroce_crc32_copy(crc, reinterpret_cast<uint8_t*>(out.data()),
                           reinterpret_cast<const uint8_t*>(&buf_[addr - base_]), out.size());
    return true;
  }
  bool write(uint64_t addr, std::span<const std::byte> in) override {
    ++writes;
    if (fail_writes || !inside(addr, in.size())) return false;
    if (!in.empty()) std::memcpy(&buf_[addr - base_], in.data(), in.size());
    return true;
  }
  bool inside(uint64_t addr, size_t n) const {
    return addr >= base_ && n <= buf_.size() && addr - base_ <= buf_.size() - n;
  }
  uint8_t* at(uint64_t addr) { return reinterpret_cast<uint8_t*>(&buf_[addr - base_]); }
  void fill(uint64_t addr, size_t n, uint32_t seed) {
    for (size_t i = 0; i < n; ++i)
      at(addr)[i] = static_cast<uint8_t>((i * 131 + seed * 7 + (i >> 8)) & 0xff);
  }
  void zero(uint64_t addr, size_t n) { std::memset(at(addr), 0, n); }
  bool same(uint64_t a, VecMemory& other, uint64_t b, size_t n) {
    return std::memcmp(at(a), other.at(b), n) == 0;
  }
  uint64_t get64(uint64_t addr) {
    uint64_t v;
    std::memcpy(&v, at(addr), 8);
    return v;
  }
  void put64(uint64_t addr, uint64_t v) { std::memcpy(at(addr), &v, 8); }
  uint64_t base() const { return base_; }
  size_t size() const { return buf_.size(); }

  bool fail_reads = false;
  bool fail_writes = false;
  bool fused_copy = true;
  uint64_t reads = 0, writes = 0;
  uint64_t crc_reads = 0;  // read_mr_crc calls

 private:
  uint64_t base_;
  std::vector<std::byte> buf_;
};

constexpr uint64_t kMemBase = 0x7f0000000000ull;
constexpr size_t kMemSize = 8u << 20;

struct Host {
  explicit Host(uint32_t ipv4, uint64_t seed = 1, EngineConfig cfg = {})
      : gid(Gid::from_ipv4(ipv4)), mem(kMemBase, kMemSize) {
    cfg.gids = {&gid, 1};
    cfg.seed = seed;
    eng = std::make_unique<Engine>(cfg, mem);
    pd = *eng->alloc_pd();
    cq = *eng->create_cq(4096);
    auto k = eng->reg_mr(
        pd, kMemBase, kMemSize,
        kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic);
    REQUIRE(k.ok());
    mr = *k;
  }
  Engine& operator*() { return *eng; }
  Engine* operator->() { return eng.get(); }
  const Engine* operator->() const { return eng.get(); }

  std::vector<Wc> poll(Handle c = kNoHandle, int max = 1024) {
    std::vector<Wc> out(static_cast<size_t>(max));
    const int n = eng->poll_cq(c == kNoHandle ? cq : c, out);
    REQUIRE(n >= 0);
    out.resize(static_cast<size_t>(n));
    return out;
  }
  std::vector<AsyncEvent> events() {
    std::vector<AsyncEvent> v;
    while (auto e = eng->poll_async_event()) v.push_back(*e);
    return v;
  }
  uint64_t addr(uint64_t off) const { return kMemBase + off; }

  Gid gid;
  VecMemory mem;
  std::unique_ptr<Engine> eng;
  Handle pd = kNoHandle;
  Handle cq = kNoHandle;
  MrKeys mr;
};

// One packet on the wire, with its parsed header for filters and logs.
struct WirePkt {
  int from = 0;  // 0: host a -> b, 1: host b -> a
  std::vector<std::byte> bytes;
  PacketMeta meta;
  uint8_t opcode = 0;  // full opcode (transport bits included)
  uint32_t psn = 0;
  Qpn dqpn = 0;
  bool ack_req = false;
  uint8_t syndrome = 0;  // AETH, when present
  uint32_t msn = 0;      // AETH, when present
  uint32_t payload_len = 0;
  bool cap = false;  // BTH: sroce lossy offer
  bool ext = false;  // BTH: lossy trailer present (then req or ack is filled)
  sroce_leh_req req{};
  sroce_leh_ack ack{};
  // docs/wire.md "INT": the request's INT shim (its bytes in front of the
  // BTH, its record count) and the ACK's INT echo (records echoed).
  size_t int_shim = 0;
  uint8_t int_hops = 0;
  uint8_t int_echo = 0;
  uint8_t op() const { return opcode & 0x1f; }
  bool is_nak() const { return op() == SROCE_OP_ACK && (syndrome >> 5) == SROCE_AETH_NAK; }
  bool is_rnr() const { return op() == SROCE_OP_ACK && (syndrome >> 5) == SROCE_AETH_RNR_NAK; }
  bool is_ack() const { return op() == SROCE_OP_ACK && (syndrome >> 5) == SROCE_AETH_ACK; }
};

enum class Verdict { kDeliver, kDrop, kDuplicate, kHold };

class Wire {
 public:
  Wire(Host& a, Host& b) : h_{&a, &b} {}

  std::function<Verdict(const WirePkt&)> filter;
  std::vector<WirePkt> log;   // every packet put on the wire, in order
  std::vector<WirePkt> held;  // kHold packets, for release()
  Time now = Time::zero();
  size_t max_packets = 2'000'000;
  // A muted host is not polled for packets (its engine still receives and runs its timers):
  // an end whose loop is descheduled, or paced, with work still to send.
  bool mute[2] = {false, false};

  // Delivers packets until both engines have nothing to send at `now`. The
  // hosts take turns, one packet each, like the two ends of a link.
  size_t pump() {
    size_t moved = 0;
    std::vector<std::byte> buf(Engine::kMaxPacket);
    for (;;) {
      bool any = false;
      for (int i = 0; i < 2; ++i) {
        if (mute[i]) continue;
        if (auto tx = h_[i]->eng->poll_transmit(buf, now)) {
          any = true;
          REQUIRE(tx->len <= buf.size());
          REQUIRE(tx->send_at <= now);
          WirePkt p = make(i, std::span(buf.data(), tx->len), tx->meta);
          log.push_back(p);
          REQUIRE(++moved < max_packets);
          const Verdict v = filter ? filter(p) : Verdict::kDeliver;
          if (v == Verdict::kDrop) continue;
          if (v == Verdict::kHold) {
            held.push_back(std::move(p));
            continue;
          }
          deliver(p);
          if (v == Verdict::kDuplicate) deliver(p);
        }
      }
      if (!any) return moved;
    }
  }

  void deliver(const WirePkt& p) { h_[1 - p.from]->eng->on_packet(p.bytes, p.meta, now); }

  void release() {
    auto h = std::move(held);
    held.clear();
    for (auto& p : h) deliver(p);
  }

  Time next_deadline() const {
    const Time a = h_[0]->eng->next_deadline(), b = h_[1]->eng->next_deadline();
    return a < b ? a : b;
  }

  // Pump; when quiet, jump to the next deadline and fire timers; until
  // `done()` holds or nothing is left to do within `limit` of fake time.
  bool run_until(const std::function<bool()>& done, Duration limit = Duration::millis(60'000)) {
    const Time end = now + limit;
    for (int guard = 0; guard < 10'000'000; ++guard) {
      pump();
      if (done()) return true;
      const Time d = next_deadline();
      if (d == Time::never() || d > end) return done();
      if (d > now) now = d;
      h_[0]->eng->on_timer(now);
      h_[1]->eng->on_timer(now);
    }
    FAIL("run_until: no progress");
    return false;
  }
  void run(Duration limit = Duration::millis(60'000)) {
    run_until([] { return false; }, limit);
  }

  size_t count(const std::function<bool(const WirePkt&)>& pred) const {
    size_t n = 0;
    for (const auto& p : log) n += pred(p) ? 1 : 0;
    return n;
  }

  static WirePkt make(int from, std::span<const std::byte> bytes, const PacketMeta& meta) {
    WirePkt p;
    p.from = from;
    p.bytes.assign(bytes.begin(), bytes.end());
    p.meta = meta;
    sroce_pkt pk;
    const auto* raw = reinterpret_cast<const uint8_t*>(p.bytes.data());
    size_t len = p.bytes.size();
    // INT (docs/wire.md): a shim in front of the BTH; an echo before the ICRC.
    if (sroce_int_present(raw, len)) {
      sroce_int_shim s{};
      REQUIRE(sroce_int_shim_parse(raw, len, &s) == SROCE_INT_OK);
      p.int_shim = sroce_int_shim_bytes(&s);
      p.int_hops = s.count;
      raw += p.int_shim;
      len -= p.int_shim;
    }
    size_t tail = 0;
    if (len >= SROCE_BTH_LEN && (raw[8] & SROCE_BTH8_INT_ECHO)) {
      uint8_t flags = 0;
      REQUIRE(sroce_int_echo_parse(raw + len - SROCE_ICRC_LEN, len - SROCE_ICRC_LEN, &p.int_echo, &flags) ==
              SROCE_INT_OK);
      tail = sroce_int_echo_bytes(p.int_echo);
    }
    // Lossy mode (docs/wire.md): the EXT bit announces a trailer before the ICRC.
    p.cap = len >= SROCE_BTH_LEN && (raw[8] & SROCE_BTH8_SROCE_CAP);
    p.ext = len >= SROCE_BTH_LEN && (raw[8] & SROCE_BTH8_SROCE_EXT);
    const size_t plen = len - tail - (p.ext ? SROCE_LEH_LEN : 0);
    REQUIRE(sroce_parse(raw, plen, &pk) == SROCE_PARSE_OK);
    const uint8_t op5 = pk.bth.opcode & 0x1f;
    const bool read_resp = op5 >= SROCE_OP_READ_RESP_FIRST && op5 <= SROCE_OP_READ_RESP_ONLY;
    if (p.ext && (!(pk.op->flags & SROCE_IS_RESPONSE) || read_resp)) {  // READ responses: request layout
      sroce_leh_req_read(raw + plen - SROCE_ICRC_LEN, &p.req);
    } else if (p.ext) {
      sroce_leh_ack_read(raw + plen - SROCE_ICRC_LEN, &p.ack);
    }
    p.opcode = pk.bth.opcode;
    p.psn = pk.bth.psn;
    p.dqpn = pk.bth.dqpn;
    p.ack_req = pk.bth.ack_req;
    p.payload_len = pk.payload_len;
    if (pk.op->flags & SROCE_HAS_AETH) {
      p.syndrome = pk.aeth.syndrome;
      p.msn = pk.aeth.msn;
    }
    return p;
  }

 private:
  Host* h_[2];
};

// ------------------------------------------------------------------ QPs
struct QpOpts {
  QpType type = QpType::kRc;
  uint32_t max_send_wr = 256;
  uint32_t max_recv_wr = 256;
  uint32_t max_send_sge = 4;
  uint32_t max_recv_sge = 4;
  uint32_t max_inline = 64;
  Handle srq = kNoHandle;
  bool sig_all = false;
};

inline Qpn make_qp(Host& h, const QpOpts& o = {}) {
  QpInitAttr a;
  a.qp_type = o.type;
  a.send_cq = a.recv_cq = h.cq;
  a.srq = o.srq;
  a.cap = {o.max_send_wr, o.max_recv_wr, o.max_send_sge, o.max_recv_sge, o.max_inline};
  a.sq_sig_all = o.sig_all;
  auto r = h->create_qp(h.pd, a);
  INFO((r.ok() ? std::string() : r.error().message));
  REQUIRE(r.ok());
  return *r;
}

struct ConnOpts {
  Mtu mtu = Mtu::k1024;
  uint32_t sq_psn = 100;  // ours
  uint32_t rq_psn = 100;  // the peer's sq_psn
  uint8_t timeout = 14;   // 4.096 us * 2^14 = 67 ms
  uint8_t retry_cnt = 7;
  uint8_t rnr_retry = 7;
  uint8_t min_rnr_timer = 1;  // 10 us
  uint8_t max_rd_atomic = 16;
  uint8_t max_dest_rd_atomic = 16;
  uint32_t access = kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic;
  uint32_t qkey = 0x11111111;
};

inline void to_init(Host& h, Qpn q, QpType t, const ConnOpts& o = {}) {
  QpAttr a;
  a.qp_state = QpState::kInit;
  a.pkey_index = 0;
  a.port_num = 1;
  uint32_t mask = kQpState | kQpPkeyIndex | kQpPort;
  if (t == QpType::kUd) {
    a.qkey = o.qkey;
    mask |= kQpQkey;
  } else {
    a.qp_access_flags = o.access;
    mask |= kQpAccessFlags;
  }
  auto r = h->modify_qp(q, a, mask, Time::zero());
  INFO((r.ok() ? std::string() : r.error().message));
  REQUIRE(r.ok());
}

inline void to_rtr(Host& h, Qpn q, QpType t, const Host& peer, Qpn peer_qpn,
                   const ConnOpts& o = {}) {
  QpAttr a;
  a.qp_state = QpState::kRtr;
  uint32_t mask = kQpState;
  if (t != QpType::kUd) {
    a.ah_attr.dgid = peer.gid;
    a.path_mtu = o.mtu;
    a.dest_qp_num = peer_qpn;
    a.rq_psn = o.rq_psn;
    mask |= kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn;
    if (t == QpType::kRc) {
      a.max_dest_rd_atomic = o.max_dest_rd_atomic;
      a.min_rnr_timer = o.min_rnr_timer;
      mask |= kQpMaxDestRdAtomic | kQpMinRnrTimer;
    }
  }
  auto r = h->modify_qp(q, a, mask, Time::zero());
  INFO((r.ok() ? std::string() : r.error().message));
  REQUIRE(r.ok());
}

inline void to_rts(Host& h, Qpn q, QpType t, const ConnOpts& o = {}) {
  QpAttr a;
  a.qp_state = QpState::kRts;
  a.sq_psn = o.sq_psn;
  uint32_t mask = kQpState | kQpSqPsn;
  if (t == QpType::kRc) {
    a.timeout = o.timeout;
    a.retry_cnt = o.retry_cnt;
    a.rnr_retry = o.rnr_retry;
    a.max_rd_atomic = o.max_rd_atomic;
    mask |= kQpTimeout | kQpRetryCnt | kQpRnrRetry | kQpMaxQpRdAtomic;
  }
  auto r = h->modify_qp(q, a, mask, Time::zero());
  INFO((r.ok() ? std::string() : r.error().message));
  REQUIRE(r.ok());
}

inline void connect(Host& h, Qpn q, QpType t, const Host& peer, Qpn peer_qpn,
                    const ConnOpts& o = {}) {
  to_init(h, q, t, o);
  to_rtr(h, q, t, peer, peer_qpn, o);
  to_rts(h, q, t, o);
}

// Two hosts, one connected QP each, and the wire between them.
struct Pair {
  explicit Pair(const QpOpts& qo = {}, ConnOpts co = {}, ConnOpts co_b = {}, EngineConfig cfg = {})
      : a(0x0a000001, 11, cfg), b(0x0a000002, 22, cfg), w(a, b) {
    qa = make_qp(a, qo);
    qb = make_qp(b, qo);
    co_b.sq_psn = co.rq_psn;
    co_b.rq_psn = co.sq_psn;
    if (co_b.mtu != co.mtu) co_b.mtu = co.mtu;
    connect(a, qa, qo.type, b, qb, co);
    connect(b, qb, qo.type, a, qa, co_b);
  }
  Host a, b;
  Wire w;
  Qpn qa = 0, qb = 0;
};

// ------------------------------------------------------------------ posting
inline int post(Host& h, Qpn q, WrOpcode op, std::vector<Sge> sgl, uint64_t wr_id,
                uint32_t flags = kSendSignaled, uint64_t raddr = 0, uint32_t rkey = 0,
                uint32_t imm = 0) {
  SendWr wr;
  wr.wr_id = wr_id;
  wr.opcode = op;
  wr.send_flags = flags;
  wr.sgl = sgl;
  wr.imm_data = imm;
  wr.invalidate_rkey = imm;
  wr.rdma.remote_addr = raddr;
  wr.rdma.rkey = rkey;
  return h->post_send(q, wr, Time::zero());
}

inline int post_atomic(Host& h, Qpn q, WrOpcode op, Sge local, uint64_t wr_id, uint64_t raddr,
                       uint32_t rkey, uint64_t compare_add, uint64_t swap,
                       uint32_t flags = kSendSignaled) {
  SendWr wr;
  wr.wr_id = wr_id;
  wr.opcode = op;
  wr.send_flags = flags;
  wr.sgl = std::span<const Sge>(&local, 1);
  wr.atomic.remote_addr = raddr;
  wr.atomic.rkey = rkey;
  wr.atomic.compare_add = compare_add;
  wr.atomic.swap = swap;
  return h->post_send(q, wr, Time::zero());
}

inline int post_recv(Host& h, Qpn q, std::vector<Sge> sgl, uint64_t wr_id) {
  RecvWr wr;
  wr.wr_id = wr_id;
  wr.sgl = sgl;
  return h->post_recv(q, wr);
}

inline Sge sge(const Host& h, uint64_t off, uint32_t len) {
  return Sge{h.addr(off), len, h.mr.lkey};
}

// Waits (in fake time) for `n` completions on a host's CQ.
// Runs the wire until h has polled n completions (or `limit`); `each`, if given, runs
// before every poll (e.g. releasing what a filter held).
inline std::vector<Wc> wait_wc(Wire& w, Host& h, size_t n,
                               Duration limit = Duration::millis(60'000),
                               const std::function<void()>& each = {}) {
  std::vector<Wc> got;
  w.run_until(
      [&] {
        if (each) each();
        auto v = h.poll();
        got.insert(got.end(), v.begin(), v.end());
        return got.size() >= n;
      },
      limit);
  return got;
}

inline std::string wc_str(const Wc& wc) {
  return "wr_id=" + std::to_string(wc.wr_id) + " status=" + to_string(wc.status) +
         " opcode=" + std::to_string(static_cast<int>(wc.opcode)) +
         " len=" + std::to_string(wc.byte_len);
}

// How many non-ACK packets with this PSN side `from` put on the wire
// (first transmission plus retransmissions).
inline size_t sent_with_psn(const Wire& w, int from, uint32_t psn) {
  return w.count(
      [&](const WirePkt& p) { return p.from == from && p.psn == psn && p.op() != SROCE_OP_ACK; });
}

// A QP's counters (the QP must exist).
// The engine-wide NAK counters by code (EngineStats::naks_sent_by_code / _received_by_code,
// sroced's `engine.naks_by_code`): exactly one NAK of `code`, sent by `responder` and received
// by `requester`, and none the other way.
inline bool one_nak(Host& requester, Host& responder, NakCode code) {
  const EngineStats& rq = requester->stats();
  const EngineStats& rs = responder->stats();
  for (int k = 0; k < kNakCodes; ++k) {
    const uint64_t want = k == code ? 1 : 0;
    if (rs.naks_sent_by_code[k] != want || rq.naks_received_by_code[k] != want ||
        rq.naks_sent_by_code[k] != 0 || rs.naks_received_by_code[k] != 0)
      return false;
  }
  return rs.naks_sent == 1 && rq.naks_received == 1;
}

inline QpStats qstats(Host& h, Qpn q) {
  auto s = h->qp_stats(q);
  REQUIRE(s.ok());
  return *s;
}

// Lossy mode offered with `lanes` lanes (docs/lossy.md), sprayed packet by
// packet (train_bytes 0: the tests written for per-packet spraying name the
// lanes of single packets; test_lossy_trains.cc runs trains).
inline EngineConfig lossy_cfg(uint16_t lanes = 16) {
  EngineConfig c;
  c.lossy.enable = true;
  c.lossy.lanes = lanes;
  c.lossy.train_bytes = 0;
  return c;
}

// One small WRITE each way round so that both QPs see the other's CAP bit
// and the requester switches at its next WQE.
inline void warm_up(Pair& p) {
  REQUIRE(post(p.a, p.qa, WrOpcode::kRdmaWrite, {sge(p.a, 0, 8)}, 900, kSendSignaled,
               p.b.addr(0x7f0000), p.b.mr.rkey) == 0);
  auto wc = wait_wc(p.w, p.a, 1);
  REQUIRE(wc.size() == 1);
  REQUIRE(wc[0].status == WcStatus::kSuccess);
}

// A mixed stream from a to b: op i of kind 0 (SEND), 1 (RDMA WRITE) or 2 (RDMA READ) moves
// len bytes; buffers lie `stride` apart per op (a's sources cycle over 4 of them, b's READ
// source is at 0x200000), so check_mixed_data can find every op's bytes afterwards.
inline void post_mixed(Pair& p, int i, int kind, uint32_t len, uint64_t stride) {
  const uint64_t at = stride * static_cast<uint64_t>(i);
  const uint64_t off = stride * static_cast<uint64_t>(i % 4);
  if (kind == 0) {
    REQUIRE(post_recv(p.b, p.qb, {sge(p.b, 0x10000 + at, static_cast<uint32_t>(stride))}, i) == 0);
    REQUIRE(post(p.a, p.qa, WrOpcode::kSend, {sge(p.a, off, len)}, i) == 0);
  } else if (kind == 1) {
    REQUIRE(post(p.a, p.qa, WrOpcode::kRdmaWrite, {sge(p.a, off, len)}, i, kSendSignaled,
                 p.b.addr(0x100000 + at), p.b.mr.rkey) == 0);
  } else {
    REQUIRE(post(p.a, p.qa, WrOpcode::kRdmaRead, {sge(p.a, 0x20000 + at, len)}, i, kSendSignaled,
                 p.b.addr(0x200000 + off), p.b.mr.rkey) == 0);
  }
}

// Every op of post_mixed landed byte-exact where it should.
inline void check_mixed_data(Pair& p, const std::vector<int>& kind, const std::vector<uint32_t>& lens,
                             uint64_t stride) {
  for (size_t i = 0; i < kind.size(); ++i) {
    const uint64_t at = stride * i, off = stride * (i % 4);
    if (kind[i] == 0)
      CHECK(p.b.mem.same(p.b.addr(0x10000 + at), p.a.mem, p.a.addr(off), lens[i]));
    else if (kind[i] == 1)
      CHECK(p.b.mem.same(p.b.addr(0x100000 + at), p.a.mem, p.a.addr(off), lens[i]));
    else
      CHECK(p.a.mem.same(p.a.addr(0x20000 + at), p.b.mem, p.b.addr(0x200000 + off), lens[i]));
  }
}

// The ICRC of a packet put together or changed by a test, for the addresses and ports in
// `m` (Annex A17.3.3; IPv4 id 0, as sroce sends).
inline void reicrc(std::vector<std::byte>& b, const PacketMeta& m) {
  sroce_icrc_addr a;
  std::memcpy(a.src_gid, m.src.raw, 16);
  std::memcpy(a.dst_gid, m.dst.raw, 16);
  a.src_port = m.src_port;
  a.dst_port = m.dst_port;
  const size_t n = b.size() - SROCE_ICRC_LEN;
  const uint32_t crc = sroce_icrc_payload(&a, reinterpret_cast<const uint8_t*>(b.data()), n);
  for (size_t i = 0; i < 4; ++i) b[n + i] = static_cast<std::byte>(crc >> (8 * i));
}

}  // namespace sroce::test
