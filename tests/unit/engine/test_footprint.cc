// Memory follows use (docs/engine.md, "Memory"): a QP holds what its caps
// ask for, lossy mode's windows come when an RC QP connects, and an engine
// with no objects holds no QP slots. Measured twice: by the engine's own
// accounting (memory_bytes, qp_memory_bytes) and by the allocator (bytes in
// use before and after), which must agree, so that neither can drift.
//
// The bound for an idle QP (kIdleQpBound): its table slot (sizeof(Qp), about
// 2.4 KiB once the lane arrays left it) plus queues for 16 send and 16
// receive WRs of one SGE (about 2.7 KiB) plus the responder's READ/atomic
// resources (16 x 72 bytes): about 6.3 KiB; 8 KiB leaves room for fields to
// come and still fails if the 11.8 KiB of lane arrays went back into every
// slot, or if any queue were sized by the device maxima (max_qp_wr 16384).
#include <malloc.h>

#include "harness.h"

#if defined(__SANITIZE_ADDRESS__)
// <sanitizer/allocator_interface.h> is not always installed.
extern "C" size_t __sanitizer_get_current_allocated_bytes();
#endif

using namespace sroce;
using namespace sroce::test;

namespace {

constexpr size_t kIdleQpBound = 8 * 1024;
// A QP's table slot alone (sizeof(Qp), about 2.4 KiB): what stays built
// after the QP is destroyed.
constexpr size_t kSlotBound = 4 * 1024;

// Bytes the process's allocator has handed out and not taken back.
size_t heap_in_use() {
#if defined(__SANITIZE_ADDRESS__)
  return __sanitizer_get_current_allocated_bytes();
#else
  const struct mallinfo2 m = mallinfo2();
  return m.uordblks + m.hblkhd;
#endif
}

QpOpts small_caps() {
  return QpOpts{.max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1, .max_recv_sge = 1,
                .max_inline = 0};
}

size_t qp_bytes(Host& h, Qpn q) {
  auto r = h->qp_memory_bytes(q);
  REQUIRE(r.ok());
  return *r;
}

}  // namespace

TEST_CASE("memory: an engine without objects holds no QP slots", "[footprint]") {
  // The default config: 1024 QPs, 4096 MRs, 1024 CQs. Before the tables
  // were built on demand, this was about 15 MB (1024 QP slots of 14 KB).
  EngineConfig cfg;
  const Gid gid = Gid::from_ipv4(0x0a000001);
  cfg.gids = {&gid, 1};
  VecMemory mem(kMemBase, 4096);
  const size_t h0 = heap_in_use();
  auto e = std::make_unique<Engine>(cfg, mem);
  const size_t grew = heap_in_use() - h0;
  const size_t own = e->memory_bytes();
  CAPTURE(grew, own);
  CHECK(own < 256 * 1024);
  CHECK(grew < 256 * 1024);
  // The engine accounts for what the allocator saw, within a small slack
  // (allocator headers, std::function and other small members).
  CHECK(own <= grew + 4096);
  CHECK(grew <= own + own / 4 + 4096);
}

TEST_CASE("memory: an idle QP holds what its caps ask for", "[footprint]") {
  const bool lossy = GENERATE(false, true);
  CAPTURE(lossy);
  EngineConfig cfg;
  cfg.lossy.enable = lossy;
  Host h(0x0a000001, 1, cfg);
  constexpr uint32_t kN = 64;
  const size_t e0 = h->memory_bytes();
  const size_t h0 = heap_in_use();
  std::vector<Qpn> qps;
  for (uint32_t i = 0; i < kN; ++i) qps.push_back(make_qp(h, small_caps()));
  const size_t per_alloc = (heap_in_use() - h0) / kN;
  const size_t per_own = (h->memory_bytes() - e0) / kN;
  const size_t one = qp_bytes(h, qps[0]);
  CAPTURE(per_alloc, per_own, one);
  CHECK(one <= kIdleQpBound);
  CHECK(per_alloc <= kIdleQpBound);
  CHECK(per_own <= kIdleQpBound);
  // The accounting matches the allocator (64 QPs: whole table segments).
  CHECK(per_own <= per_alloc + 64);
  CHECK(per_alloc <= per_own + per_own / 8);
  // Destroying them gives the queues back (the table keeps its slots).
  const size_t before_destroy = heap_in_use();
  for (Qpn q : qps) REQUIRE(h->destroy_qp(q).ok());
  const size_t freed = before_destroy - heap_in_use();
  const size_t kept = h->memory_bytes() - e0;
  CAPTURE(freed, kept);
  CHECK(kept <= kN * kSlotBound);
  CHECK(freed >= (per_alloc - kSlotBound) * kN * 9 / 10);
}

TEST_CASE("memory: a QP grows with its caps, not with the device maxima", "[footprint]") {
  Host h(0x0a000001);
  const Qpn small = make_qp(h, small_caps());
  QpOpts big = small_caps();
  big.max_send_wr = 1024;
  const Qpn deep = make_qp(h, big);
  QpOpts wide = small_caps();
  wide.max_recv_wr = 1024;
  wide.max_recv_sge = 4;
  const Qpn rq = make_qp(h, wide);
  const size_t s = qp_bytes(h, small), d = qp_bytes(h, deep), r = qp_bytes(h, rq);
  CAPTURE(s, d, r);
  // A send WQE (112 bytes) with its SGE and host address (24 bytes).
  CHECK(d - s >= (1024 - 16) * 100);
  CHECK(d - s <= (1024 - 16) * 200);
  // A receive WQE with 4 SGEs: 16 bytes + 4 x 16 bytes.
  CHECK(r - s >= (1024 - 16) * (16 + 4 * 16));
  CHECK(r - s <= (1024 - 16) * (16 + 4 * 16 + 32));
  // The device maxima (max_qp_wr 16384) would be megabytes.
  CHECK(d < 256 * 1024);
}

// Bytes a connected RC QP holds beyond the idle one, with `lanes` lanes,
// by the engine's accounting and by the allocator (across the RTR step).
struct Connected {
  size_t own = 0;
  size_t alloc = 0;
};

// One 64 KiB RDMA WRITE from `from` to `to` (0x100000 in its MR), run to its
// completion; the bytes must arrive.
void write_64k(Wire& w, Host& from, Qpn q, Host& to, uint64_t id) {
  from.mem.fill(from.addr(0), 64 * 1024, static_cast<uint8_t>(id));
  to.mem.zero(to.addr(0x100000), 64 * 1024);
  REQUIRE(post(from, q, WrOpcode::kRdmaWrite, {sge(from, 0, 64 * 1024)}, id, kSendSignaled,
               to.addr(0x100000), to.mr.rkey) == 0);
  w.run();
  const auto wc = from.poll();
  REQUIRE(wc.size() == 1);
  CHECK(wc[0].status == WcStatus::kSuccess);
  CHECK(from.mem.same(from.addr(0), to.mem, to.addr(0x100000), 64 * 1024));
}

Connected connect_cost(uint16_t lanes, bool lossy) {
  EngineConfig cfg;
  cfg.lossy.enable = lossy;
  cfg.lossy.lanes = lanes;
  Host a(0x0a000001, 11, cfg), b(0x0a000002, 22, cfg);
  const Qpn qa = make_qp(a, small_caps()), qb = make_qp(b, small_caps());
  const size_t idle = qp_bytes(a, qa);
  to_init(a, qa, QpType::kRc);
  CHECK(qp_bytes(a, qa) == idle);
  const size_t h0 = heap_in_use();
  to_rtr(a, qa, QpType::kRc, b, qb);
  const size_t grew = heap_in_use() - h0;
  to_rts(a, qa, QpType::kRc);
  const size_t connected = qp_bytes(a, qa);
  // Traffic adds nothing to the QP (the data path does not allocate), and the
  // bytes arrive.
  connect(b, qb, QpType::kRc, a, qa);
  Wire w(a, b);
  write_64k(w, a, qa, b, 5);
  CHECK(qp_bytes(a, qa) == connected);
  return {connected - idle, grew};
}

TEST_CASE("memory: lossy mode's windows come at RTR and follow the lane count", "[footprint]") {
  const Connected off = connect_cost(16, false);
  CHECK(off.own == 0);
  CHECK(off.alloc < 512);
  const Connected l1 = connect_cost(1, true), l16 = connect_cost(16, true),
                  l64 = connect_cost(64, true);
  CAPTURE(l1.own, l16.own, l64.own, l1.alloc, l16.alloc, l64.alloc);
  // A fixed part (the PSN windows, the peer's lanes) and a part per own lane.
  const size_t per_lane = (l16.own - l1.own) / 15;
  CHECK(l16.own - l1.own == per_lane * 15);
  CHECK(l64.own - l16.own == per_lane * 48);
  CHECK(per_lane > 0);
  CHECK(per_lane <= 256);
  CHECK(l1.own - per_lane < 32 * 1024);
  // 16 lanes (the default): about 15 KB, under 24 KB at the 64-lane maximum.
  CHECK(l64.own < 24 * 1024);
  // The allocator saw the same bytes (plus its own headers), within 512 bytes
  // either way: mallinfo2 counts chunk sizes, and which free chunks the RTR's
  // allocations reuse or split depends on the heap's history (Catch's own
  // allocations, sizeof(Qp)): 25248 against 25344 at 16 lanes is seen both in
  // main's build under -s and here without it.
  for (const Connected& c : {l1, l16, l64}) {
    CHECK(c.alloc + 512 >= c.own);
    CHECK(c.alloc <= c.own + 512);
  }
}

TEST_CASE("memory: a QP without a send queue holds only the responder's half of lossy mode",
          "[footprint]") {
  // qp.h, LossyTxMem / LossyRxMem: the send window, our lanes and the READ
  // responses we would receive come only with a send queue; any connected QP
  // gets the receive window, since the peer may write to it.
  const Connected full = connect_cost(16, true);
  EngineConfig cfg;
  cfg.lossy.lanes = 16;
  Host a(0x0a000001, 11, cfg), b(0x0a000002, 22, cfg);
  QpOpts none = small_caps();
  none.max_send_wr = 0;
  const Qpn qa = make_qp(a, none), qb = make_qp(b, small_caps());
  const size_t idle = qp_bytes(a, qa);
  to_init(a, qa, QpType::kRc);
  const size_t h0 = heap_in_use();
  to_rtr(a, qa, QpType::kRc, b, qb);
  const size_t grew = heap_in_use() - h0;
  to_rts(a, qa, QpType::kRc);
  const size_t connected = qp_bytes(a, qa);
  const size_t own = connected - idle;
  CAPTURE(full.own, own, grew);
  // The send half: a 256-PSN window of 16-byte slots and 16 lanes at least.
  CHECK(own > 4096);
  CHECK(full.own - own >= 256 * 16 + 16 * 100);
  CHECK(grew + 512 >= own);
  CHECK(grew <= own + 512);
  // It cannot send: ibv_post_send's ENOMEM for a full (here empty) queue.
  CHECK(post(a, qa, WrOpcode::kRdmaWrite, {sge(a, 0, 8)}, 1, kSendSignaled, b.addr(0), b.mr.rkey) ==
        ENOMEM);
  // The peer writes to it in lossy mode; the bytes arrive, nothing grows.
  connect(b, qb, QpType::kRc, a, qa);
  Wire w(a, b);
  for (uint64_t id = 1; id <= 2; ++id) write_64k(w, b, qb, a, id);  // the first switches b
  auto st = b->qp_stats(qb);
  REQUIRE(st.ok());
  CHECK(st->mode == QpMode::kLossy);
  CHECK(qp_bytes(a, qa) == connected);
}

TEST_CASE("memory: a UD QP never holds lossy-mode windows", "[footprint]") {
  Host a(0x0a000001), b(0x0a000002);
  QpOpts o = small_caps();
  o.type = QpType::kUd;
  const Qpn q = make_qp(a, o);
  const size_t idle = qp_bytes(a, q);
  connect(a, q, QpType::kUd, b, 0);
  CHECK(qp_bytes(a, q) == idle);
  CHECK(!a->qp_memory_bytes(q + 1).ok());
}
