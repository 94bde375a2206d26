// Per-lane congestion controllers (CcEngineConfig::per_lane; docs/cc/README.md,
// "Per lane"): in lossy mode each lane has its own controller, fed by that
// lane's signals; congestion on one lane cuts only that lane, and the lane
// picker skips a lane its controller holds.
#include <algorithm>
#include <array>

#include "harness.h"

using namespace sroce;
using namespace sroce::test;

namespace {

EngineConfig lanes_cfg(bool per_lane) {
  EngineConfig c;
  c.lossy.enable = true;
  c.lossy.lanes = 4;
  c.lossy.lane_weights = false;  // plain round robin: only the controllers steer
  c.cc.enable = true;
  c.cc.config.algorithm = cc::Algorithm::kDcqcn;
  c.cc.notification_point = false;  // no CNPs: the lane's CE echo is the only signal
  c.cc.per_lane = per_lane;
  return c;
}

struct Run {
  std::array<LaneStats, 4> lanes{};
  uint64_t qp_rate = 0;
  std::array<uint64_t, 4> sent_after_cut{};
};

// Two messages (lossy mode starts at the second); every request on lane 2
// arrives CE-marked.
Run run(bool per_lane) {
  Pair p({}, {}, {}, lanes_cfg(per_lane));
  Run r;
  bool cut = false;
  p.w.filter = [&](const WirePkt& pk) {
    if (pk.from != 0 || !pk.ext || pk.op() == SROCE_OP_ACK) return Verdict::kDeliver;
    if (cut) ++r.sent_after_cut[pk.req.lane & 3];
    if (pk.req.lane != 2) return Verdict::kDeliver;
    cut = true;
    WirePkt m = pk;
    m.meta.traffic_class |= 3;
    p.w.deliver(m);
    return Verdict::kDrop;
  };
  REQUIRE(post(p.a, p.qa, WrOpcode::kRdmaWrite, {sge(p.a, 0, 4096)}, 1, kSendSignaled, p.b.addr(0x400000),
               p.b.mr.rkey) == 0);
  REQUIRE(post(p.a, p.qa, WrOpcode::kRdmaWrite, {sge(p.a, 0, 512 * 1024)}, 2, kSendSignaled, p.b.addr(0x400000),
               p.b.mr.rkey) == 0);
  const auto wc = wait_wc(p.w, p.a, 2);
  REQUIRE(wc.size() == 2);
  CHECK(wc[1].status == WcStatus::kSuccess);
  REQUIRE(p.a->lane_stats(p.qa, r.lanes) == 4);
  r.qp_rate = qstats(p.a, p.qa).cc_rate_bps;
  return r;
}

}  // namespace

TEST_CASE("cc lanes: CE on one lane cuts only that lane's controller, and the picker spares it", "[cc][lanes]") {
  const Run with = run(true);
  // Lane 2's controller took the CE echoes and cut its rate; the others kept
  // line rate; the QP's controller (no CNP reached it) did not move.
  CHECK(with.lanes[2].ce_echoed > 0);
  CHECK(with.lanes[2].cc_rate_bps > 0);
  CHECK(with.lanes[2].cc_rate_bps < 100'000'000'000ull / 2);
  for (const int i : {0, 1, 3}) {
    CAPTURE(i);
    CHECK(with.lanes[i].ce_echoed == 0);
    CHECK(with.lanes[i].cc_rate_bps == 100'000'000'000ull);
  }
  CHECK(with.qp_rate == 100'000'000'000ull);
  // The picker sent lane 2 fewer packets than each other lane once it was cut.
  for (const int i : {0, 1, 3}) {
    CAPTURE(i, with.sent_after_cut[i], with.sent_after_cut[2]);
    CHECK(with.sent_after_cut[2] * 2 < with.sent_after_cut[i]);
  }

  // Without per-lane controllers the same marks move nothing per lane, and
  // round robin gives lane 2 its equal share.
  const Run without = run(false);
  CHECK(without.lanes[2].ce_echoed > 0);
  CHECK(without.lanes[2].cc_rate_bps == 0);
  for (const int i : {0, 1, 3}) {
    CAPTURE(i, without.sent_after_cut[i], without.sent_after_cut[2]);
    CHECK(without.sent_after_cut[2] + 2 >= without.sent_after_cut[i]);
  }
}
