// The data path (post_*, poll_*, on_packet, on_timer, poll_transmit) never
// allocates: every queue and buffer is sized when objects are created. This
// binary replaces the global operator new to count allocations.
#include <atomic>
#include <cstdlib>
#include <new>

#include "harness.h"

namespace {
std::atomic<bool> g_counting{false};
std::atomic<uint64_t> g_allocs{0};
}  // namespace

#if defined(__SANITIZE_ADDRESS__)
// Under ASan, count through its allocator hooks (they see operator new too).
// Declared here: <sanitizer/allocator_interface.h> is not always installed.
extern "C" int __sanitizer_install_malloc_and_free_hooks(void (*malloc_hook)(const volatile void*,
                                                                             size_t),
                                                         void (*free_hook)(const volatile void*));
namespace {
void on_malloc(const volatile void*, size_t) {
  if (g_counting.load(std::memory_order_relaxed)) g_allocs.fetch_add(1, std::memory_order_relaxed);
}
void on_free(const volatile void*) {}
const int g_hooks = __sanitizer_install_malloc_and_free_hooks(on_malloc, on_free);
}  // namespace
#else
// Our replacement operators pair malloc with free on purpose.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void* operator new(size_t n) {
  if (g_counting.load(std::memory_order_relaxed)) g_allocs.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void* operator new[](size_t n) { return operator new(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t) noexcept { std::free(p); }
#endif

using namespace sroce;
using namespace sroce::test;

TEST_CASE("no allocation on the data path / including loss recovery", "[alloc]") {
  // Both modes: compatible (go-back-N) and lossy (SACK, lanes, trims).
  const bool lossy = GENERATE(false, true);
  // Congestion control off (-1) or each algorithm (docs/cc/README.md): the
  // controllers, pacing holds, CNPs and INT echo allocate nothing either.
  const int alg = GENERATE(-1, 0, 1, 2, 3);
  // Packet by packet and in lane trains / scheduler quanta (docs/lossy.md "Lane trains").
  const uint32_t train = GENERATE(0u, kDefaultTrainBytes);
  CAPTURE(lossy, alg, train);
  EngineConfig cfg;
  cfg.lossy.enable = lossy;
  cfg.lossy.lanes = 8;
  cfg.lossy.train_bytes = train;
  cfg.cc.enable = alg >= 0;
  if (alg >= 0) cfg.cc.config.algorithm = static_cast<cc::Algorithm>(alg);
  // INT records two switches push on shimmed requests (proto/int.h).
  sroce_int_hop hops[2] = {{1, 0, 100'000, 0, 0, 0}, {2, SROCE_INT_HOP_F_SB, 100'000, 50'000, 0, 0}};
  Pair p(QpOpts{.max_send_wr = 64, .max_recv_wr = 64}, {.mtu = Mtu::k512, .timeout = 6}, {}, cfg);
  // Preallocate everything the loop below uses.
  std::vector<std::byte> buf(Engine::kMaxPacket + 2 * SROCE_INT_HOP_LEN);
  std::vector<Wc> wc(64);
  std::vector<Sge> one = {sge(p.a, 0, 3000)};
  std::vector<Sge> rsge = {sge(p.b, 0x10000, 4096)};
  std::vector<Sge> atom = {sge(p.a, 0x8000, 8)};
  SendWr wr;
  RecvWr rw;
  rw.sgl = rsge;
  Time now = Time::zero();
  uint64_t packets = 0, completions = 0, n = 0, posted = 0;

  // The counter sees allocations (so this test can fail).
  g_allocs = 0;
  g_counting = true;
  {
    auto* probe = new std::vector<int>(16);
    asm volatile("" : : "r"(probe) : "memory");
    delete probe;
  }
  g_counting = false;
  REQUIRE(g_allocs >= 1);

  // One step of the two engines over the wire: each side's next packet (with
  // `impaired`, some are lost, trimmed or CE-marked and the requests carry
  // INT), else time moves to the next deadline. False once both are idle.
  auto advance = [&](bool impaired) {
    bool any = false;
    if (auto tx = p.a->poll_transmit(buf, now)) {
      any = true;
      if (!impaired) {
        p.b->on_packet(std::span(buf.data(), tx->len), tx->meta, now);
      } else if (lossy && packets % 29 == 0) {
        // a trimmed copy: headers only (lossy mode turns it into a request)
        PacketMeta m = tx->meta;
        m.trimmed = true;
        const bool shim = sroce_int_present(reinterpret_cast<const uint8_t*>(buf.data()), tx->len);
        p.b->on_packet(std::span(buf.data(), 16 + (shim ? SROCE_INT_SHIM_LEN : 0)), m, now);
        ++packets;
      } else if (++packets % 17 != 0) {  // lose some requests: NAKs, timeouts, go-back-N
        PacketMeta m = tx->meta;
        if (packets % 5 == 0) m.traffic_class |= 3;  // CE: the responder sends CNPs
        hops[0].ts_ps = hops[1].ts_ps = static_cast<uint64_t>(now.ps);
        hops[0].tx_bytes += tx->len;
        hops[1].tx_bytes += tx->len;
        size_t len = tx->len;  // INT for the echo, if the request has a shim
        auto* raw = reinterpret_cast<uint8_t*>(buf.data());
        if (sroce_int_present(raw, len))
          for (const auto& h : hops) REQUIRE(sroce_int_push(raw, &len, buf.size(), &h) == 1);
        p.b->on_packet(std::span(buf.data(), len), m, now);
      }
    }
    if (auto tx = p.b->poll_transmit(buf, now)) {
      any = true;
      // and some responses: duplicates, replays
      if (!impaired || ++packets % 13 != 0)
        p.a->on_packet(std::span(buf.data(), tx->len), tx->meta, now);
    }
    if (!any) {
      const Time d = std::min(p.a->next_deadline(), p.b->next_deadline());
      if (d == Time::never()) return false;  // idle: nothing left to wait for
      if (d > now) now = d;
      p.a->on_timer(now);
      p.b->on_timer(now);
    }
    return true;
  };
  auto reap = [&] {
    for (int got; (got = p.a->poll_cq(p.a.cq, wc)) > 0;) completions += static_cast<uint64_t>(got);
    for (int got; (got = p.b->poll_cq(p.b.cq, wc)) > 0;) {
    }
  };

  g_allocs = 0;
  g_counting = true;
  for (int round = 0; round < 200; ++round) {
    for (int k = 0; k < 4; ++k) {
      p.b->post_recv(p.qb, rw);
      wr = SendWr{};
      wr.wr_id = n;
      wr.send_flags = kSendSignaled;
      switch (n++ % 4) {
        case 0:
          wr.opcode = WrOpcode::kSend;
          wr.sgl = one;
          break;
        case 1:
          wr.opcode = WrOpcode::kRdmaWrite;
          wr.sgl = one;
          wr.rdma = {p.b.addr(0x20000), p.b.mr.rkey};
          break;
        case 2:
          wr.opcode = WrOpcode::kRdmaRead;
          wr.sgl = one;
          wr.rdma = {p.b.addr(0x20000), p.b.mr.rkey};
          break;
        default:
          wr.opcode = WrOpcode::kAtomicFetchAdd;
          wr.sgl = atom;
          wr.atomic.remote_addr = p.b.addr(0x30000);
          wr.atomic.rkey = p.b.mr.rkey;
          wr.atomic.compare_add = 1;
      }
      // A full send queue (a controller that slowed the QP down) refuses the
      // post with ENOMEM, as ibv_post_send does: only accepted ones count.
      if (p.a->post_send(p.qa, wr, now) == 0) ++posted;
    }
    for (int step = 0; step < 400 && advance(true); ++step) {
    }
    reap();
  }
  // Everything accepted completes (successfully or not): drain without loss,
  // bounded, so a hang fails here and a slow controller does not.
  for (int step = 0; step < 100000 && completions < posted && advance(false); ++step) reap();
  g_counting = false;
  CHECK(g_allocs == 0);
  CHECK(posted > n / 2);
  CHECK(completions == posted);  // nothing hung, nothing lost
  // The impaired phase really moved traffic (packets counts only that phase).
  // With a controller fewer packets are needed: a small window (Swift after
  // the losses) wastes less on go-back-N, and a paced QP leaves more of its
  // work to the drain (lossy + delay with lane weights: 429 packet by packet,
  // 272 in trains, whose lanes the per-packet loss pattern here hits unevenly).
  CHECK(packets > (alg < 0 ? 2000u : 250u));
  CHECK(p.a->stats().retransmits > 0);
  CHECK(p.b->stats().duplicates > 0);
  const QpStats sa = *p.a->qp_stats(p.qa), sb = *p.b->qp_stats(p.qb);
  CHECK(sa.mode == (lossy ? QpMode::kLossy : QpMode::kCompatible));
  if (lossy) {
    CHECK(sa.selective_retransmits > 0);
    CHECK(sb.trims_received > 0);
    CHECK(sb.sacks_sent > 0);
  }
}
