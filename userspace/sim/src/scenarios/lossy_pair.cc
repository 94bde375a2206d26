// Issue 4's single-QP experiments: one RC QP pair across a 100 Gbit/s
// leaf-spine (two leaves, `spines` paths), moving WRITEs that are verified
// byte for byte, under the engine's three reliability modes:
//
//   gbn    compatible RoCEv2 (lossy.enable = false): go-back-N, one path
//   sr     lossy mode on one lane: selective repeat + SACK (IRN, Falcon)
//   lanes  lossy mode on `lanes` lanes: spraying, per-lane gaps (PSN-PATH)
//
// loss-sweep    goodput vs random loss, each mode (goodput_ratio_*_1pct)
// reorder-only  paths of different delay, no loss: spurious retransmissions,
//               lanes vs an IRN-style receiver that takes every gap as a loss
// path-failure  one spine blackholes mid-transfer: time until its lanes are
//               retired, goodput timeline, no WR lost
// lane-weights  one spine slower than the others (a congested path): equal
//               spraying vs lanes steered by their weights (CE, loss, delay)
#include <algorithm>
#include <cmath>

#include "lossy_common.h"
#include "util.h"

namespace sroce::sim {

namespace {

enum class Mode { kGbn, kSr, kLanes, kNaive };

const char* mode_name(Mode m) {
  switch (m) {
    case Mode::kGbn:
      return "gbn";
    case Mode::kSr:
      return "sr";
    case Mode::kLanes:
      return "lanes";
    case Mode::kNaive:
      return "naive";
  }
  return "?";
}

// The common knobs of the three scenarios (defaults = full size).
PairRun base_run(const ScenarioOptions& opt, uint64_t bytes, uint32_t msg, uint32_t window) {
  PairRun r;
  r.seed = opt.seed;
  r.spines = static_cast<uint32_t>(opt.param_u64("spines", 4));
  r.rate_bps = opt.param_u64("gbps", 100) * 1'000'000'000ull;
  r.delay = Duration::nanos(static_cast<int64_t>(opt.param_u64("delay_ns", 1000)));
  r.bytes = opt.param_u64("bytes", bytes);
  r.msg = static_cast<uint32_t>(opt.param_u64("msg", msg));
  r.window = static_cast<uint32_t>(opt.param_u64("window", window));
  r.timeout = static_cast<uint8_t>(opt.param_u64("timeout", 8));
  r.lossy.reorder_timeout =
      Duration::micros(static_cast<int64_t>(opt.param_u64("reorder_timeout_us", 50)));
  r.lossy.reorder_timeout_max =
      Duration::micros(static_cast<int64_t>(opt.param_u64("reorder_timeout_max_us", 1000)));
  r.lossy.lane_weights = opt.param_u64("lane_weights", 1) != 0;
  r.lossy.train_bytes = static_cast<uint32_t>(opt.param_u64("train_bytes", r.lossy.train_bytes));
  r.lossy.lane_delay_target =
      Duration::micros(static_cast<int64_t>(opt.param_u64("lane_delay_target_us", 25)));
  r.lossy.lane_int = opt.param_u64("lane_int", 1) != 0;
  // int=1: switches stamp INT (shared-buffer MMU) and the hosts run the delay
  // controller, which reads INT, so shims are negotiated (docs/wire.md "INT").
  r.int_telemetry = opt.param_u64("int", 0) != 0;
  r.sample = Duration::micros(static_cast<int64_t>(opt.param_u64("bin_us", 10)));
  r.limit = Duration::millis(static_cast<int64_t>(opt.param_u64("limit_ms", 2000)));
  return r;
}

void set_mode(PairRun& r, Mode m, uint16_t lanes) {
  r.lossy.enable = m != Mode::kGbn;
  r.lossy.lanes = m == Mode::kSr ? uint16_t{1} : lanes;
  r.lossy.gap_is_loss = m == Mode::kNaive;
}

uint64_t lanes_retired(const PairResult& r) {
  return static_cast<uint64_t>(
      std::count_if(r.lanes.begin(), r.lanes.end(), [](const LaneStats& l) { return !l.active; }));
}

Json row_json(const PairResult& r, Mode m) {
  return {{"mode", mode_name(m)},
          {"ok", r.data_ok},
          {"qp_mode", to_string(r.client.mode)},
          {"goodput_gbps", r.goodput_gbps},
          {"elapsed_us", r.elapsed_us},
          {"retransmits", r.client.retransmits},
          {"selective_retransmits", r.client.selective_retransmits},
          {"spurious_retransmits", r.client.spurious_retransmits},
          {"timeouts", r.client.timeouts},
          {"naks", r.server.naks_sent},
          {"losses_detected", r.server.losses_detected},
          {"max_reorder_depth", r.server.max_reorder_depth},
          {"frames_lost", r.frames_lost},
          {"lanes", r.lanes.size()},
          {"lanes_retired", lanes_retired(r)},
          {"events", r.events}};
}

}  // namespace

int scenario_lossy_loss_sweep(const ScenarioOptions& opt, Reporter& rep) {
  PairRun base = base_run(opt, 32ull << 20, 256u << 10, 16);
  base.read = opt.param_str("op", "write") == "read";
  const uint16_t lanes = static_cast<uint16_t>(opt.param_u64("lanes", 16));
  std::vector<double> losses_pct;
  for (const auto& s : parse_list(opt.param_str("loss_pct_x100", "0,1,10,100,500")))
    losses_pct.push_back(static_cast<double>(s) / 100.0);
  rep.event("start", {{"scenario", "loss-sweep"},
                      {"op", base.read ? "read" : "write"},
                      {"seed", opt.seed},
                      {"bytes", base.bytes},
                      {"msg", base.msg},
                      {"window", base.window},
                      {"spines", base.spines},
                      {"lanes", lanes},
                      {"loss_pct", losses_pct}});
  Json table = Json::array();
  bool ok = true;
  // goodput[mode][loss index]
  std::vector<std::vector<double>> goodput(3);
  for (size_t li = 0; li < losses_pct.size(); ++li) {
    for (Mode m : {Mode::kGbn, Mode::kSr, Mode::kLanes}) {
      PairRun run = base;
      run.loss = losses_pct[li] / 100.0;
      set_mode(run, m, lanes);
      const PairResult r = run_pair(run);
      ok = ok && r.data_ok;
      goodput[static_cast<size_t>(m)].push_back(r.goodput_gbps);
      Json row = {{"loss_pct", losses_pct[li]}};
      row.update(row_json(r, m));
      if (!r.data_ok) row["error"] = r.why;
      rep.event("run", row);
      table.push_back(row);
    }
  }
  // Goodput at loss L over goodput at the first loss of the list (0 %).
  auto ratio_at = [&](Mode m, double pct) {
    const auto& g = goodput[static_cast<size_t>(m)];
    for (size_t li = 0; li < losses_pct.size(); ++li)
      if (std::fabs(losses_pct[li] - pct) < 1e-9 && g[0] > 0) return g[li] / g[0];
    return -1.0;
  };
  Json ratios = Json::array();
  for (size_t li = 0; li < losses_pct.size(); ++li)
    ratios.push_back({{"loss_pct", losses_pct[li]},
                      {"gbn", ratio_at(Mode::kGbn, losses_pct[li])},
                      {"sr", ratio_at(Mode::kSr, losses_pct[li])},
                      {"lanes", ratio_at(Mode::kLanes, losses_pct[li])}});
  rep.summary({{"scenario", "loss-sweep"},
               {"op", base.read ? "read" : "write"},
               {"ok", ok},
               {"seed", opt.seed},
               {"bytes", base.bytes},
               {"lanes", lanes},
               {"goodput_ratio_gbn_1pct", ratio_at(Mode::kGbn, 1.0)},
               {"goodput_ratio_sr_1pct", ratio_at(Mode::kSr, 1.0)},
               {"goodput_ratio_lanes_1pct", ratio_at(Mode::kLanes, 1.0)},
               {"ratios", ratios},
               {"table", table}});
  return ok ? 0 : 1;
}

int scenario_lossy_reorder_only(const ScenarioOptions& opt, Reporter& rep) {
  PairRun base = base_run(opt, 16ull << 20, 256u << 10, 16);
  const uint16_t lanes = static_cast<uint16_t>(opt.param_u64("lanes", 16));
  // Four paths of 1, 2, 4 and 8 us per link: a packet on spine 3 arrives
  // 14 us (about 170 KB at 100 Gbit/s) after one sent with it on spine 0.
  base.spine_delay_ns = parse_list(opt.param_str("spine_delay_ns", "1000,2000,4000,8000"));
  base.spines = static_cast<uint32_t>(base.spine_delay_ns.size());
  rep.event("start", {{"scenario", "reorder-only"},
                      {"seed", opt.seed},
                      {"bytes", base.bytes},
                      {"spine_delay_ns", base.spine_delay_ns},
                      {"lanes", lanes}});
  Json runs = Json::object();
  PairResult res[2];
  const Mode modes[2] = {Mode::kLanes, Mode::kNaive};
  for (int i = 0; i < 2; ++i) {
    PairRun run = base;
    set_mode(run, modes[i], lanes);
    res[i] = run_pair(run);
    Json row = row_json(res[i], modes[i]);
    if (!res[i].data_ok) row["error"] = res[i].why;
    row["per_lane"] = lanes_json(res[i]);
    rep.event("run", row);
    runs[mode_name(modes[i])] = row;
  }
  // No frame is lost, so every retransmission is spurious: the sender's own
  // count (echoed by the receiver) and the total must agree.
  auto all_retx = [](const PairResult& r) {
    return r.client.retransmits;  // includes the selective ones
  };
  const bool ok = res[0].data_ok && res[1].data_ok && res[0].frames_lost == 0 &&
                  res[1].frames_lost == 0;
  rep.summary({{"scenario", "reorder-only"},
               {"ok", ok},
               {"seed", opt.seed},
               {"spurious_retx_lanes", res[0].client.spurious_retransmits},
               {"spurious_retx_naive", res[1].client.spurious_retransmits},
               {"retx_total_lanes", all_retx(res[0])},
               {"retx_total_naive", all_retx(res[1])},
               {"goodput_gbps_lanes", res[0].goodput_gbps},
               {"goodput_gbps_naive", res[1].goodput_gbps},
               {"max_reorder_depth", res[0].server.max_reorder_depth},
               {"frames_lost", res[0].frames_lost + res[1].frames_lost},
               {"runs", runs}});
  return ok ? 0 : 1;
}

int scenario_lossy_path_failure(const ScenarioOptions& opt, Reporter& rep) {
  PairRun base = base_run(opt, 64ull << 20, 64u << 10, 32);
  const uint16_t lanes = static_cast<uint16_t>(opt.param_u64("lanes", 16));
  set_mode(base, Mode::kLanes, lanes);
  // Default: a third of the way through the lossless transfer time.
  const double ideal_us = static_cast<double>(base.bytes) * 8 / static_cast<double>(base.rate_bps) * 1e6;
  const uint64_t at_us = opt.param_u64("blackhole_us", static_cast<uint64_t>(ideal_us / 3));
  rep.event("start", {{"scenario", "path-failure"},
                      {"seed", opt.seed},
                      {"bytes", base.bytes},
                      {"lanes", lanes},
                      {"spines", base.spines},
                      {"blackhole_us", at_us}});
  // The same transfer without the failure: the reference goodput.
  const PairResult ref = run_pair(base);
  PairRun run = base;
  run.blackhole_spine = static_cast<int>(opt.param_u64("blackhole_spine", 1) % base.spines);
  run.blackhole_at = Duration::micros(static_cast<int64_t>(at_us));
  const PairResult r = run_pair(run);

  const double bin_us = to_us(run.sample);
  const size_t dead_bin = static_cast<size_t>(static_cast<double>(at_us) / bin_us);
  double before = 0, dip = -1, after = 0;
  size_t nb = 0, na = 0;
  // Bins wholly before the blackhole (skipping the first: slow start of the
  // window); the worst bin after it; the mean once its lanes are retired.
  const size_t healed_bin =
      r.retire_us < 0 ? r.rx_gbps.size()
                      : static_cast<size_t>((static_cast<double>(at_us) + r.retire_us) / bin_us) + 1;
  for (size_t i = 0; i + 1 < r.rx_gbps.size(); ++i) {  // the last bin is partial
    const double g = r.rx_gbps[i];
    if (i >= 1 && i < dead_bin) {
      before += g;
      ++nb;
    } else if (i >= dead_bin) {
      dip = dip < 0 ? g : std::min(dip, g);
      if (i > healed_bin) {
        after += g;
        ++na;
      }
    }
  }
  before = nb ? before / static_cast<double>(nb) : 0;
  after = na ? after / static_cast<double>(na) : 0;
  const uint64_t messages = (run.bytes + run.msg - 1) / run.msg;
  const uint64_t lost_wrs = messages - std::min(messages, r.wrs_ok);
  const bool ok = r.data_ok && ref.data_ok && lost_wrs == 0;
  Json sum = {{"scenario", "path-failure"},
              {"ok", ok},
              {"seed", opt.seed},
              {"detect_us", r.retire_us},
              {"first_lane_retired_us", r.first_retire_us},
              {"lost_wrs", lost_wrs},
              {"wr_errors", r.wr_errors},
              {"data_verified", r.data_ok},
              {"blackhole_us", at_us},
              {"blackhole_spine", run.blackhole_spine},
              {"lanes_dead_path", r.lanes_dead_path},
              {"lanes_retired", lanes_retired(r)},
              {"lanes_retired_wrongly", r.lanes_retired_wrongly},
              {"goodput_gbps", r.goodput_gbps},
              {"goodput_gbps_nofailure", ref.goodput_gbps},
              {"rx_gbps_before", before},
              {"rx_gbps_dip", dip},
              {"rx_gbps_after", after},
              {"timeouts", r.client.timeouts},
              {"selective_retransmits", r.client.selective_retransmits},
              {"spurious_retransmits", r.client.spurious_retransmits},
              {"bin_us", bin_us},
              {"rx_gbps_timeline", r.rx_gbps},
              {"dead_lanes_active_timeline", r.dead_lanes_active},
              {"per_lane", lanes_json(r)}};
  if (!r.data_ok) sum["error"] = r.why;
  rep.summary(sum);
  return ok ? 0 : 1;
}

namespace {

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = static_cast<size_t>(std::ceil(p * static_cast<double>(v.size()))) - 1;
  return v[std::min(i, v.size() - 1)];
}

}  // namespace

// Lane weights (docs/lossy.md): four spines, one of them at a fraction of
// the rate (a path with a persistent bottleneck), ECN marking on every link.
// The same transfer with equal spraying (lane_weights off: round robin, the
// slow path's lanes retire only if they lose) and with weighted spraying.
int scenario_lossy_lane_weights(const ScenarioOptions& opt, Reporter& rep) {
  PairRun base = base_run(opt, 32ull << 20, 64u << 10, 32);
  const uint16_t lanes = static_cast<uint16_t>(opt.param_u64("lanes", 16));
  set_mode(base, Mode::kLanes, lanes);
  const uint32_t slow = static_cast<uint32_t>(opt.param_u64("slow_spine", 1) % base.spines);
  const uint64_t slow_gbps = opt.param_u64("slow_gbps", 10);
  base.spine_rate_bps.assign(base.spines, 0);
  base.spine_rate_bps[slow] = slow_gbps * 1'000'000'000ull;
  base.ecn_bytes = opt.param_u64("ecn_kb", 64) * 1000;
  rep.event("start", {{"scenario", "lane-weights"},
                      {"seed", opt.seed},
                      {"bytes", base.bytes},
                      {"lanes", lanes},
                      {"spines", base.spines},
                      {"slow_spine", slow},
                      {"slow_gbps", slow_gbps},
                      {"ecn_bytes", base.ecn_bytes}});
  PairResult res[2];
  Json runs = Json::object();
  const char* names[2] = {"equal", "weighted"};
  double slow_share[2] = {0, 0};
  for (int i = 0; i < 2; ++i) {
    PairRun run = base;
    run.lossy.lane_weights = i == 1;
    res[i] = run_pair(run);
    const PairResult& r = res[i];
    uint64_t all = 0, on_slow = 0;
    for (size_t k = 0; k < r.lanes.size(); ++k) {
      all += r.lanes[k].tx_packets;
      if (r.lane_spine[k] == static_cast<int>(slow)) on_slow += r.lanes[k].tx_packets;
    }
    slow_share[i] = all ? static_cast<double>(on_slow) / static_cast<double>(all) : 0;
    Json row = row_json(r, Mode::kLanes);
    row["lane_weights"] = i == 1;
    row["p50_fct_us"] = percentile(r.wr_fct_us, 0.50);
    row["p99_fct_us"] = percentile(r.wr_fct_us, 0.99);
    row["slow_share"] = slow_share[i];
    row["slow_max_queue_kb"] = static_cast<double>(r.spine_max_queue[slow]) / 1000;
    row["spine_max_queue_kb"] = Json::array();
    for (uint64_t q : r.spine_max_queue) row["spine_max_queue_kb"].push_back(static_cast<double>(q) / 1000);
    row["ce_marked"] = r.ce_marked;
    row["per_lane"] = lanes_json(r);
    if (!r.data_ok) row["error"] = r.why;
    rep.event("run", row);
    runs[names[i]] = row;
  }
  const bool ok = res[0].data_ok && res[1].data_ok;
  uint64_t slow_lanes = 0;
  for (int s : res[1].lane_spine) slow_lanes += s == static_cast<int>(slow) ? 1 : 0;
  rep.summary({{"scenario", "lane-weights"},
               {"ok", ok},
               {"seed", opt.seed},
               {"slow_spine", slow},
               {"slow_gbps", slow_gbps},
               {"lanes_on_slow", slow_lanes},
               {"goodput_gbps_equal", res[0].goodput_gbps},
               {"goodput_gbps_weighted", res[1].goodput_gbps},
               {"goodput_ratio_weighted", res[0].goodput_gbps > 0
                                              ? res[1].goodput_gbps / res[0].goodput_gbps
                                              : 0},
               {"p99_fct_us_equal", percentile(res[0].wr_fct_us, 0.99)},
               {"p99_fct_us_weighted", percentile(res[1].wr_fct_us, 0.99)},
               {"slow_share_equal", slow_share[0]},
               {"slow_share_weighted", slow_share[1]},
               {"slow_max_queue_kb_equal", static_cast<double>(res[0].spine_max_queue[slow]) / 1000},
               {"slow_max_queue_kb_weighted", static_cast<double>(res[1].spine_max_queue[slow]) / 1000},
               {"spurious_retx_equal", res[0].client.spurious_retransmits},
               {"spurious_retx_weighted", res[1].client.spurious_retransmits},
               {"retx_equal", res[0].client.retransmits},
               {"retx_weighted", res[1].client.retransmits},
               {"lanes_retired_equal", lanes_retired(res[0])},
               {"lanes_retired_weighted", lanes_retired(res[1])},
               {"runs", runs}});
  return ok ? 0 : 1;
}

}  // namespace sroce::sim
