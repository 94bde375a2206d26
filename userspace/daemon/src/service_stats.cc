// JSON views of the service for SROCE_OP_STATS (`sroce status|qps`).
#include <unistd.h>

#include <array>

#include <nlohmann/json.hpp>

#include "service.h"

namespace sroce::daemon {

namespace {
const char* qp_type_name(uint8_t t) {
  switch (t) {
    case 2: return "RC";
    case 3: return "UC";
    case 4: return "UD";
    default: return "?";
  }
}
}  // namespace

// docs/security.md, "The wire": a caller other than root (or the daemon's
// own uid) sees only its own contexts, their QPs and objects: no other
// user's QPNs, PSNs or pids.
bool Service::sees_all(uid_t viewer) const { return viewer == 0 || viewer == geteuid(); }

ObjectCounts Service::object_counts(uid_t viewer) const {
  const bool all = sees_all(viewer);
  ObjectCounts n;
  for (const auto& [id, c] : contexts_) {
    if (!all && (c->kernel || c->uid != viewer)) continue;
    n.pds += c->pds.size();
    n.mrs += c->mrs.size();
    n.cqs += c->cqs.size();
    n.qps += c->qps.size();
    n.srqs += c->srqs.size();
    n.ahs += c->ahs.size();
    n.channels += c->channels.size();
  }
  return n;
}

std::string Service::contexts_json(uid_t viewer) const {
  nlohmann::json a = nlohmann::json::array();
  const bool all = sees_all(viewer);
  for (const auto& [id, c] : contexts_) {
    if (c->refused || !c->hello) continue;  // a connection that only asks for stats is no context
    if (!all && (c->kernel || c->uid != viewer)) continue;
    a.push_back({{"id", id},
                 {"pid", c->pid},
                 {"uid", c->uid},
                 {"requests", c->requests},
                 {"garbage", c->garbage},
                 {"pds", c->pds.size()},
                 {"mrs", c->mrs.size()},
                 {"cqs", c->cqs.size()},
                 {"qps", c->qps.size()},
                 {"srqs", c->srqs.size()},
                 {"ahs", c->ahs.size()},
                 {"channels", c->channels.size()}});
  }
  return a.dump();
}

std::string Service::qps_json(uid_t viewer) const {
  nlohmann::json a = nlohmann::json::array();
  const bool all = sees_all(viewer);
  for (const auto& [id, c] : contexts_) {
    if (!all && (c->kernel || c->uid != viewer)) continue;
    for (const auto& [qpn, q] : c->qps) {
      nlohmann::json j = {{"context", id},
                          {"pid", c->pid},
                          {"qpn", qpn},
                          {"type", qp_type_name(q.qp_type)},
                          {"send_wqes", q.wqes_posted},
                          {"recv_wqes", q.recvs_posted},
                          {"async_events", q.events_reported}};
      auto attr = engine_.query_qp(qpn);
      if (attr) {
        j["state"] = to_string(attr->qp_state);
        j["dest_qpn"] = attr->dest_qp_num;
        j["path_mtu"] = mtu_bytes(attr->path_mtu);
        j["sq_psn"] = attr->sq_psn;
        j["rq_psn"] = attr->rq_psn;
      }
      if (auto st = engine_.qp_stats(qpn)) {
        j["tx_packets"] = st->tx_packets;
        j["tx_bytes"] = st->tx_bytes;
        j["rx_packets"] = st->rx_packets;
        j["rx_bytes"] = st->rx_bytes;
        j["rx_dropped"] = st->rx_dropped;
        j["retransmits"] = st->retransmits;
        j["timeouts"] = st->timeouts;
        j["acks_sent"] = st->acks_sent;
        j["acks_received"] = st->acks_received;
        j["naks_sent"] = st->naks_sent;
        j["naks_received"] = st->naks_received;
        j["rnr_naks_sent"] = st->rnr_naks_sent;
        j["rnr_naks_received"] = st->rnr_naks_received;
        j["duplicates"] = st->duplicates;
        j["send_wqes_completed"] = st->send_wqes_completed;
        j["recv_wqes_completed"] = st->recv_wqes_completed;
        // Lossy mode (docs/lossy.md): the mode this QP's requester runs in,
        // its SACK/selective-repeat counters and one object per lane.
        j["mode"] = to_string(st->mode);
        j["sacks_sent"] = st->sacks_sent;
        j["sacks_received"] = st->sacks_received;
        j["selective_retransmits"] = st->selective_retransmits;
        j["spurious_retransmits"] = st->spurious_retransmits;
        j["trims_received"] = st->trims_received;
        j["losses_detected"] = st->losses_detected;
        j["max_reorder_depth"] = st->max_reorder_depth;
        j["srtt_us"] = static_cast<double>(st->srtt_ps) / 1e6;
        // Congestion control ([engine.cc], docs/cc/README.md): 0 / absent
        // window when the QP runs no controller.
        j["cnps_sent"] = st->cnps_sent;
        j["cnps_received"] = st->cnps_received;
        j["cc_rate_bps"] = st->cc_rate_bps;
        j["cc_rate_min_bps"] = st->cc_rate_min_bps;
        if (st->cc_rate_bps != 0 && st->cc_window_bytes != UINT64_MAX) j["cc_window_bytes"] = st->cc_window_bytes;
        if (st->cc_algorithm >= 0) j["cc_algorithm"] = cc::to_string(static_cast<cc::Algorithm>(st->cc_algorithm));
        if (st->cc_algorithm == static_cast<int8_t>(cc::Algorithm::kLtp)) {
          // LTP (docs/cc/ltp.md): the filter's estimate and who decided the MIs.
          j["cc_est_bps"] = st->cc_est_bps;
          j["ltp_decisions"] = st->ltp_decisions;
          j["ltp_fallback_mis"] = st->ltp_fallback_mis;
          j["ltp_missing_mis"] = st->ltp_missing_mis;  // why the fallback decided
          j["ltp_divergences"] = st->ltp_divergences;
        }
        j["cc_window_stalls"] = st->cc_window_stalls;
        j["cc_paced"] = st->cc_paced;
        std::array<LaneStats, kMaxLanes> lanes;
        const size_t n = engine_.lane_stats(qpn, lanes);
        nlohmann::json la = nlohmann::json::array();
        for (size_t i = 0; i < n; ++i) {
          const LaneStats& l = lanes[i];
          la.push_back({{"sport", l.src_port},
                        {"active", l.active},
                        {"tx_packets", l.tx_packets},
                        {"retransmits", l.retransmits},
                        {"naks", l.naks},
                        {"losses_detected", l.losses_detected},
                        {"srtt_us", static_cast<double>(l.srtt_ps) / 1e6},
                        // Lane weights (docs/lossy.md): the share and how often it was cut.
                        {"weight", static_cast<double>(l.weight) / kLaneWeightFull},
                        {"weight_cuts", l.weight_cuts},
                        {"ce_echoed", l.ce_echoed}});
        }
        j["lanes"] = std::move(la);
      }
      a.push_back(std::move(j));
    }
  }
  return a.dump();
}

}  // namespace sroce::daemon
