// fabric-selftest: the fabric on its own, with synthetic (but well-formed)
// RoCEv2 UD packets between two endpoints over a 4-spine leaf-spine. Checks
// that ECMP spreads source ports over the spines, that impairments happen at
// their configured rates, and that every corrupted frame fails the ICRC.
#include <cmath>
#include <vector>

#include "sroce/sim/synth.h"
#include "sroce/sim/topology.h"
#include "util.h"

namespace sroce::sim {

int scenario_fabric_selftest(const ScenarioOptions& opt, Reporter& rep) {
  Simulator sim(opt.seed);
  Network net(sim);
  bool pcap_failed = false;
  auto pcap = attach_pcap(net, opt, rep, &pcap_failed);
  if (pcap_failed) return 1;

  const uint32_t spines = static_cast<uint32_t>(opt.param_u64("spines", 4));
  const uint64_t n = opt.param_u64("packets", 20000);
  const double loss = opt.param_f64("loss", 0.01);
  LinkConfig lc;
  lc.rate_bps = 100'000'000'000ull;
  LinkConfig down = lc;
  down.impair.loss = loss;
  down.impair.reorder = 0.01;
  down.impair.duplicate = 0.005;
  down.impair.corrupt = 0.005;

  Switch& l0 = net.add_switch("leaf0");
  Switch& l1 = net.add_switch("leaf1");
  Endpoint& src = net.add_endpoint("e1", host_gid(1));
  Endpoint& dst = net.add_endpoint("e2", host_gid(2));
  net.connect(src, l0, lc);
  net.connect(dst, l1, lc);
  std::vector<Link*> up(spines);
  for (uint32_t s = 0; s < spines; ++s) {
    Switch& sp = net.add_switch("spine" + std::to_string(s));
    up[s] = net.connect(l0, sp, lc, lc).first;
    net.connect(l1, sp, lc, down);
  }
  net.compute_routes();
  dst.keep_payloads = true;

  // One 1 KiB packet every 100 ns (~84 Gbit/s on the wire), random source port.
  Rng traffic = sim.rng().fork();
  for (uint64_t i = 0; i < n; ++i) {
    sim.call_at(Time{} + Duration::nanos(100) * static_cast<int64_t>(i), [&, i](Time now) {
      PacketMeta m;
      m.src = src.addr();
      m.dst = dst.addr();
      m.src_port = static_cast<uint16_t>(49152 + traffic.below(16384));
      std::array<std::byte, 1100> buf;
      const size_t len = make_ud_send(buf, m, 0x12, static_cast<uint32_t>(i), 1024, static_cast<uint8_t>(i));
      src.send(std::span<const std::byte>(buf.data(), len), m, now);
    });
  }
  sim.run();

  // Reordering as seen by the receiver: arrivals with a serial below the
  // highest seen so far (duplicates excluded).
  uint64_t reordered = 0, corrupt_seen = 0, corrupt_caught = 0, dups = 0, max_serial = 0;
  bool first = true;
  for (const auto& a : dst.arrivals()) {
    if (a.duplicate) {
      ++dups;
      continue;
    }
    if (!first && a.serial < max_serial) ++reordered;
    if (first || a.serial > max_serial) max_serial = a.serial;
    first = false;
    if (a.corrupted) {
      ++corrupt_seen;
      if (!icrc_ok(a.payload, a.meta)) ++corrupt_caught;
    } else if (!icrc_ok(a.payload, a.meta)) {
      ++corrupt_caught;  // a clean frame failing the ICRC is a sim bug: caught != seen below
    }
  }
  const LinkStats ls = net.total_link_stats();
  Json per_spine = Json::array();
  bool spread_ok = true;
  for (uint32_t s = 0; s < spines; ++s) {
    const double share = static_cast<double>(up[s]->stats().tx_frames) / static_cast<double>(n);
    spread_ok = spread_ok && std::abs(share - 1.0 / spines) < 0.25 / spines;
    per_spine.push_back({{"spine", s}, {"frames", up[s]->stats().tx_frames}, {"share", share}});
  }
  const double lost_rate = static_cast<double>(ls.lost_random) / static_cast<double>(n);
  const double sigma = std::sqrt(loss * (1 - loss) / static_cast<double>(n));
  const bool loss_ok = std::abs(lost_rate - loss) <= 4 * sigma + 1e-9;
  const bool corrupt_ok = corrupt_seen == ls.corrupted && corrupt_caught == corrupt_seen;
  const bool count_ok = dst.arrivals().size() == n - ls.lost() - ls.queue_drops + ls.duplicated &&
                        dups == ls.duplicated;
  const bool ok = spread_ok && loss_ok && corrupt_ok && count_ok && reordered > 0;
  rep.event("ecmp", {{"per_spine", per_spine}});
  rep.event("fabric", to_json(ls));
  Json sum = {{"scenario", "fabric-selftest"},
              {"ok", ok},
              {"seed", opt.seed},
              {"packets", n},
              {"arrivals", dst.arrivals().size()},
              {"loss_rate", lost_rate},
              {"loss_expected", loss},
              {"reordered_arrivals", reordered},
              {"duplicates", dups},
              {"corrupted", corrupt_seen},
              {"corrupted_failing_icrc", corrupt_caught},
              {"checks", {{"ecmp_spread", spread_ok}, {"loss_rate", loss_ok}, {"icrc", corrupt_ok},
                          {"accounting", count_ok}}},
              {"sim_time_us", to_us(sim.now())},
              {"events", sim.events_run()}};
  if (pcap) sum["pcap_frames"] = pcap->frames();
  rep.summary(sum);
  return ok ? 0 : 1;
}

}  // namespace sroce::sim
