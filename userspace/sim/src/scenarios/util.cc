#include "util.h"

#include <cerrno>
#include <cstring>

namespace sroce::sim {

std::unique_ptr<PcapWriter> attach_pcap(Network& net, const ScenarioOptions& opt, Reporter& rep,
                                        bool* failed) {
  *failed = false;
  if (opt.pcap.empty()) return nullptr;
  auto w = std::make_unique<PcapWriter>();
  if (!w->open(opt.pcap)) {
    rep.error("cannot open pcap file " + opt.pcap + ": " + std::strerror(errno));
    *failed = true;
    return nullptr;
  }
  w->set_edge_only(opt.pcap_edge_only);
  net.set_tap(w.get());
  return w;
}

Json to_json(const LinkStats& s) {
  return Json{{"tx_frames", s.tx_frames},     {"delivered", s.delivered},
              {"queue_drops", s.queue_drops}, {"lost_random", s.lost_random},
              {"lost_burst", s.lost_burst},   {"lost_down", s.lost_down},
              {"lost_forced", s.lost_forced}, {"corrupted", s.corrupted},
              {"duplicated", s.duplicated},   {"reordered", s.reordered},
              {"ecn_marked", s.ecn_marked},   {"max_queue_bytes", s.max_queue_bytes}};
}

Json to_json(const EngineStats& s) {
  return Json{{"rx_packets", s.rx_packets},       {"rx_dropped", s.rx_dropped},
              {"rx_bad_icrc", s.rx_bad_icrc},     {"rx_unknown_qp", s.rx_unknown_qp},
              {"tx_packets", s.tx_packets},       {"retransmits", s.retransmits},
              {"naks_sent", s.naks_sent},         {"naks_received", s.naks_received},
              {"rnr_naks_sent", s.rnr_naks_sent}, {"rnr_naks_received", s.rnr_naks_received},
              {"timeouts", s.timeouts},           {"duplicates", s.duplicates}};
}

Json to_json(const HostStats& s) {
  return Json{{"rx_frames", s.rx_frames},
              {"rx_corrupted", s.rx_corrupted},
              {"rx_duplicates", s.rx_duplicates},
              {"tx_frames", s.tx_frames},
              {"tx_dropped", s.tx_dropped},
              {"paced", s.paced},
              {"completions", s.completions},
              {"async_events", s.async_events},
              {"stalls", s.stalls}};
}

Mtu mtu_of(uint64_t bytes) {
  switch (bytes) {
    case 256:
      return Mtu::k256;
    case 512:
      return Mtu::k512;
    case 1024:
      return Mtu::k1024;
    case 2048:
      return Mtu::k2048;
    default:
      return Mtu::k4096;
  }
}

double to_us(Time t) { return static_cast<double>(t.ps) / 1e6; }
double to_us(Duration d) { return static_cast<double>(d.ps) / 1e6; }

EngineStats operator+(const EngineStats& a, const EngineStats& b) {
  EngineStats s;
  s.rx_packets = a.rx_packets + b.rx_packets;
  s.rx_dropped = a.rx_dropped + b.rx_dropped;
  s.rx_bad_icrc = a.rx_bad_icrc + b.rx_bad_icrc;
  s.rx_unknown_qp = a.rx_unknown_qp + b.rx_unknown_qp;
  s.tx_packets = a.tx_packets + b.tx_packets;
  s.retransmits = a.retransmits + b.retransmits;
  s.naks_sent = a.naks_sent + b.naks_sent;
  s.naks_received = a.naks_received + b.naks_received;
  s.rnr_naks_sent = a.rnr_naks_sent + b.rnr_naks_sent;
  s.rnr_naks_received = a.rnr_naks_received + b.rnr_naks_received;
  s.timeouts = a.timeouts + b.timeouts;
  s.duplicates = a.duplicates + b.duplicates;
  return s;
}

}  // namespace sroce::sim
