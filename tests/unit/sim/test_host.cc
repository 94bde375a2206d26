// The host driver loop with the real engine: NIC ring discipline,
// determinism of whole engine-driven runs, corrupted frames, outages.
#include <catch2/catch.hpp>

#include "sroce/sim/pcap.h"
#include "sroce/sim/topology.h"
#include "sroce/sim/transfer.h"

using namespace sroce;
using namespace sroce::sim;

namespace {
struct Run {
  Simulator sim;
  Network net;
  BackToBack bb;
  PcapWriter pcap;
  std::unique_ptr<RcTransfer> x;

  Run(uint64_t seed, const LinkConfig& ab, const LinkConfig& ba, const TransferConfig& tc,
      Mtu mtu = Mtu::k1024)
      : sim(seed), net(sim) {
    HostConfig hc;
    hc.engine.seed = seed;
    hc.arena_bytes = tc.total_bytes + (1u << 20);
    net.set_tap(&pcap);
    bb = build_back_to_back(net, hc, ab, ba);
    QpOptions qo;
    qo.mtu = mtu;
    auto pair = make_qp_pair(*bb.a, *bb.b, qo, seed);
    REQUIRE(pair.ok());
    x = std::make_unique<RcTransfer>(pair->first, pair->second, tc);
    REQUIRE(x->setup().ok());
    x->on_progress = [this](const RcTransfer& t, Time) {
      if (t.done()) sim.stop();
    };
    x->start();
    sim.run(Time{} + Duration::millis(500));
  }
  void require_ok() {
    std::string why;
    INFO(x->stats().first_error);
    REQUIRE(x->done());
    REQUIRE_FALSE(x->failed());
    INFO(why);
    REQUIRE(x->verify(&why));
  }
};

TransferConfig small(uint64_t bytes, uint32_t msg) {
  TransferConfig tc;
  tc.total_bytes = bytes;
  tc.msg_bytes = msg;
  tc.mix = {WrOpcode::kRdmaWrite, WrOpcode::kSend};
  return tc;
}
}  // namespace

TEST_CASE("the host keeps at most tx_ring frames on its uplink", "[sim][host]") {
  LinkConfig lc;
  lc.rate_bps = 10'000'000'000ull;  // slow link: the engine has far more to send than fits
  Run r(1, lc, lc, small(2u << 20, 256u << 10));
  r.require_ok();
  const Link& up = *r.bb.ab;
  // HostConfig::tx_ring = 4: one frame in service, at most 3 waiting.
  const uint64_t max_frame = Link::frame_bytes(Packet{}) + Engine::kMaxPacket;
  CHECK(up.stats().max_queue_bytes > 0);
  CHECK(up.stats().max_queue_bytes <= 3 * max_frame);
  CHECK(up.stats().queue_drops == 0);
  CHECK(r.bb.a->stats().tx_frames == up.stats().enqueued);
  CHECK(r.bb.a->stats().stalls == 0);
  CHECK(r.bb.b->stats().stalls == 0);
  // At 10 Gbit/s the transfer cannot beat the wire.
  const double secs = static_cast<double>((r.x->stats().last_completion - r.x->stats().first_post).ps) / 1e12;
  CHECK(2.0 * (1 << 20) * 8 / secs < 10e9);
}

TEST_CASE("an engine-driven run is byte-for-byte reproducible from its seed", "[sim][host][determinism]") {
  LinkConfig lc;
  lc.impair.loss = 0.01;
  lc.impair.reorder = 0.02;
  lc.impair.duplicate = 0.01;
  lc.impair.corrupt = 0.01;
  Run a(7, lc, lc, small(1u << 20, 64u << 10));
  Run b(7, lc, lc, small(1u << 20, 64u << 10));
  Run c(8, lc, lc, small(1u << 20, 64u << 10));
  a.require_ok();
  CHECK(a.pcap.frames() > 700);
  CHECK(a.pcap.bytes() == b.pcap.bytes());
  CHECK(a.sim.events_run() == b.sim.events_run());
  CHECK(a.pcap.bytes() != c.pcap.bytes());
}

TEST_CASE("every corrupted frame is dropped by the engine before it acts", "[sim][host]") {
  LinkConfig lc;
  lc.impair.corrupt = 0.05;
  Run r(3, lc, lc, small(2u << 20, 128u << 10));
  r.require_ok();
  for (Host* h : {r.bb.a, r.bb.b}) {
    const EngineStats& es = h->engine().stats();
    uint64_t parse = 0;
    for (int k = kRxDropParseShort; k <= kRxDropParseBadLength; ++k) parse += es.rx_drop_reason[k];
    parse += es.rx_drop_reason[kRxDropBadInt];  // a flipped bit can look like a bad INT shim/echo
    CHECK(h->stats().rx_corrupted == es.rx_bad_icrc + parse);
  }
  CHECK(r.bb.b->stats().rx_corrupted > 20);
}

TEST_CASE("a transfer survives a dead link and completes once it is back", "[sim][host]") {
  LinkConfig lc;
  const Time t1 = Time{} + Duration::micros(50), t2 = t1 + Duration::micros(700);
  lc.impair.outages.push_back({t1, t2});
  Run r(4, lc, lc, small(4u << 20, 256u << 10));
  r.require_ok();
  CHECK(r.bb.ab->stats().lost_down + r.bb.ba->stats().lost_down > 0);
  CHECK(r.x->stats().last_completion > t2);
}

TEST_CASE("asymmetric paths: a slow, long way back still delivers", "[sim][host]") {
  LinkConfig fwd, back;
  fwd.rate_bps = 100'000'000'000ull;
  back.rate_bps = 1'000'000'000ull;
  back.delay = Duration::micros(40);
  Run r(5, fwd, back, small(1u << 20, 128u << 10), Mtu::k4096);
  r.require_ok();
}
