// The one-switch lab model (lab_model.h). Discrete events in one heap
// ordered by (time, insertion sequence), so equal-time events run in the
// order they were scheduled and runs are reproducible.
#include "lab_model.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <memory>
#include <queue>

namespace sroce::cc::lab {

namespace {

enum class Ev : uint8_t { kStart, kNicDone, kFlowReady, kArriveSwitch, kPortDone, kArriveRecv, kAck, kCnp, kTimer, kNpTimer };

struct Event {
  Time t;
  uint64_t seq;
  Ev type;
  int32_t a;
  bool operator>(const Event& o) const { return t != o.t ? t > o.t : seq > o.seq; }
};

struct Packet {
  int flow = 0;
  uint32_t bytes = 0;
  Time sent;
  bool ce = false;
  IntHop hop;
};

struct Flow {
  LabFlowSpec spec;
  std::unique_ptr<CongestionControl> cc;
  Pacer pacer;
  DcqcnNotificationPoint np{Duration::micros(4)};
  uint64_t sent = 0;
  uint64_t acked = 0;
  uint64_t inflight = 0;
  bool started = false;
  bool done = false;
  Time timer_at = Time::never();
  Time ready_at = Time::never();
  Time np_timer_at = Time::never();
};

struct Host {
  std::unique_ptr<NicState> nic;
  std::vector<int> flows;
  size_t rr = 0;
  bool busy = false;
};

struct Port {
  std::deque<int> q;
  uint64_t qlen = 0;      // wire bytes waiting (including the one in service)
  uint64_t tx_bytes = 0;  // cumulative wire bytes sent
  bool busy = false;
};

// splitmix64: a tiny deterministic generator for RED.
struct Rng {
  uint64_t s;
  double next() {
    uint64_t z = (s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return static_cast<double>(z >> 11) * 0x1.0p-53;
  }
};

class Model {
 public:
  Model(const LabConfig& cfg, std::span<const LabFlowSpec> specs) : cfg_(cfg), rng_{cfg.seed} {
    hosts_.resize(cfg.hosts);
    for (Host& h : hosts_) h.nic = std::make_unique<NicState>(cfg.host_rate_bps);
    ports_.resize(cfg.ports);
    const Duration ser_host = tx_time(cfg.mtu + cfg.overhead, static_cast<double>(cfg.host_rate_bps));
    const Duration ser_port = tx_time(cfg.mtu + cfg.overhead, static_cast<double>(cfg.port_rate_bps));
    base_rtt_ = cfg.link_delay * 4 + ser_host + ser_port;
    max_jitter_ = ser_host - Duration::picos(1);
    const FlowParams fp{cfg.host_rate_bps, base_rtt_, cfg.mtu};
    const size_t nbins = static_cast<size_t>(cfg.end.ps / cfg.bin.ps) + 1;
    res_.base_rtt = base_rtt_;
    res_.port_bins.assign(cfg.ports, std::vector<uint64_t>(nbins, 0));
    flows_.resize(specs.size());
    res_.flows.resize(specs.size());
    for (size_t i = 0; i < specs.size(); ++i) {
      Flow& f = flows_[i];
      f.spec = specs[i];
      f.cc = std::make_unique<CongestionControl>(cfg.cc, fp, hosts_[f.spec.src].nic.get());
      f.np = DcqcnNotificationPoint(cfg.cc.dcqcn);
      hosts_[f.spec.src].flows.push_back(static_cast<int>(i));
      LabFlowResult& fr = res_.flows[i];
      fr.spec = specs[i];
      fr.bins.assign(nbins, 0);
      if (f.spec.bytes > 0)
        fr.ideal = base_rtt_ + tx_time(static_cast<double>(f.spec.bytes), static_cast<double>(cfg.host_rate_bps));
      push(f.spec.start, Ev::kStart, static_cast<int32_t>(i));
    }
  }

  LabResult run() {
    while (!heap_.empty()) {
      const Event e = heap_.top();
      if (e.t > cfg_.end) break;
      heap_.pop();
      ++res_.events;
      dispatch(e);
    }
    for (size_t i = 0; i < flows_.size(); ++i) flows_[i].cc->on_idle(cfg_.end);
    if (paused_) res_.paused = res_.paused + (cfg_.end - pause_start_);
    return std::move(res_);
  }

 private:
  void push(Time t, Ev type, int32_t a) { heap_.push(Event{t, seq_++, type, a}); }

  size_t bin_of(Time t) const {
    return std::min(static_cast<size_t>(t.ps / cfg_.bin.ps), res_.port_bins[0].size() - 1);
  }

  void dispatch(const Event& e) {
    switch (e.type) {
      case Ev::kStart: {
        flows_[e.a].started = true;
        kick(flows_[e.a].spec.src, e.t);
        break;
      }
      case Ev::kNicDone:
        hosts_[e.a].busy = false;
        kick(e.a, e.t);
        break;
      case Ev::kFlowReady: {
        Flow& f = flows_[e.a];
        if (f.ready_at != e.t) break;  // superseded
        f.ready_at = Time::never();
        kick(f.spec.src, e.t);
        break;
      }
      case Ev::kArriveSwitch: arrive_switch(e.a, e.t); break;
      case Ev::kPortDone: port_done(e.a, e.t); break;
      case Ev::kArriveRecv: arrive_recv(e.a, e.t); break;
      case Ev::kAck: ack(e.a, e.t); break;
      case Ev::kCnp: {
        Flow& f = flows_[e.a];
        f.cc->on_cnp(e.t);
        rearm(e.a);
        kick(f.spec.src, e.t);
        break;
      }
      case Ev::kNpTimer: {
        Flow& f = flows_[e.a];
        if (f.np_timer_at != e.t) break;
        f.np_timer_at = Time::never();
        if (f.np.on_timer(e.t)) {
          ++res_.cnps;
          push(e.t + cfg_.link_delay * 2, Ev::kCnp, e.a);
        }
        break;
      }
      case Ev::kTimer: {
        Flow& f = flows_[e.a];
        if (f.timer_at != e.t) break;  // superseded
        f.timer_at = Time::never();
        f.cc->on_timer(e.t);
        rearm(e.a);
        kick(f.spec.src, e.t);
        break;
      }
    }
  }

  // Arms the flow's controller timer if it moved.
  void rearm(int fi) {
    Flow& f = flows_[fi];
    const Time t = f.cc->next_timer();
    if (t != Time::never() && t != f.timer_at) {
      f.timer_at = t;
      push(t, Ev::kTimer, fi);
    }
  }

  uint32_t next_bytes(const Flow& f) const {
    if (f.spec.bytes == 0) return cfg_.mtu;
    return static_cast<uint32_t>(std::min<uint64_t>(cfg_.mtu, f.spec.bytes - f.sent));
  }

  // The host's NIC is free: send one packet of the next flow allowed to send.
  void kick(int hi, Time now) {
    Host& h = hosts_[hi];
    if (h.busy || paused_) return;
    const size_t n = h.flows.size();
    for (size_t k = 0; k < n; ++k) {
      const size_t idx = (h.rr + k) % n;
      Flow& f = flows_[h.flows[idx]];
      if (!f.started || f.done || (f.spec.bytes > 0 && f.sent >= f.spec.bytes)) continue;
      const uint32_t bytes = next_bytes(f);
      const uint64_t win = f.cc->window_bytes();
      // A window below one packet still allows one packet in flight; the
      // pacing rate then spaces them (docs/cc/README.md, "Integration").
      if (f.inflight > 0 && f.inflight + bytes > win) continue;
      const Time at = f.pacer.next_send(now, std::max<uint64_t>(1, f.cc->rate_bps()));
      if (at > now) {
        if (at < f.ready_at) {
          f.ready_at = at;
          push(at, Ev::kFlowReady, h.flows[idx]);
        }
        continue;
      }
      send(h.flows[idx], bytes, now);
      h.rr = idx + 1;
      return;
    }
  }

  void send(int fi, uint32_t bytes, Time now) {
    Flow& f = flows_[fi];
    Host& h = hosts_[f.spec.src];
    const uint32_t wire = bytes + cfg_.overhead;
    const Duration ser = tx_time(wire, static_cast<double>(cfg_.host_rate_bps));
    int pi;
    if (free_.empty()) {
      pi = static_cast<int>(pkts_.size());
      pkts_.emplace_back();
    } else {
      pi = free_.back();
      free_.pop_back();
    }
    Packet& p = pkts_[pi];
    p = Packet{};
    p.flow = fi;
    p.bytes = bytes;
    p.sent = now;
    f.sent += bytes;
    f.inflight += bytes;
    f.cc->on_send(SendEvent{now, bytes, false});
    f.pacer.on_sent(now, wire);
    rearm(fi);
    h.busy = true;
    push(now + ser, Ev::kNicDone, f.spec.src);
    Duration jitter;
    if (cfg_.jitter) jitter = Duration::picos(static_cast<int64_t>(rng_.next() * static_cast<double>(max_jitter_.ps)));
    push(now + ser + cfg_.link_delay + jitter, Ev::kArriveSwitch, pi);
  }

  void arrive_switch(int pi, Time now) {
    Packet& p = pkts_[pi];
    const int port = flows_[p.flow].spec.dst;
    Port& q = ports_[port];
    const uint32_t wire = p.bytes + cfg_.overhead;
    const bool below = pool_ <= cfg_.xoff_bytes;
    q.q.push_back(pi);
    q.qlen += wire;
    pool_ += wire;
    if (below && pool_ > cfg_.xoff_bytes) {
      ++res_.xoff_crossings;
      if (cfg_.pfc) {
        paused_ = true;
        pause_start_ = now;
      }
    }
    res_.max_pool = std::max(res_.max_pool, pool_);
    res_.queue_samples.push_back(static_cast<uint32_t>(q.qlen));
    res_.pool_samples.push_back(static_cast<uint32_t>(pool_));
    if (!q.busy) start_port(port, now);
  }

  void start_port(int port, Time now) {
    Port& q = ports_[port];
    const Packet& p = pkts_[q.q.front()];
    q.busy = true;
    push(now + tx_time(p.bytes + cfg_.overhead, static_cast<double>(cfg_.port_rate_bps)), Ev::kPortDone, port);
  }

  void port_done(int port, Time now) {
    Port& q = ports_[port];
    const int pi = q.q.front();
    q.q.pop_front();
    Packet& p = pkts_[pi];
    const uint32_t wire = p.bytes + cfg_.overhead;
    q.qlen -= wire;
    pool_ -= wire;
    q.tx_bytes += wire;
    res_.port_bins[port][bin_of(now)] += wire;
    // RED on the egress queue as the packet leaves it (mark on dequeue, like
    // the HPCC ns-3 switch): marks describe the queue now, not the one the
    // packet joined, so a draining queue stops marking at once.
    if (cfg_.ecn && q.qlen > cfg_.kmin) {
      double prob = 1.0;
      if (q.qlen <= cfg_.kmax)
        prob = cfg_.pmax * static_cast<double>(q.qlen - cfg_.kmin) / static_cast<double>(cfg_.kmax - cfg_.kmin);
      if (rng_.next() < prob) {
        p.ce = true;
        ++res_.marks;
      }
    }
    // INT stamped as the packet leaves the egress port (HPCC, section 3.2).
    p.hop.port_id = static_cast<uint32_t>(port) + 1;
    p.hop.ts = now;
    p.hop.tx_bytes = q.tx_bytes;
    p.hop.qlen_bytes = static_cast<uint32_t>(q.qlen);
    p.hop.link_bps = cfg_.port_rate_bps;
    p.hop.buffer_flag = pool_ > cfg_.flag_bytes;
    q.busy = false;
    push(now + cfg_.link_delay, Ev::kArriveRecv, pi);
    if (!q.q.empty()) start_port(port, now);
    if (paused_ && pool_ + 2 * (cfg_.mtu + cfg_.overhead) <= cfg_.xoff_bytes) {
      paused_ = false;
      res_.paused = res_.paused + (now - pause_start_);
      for (int h = 0; h < cfg_.hosts; ++h) kick(h, now);
    }
  }

  void arrive_recv(int pi, Time now) {
    Packet& p = pkts_[pi];
    Flow& f = flows_[p.flow];
    LabFlowResult& fr = res_.flows[p.flow];
    fr.delivered += p.bytes;
    fr.bins[bin_of(now)] += p.bytes;
    // The notification point runs for DCQCN flows only (the others ignore CNPs).
    if (p.ce && cfg_.cc.algorithm == Algorithm::kDcqcn) {
      if (f.np.on_marked_packet(now)) {
        ++res_.cnps;
        push(now + cfg_.link_delay * 2, Ev::kCnp, p.flow);
      } else if (f.np.next_timer() != Time::never() && f.np_timer_at != f.np.next_timer()) {
        f.np_timer_at = f.np.next_timer();
        push(f.np_timer_at, Ev::kNpTimer, p.flow);
      }
    }
    push(now + cfg_.link_delay * 2, Ev::kAck, pi);
  }

  void ack(int pi, Time now) {
    const Packet p = pkts_[pi];
    free_.push_back(pi);
    Flow& f = flows_[p.flow];
    f.inflight -= p.bytes;
    f.acked += p.bytes;
    AckEvent ev;
    ev.now = now;
    ev.acked_bytes = p.bytes;
    ev.rtt = now - p.sent;
    ev.ecn_echo = p.ce;
    if (cfg_.int_enabled) ev.hops = std::span<const IntHop>(&p.hop, 1);
    ev.path_hops = 1;
    f.cc->on_ack(ev);
    if (f.spec.bytes > 0 && f.acked >= f.spec.bytes && !f.done) {
      f.done = true;
      res_.flows[p.flow].finish = now;
      f.cc->on_idle(now);
    }
    rearm(p.flow);
    kick(f.spec.src, now);
  }

  LabConfig cfg_;
  Rng rng_;
  Duration base_rtt_;
  Duration max_jitter_;
  std::vector<Host> hosts_;
  std::vector<Port> ports_;
  std::vector<Flow> flows_;
  std::vector<Packet> pkts_;
  std::vector<int> free_;
  uint64_t pool_ = 0;
  bool paused_ = false;
  Time pause_start_;
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> heap_;
  uint64_t seq_ = 0;
  LabResult res_;
};

size_t bin_index(const LabConfig& cfg, Time t) { return static_cast<size_t>(t.ps / cfg.bin.ps); }

}  // namespace

LabResult run_lab(const LabConfig& cfg, std::span<const LabFlowSpec> flows) {
  Model m(cfg, flows);
  return m.run();
}

uint64_t percentile(std::vector<uint32_t> samples, double p) {
  if (samples.empty()) return 0;
  const size_t k = std::min(samples.size() - 1,
                            static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(samples.size()))) -
                                (p > 0 ? 1 : 0));
  std::nth_element(samples.begin(), samples.begin() + static_cast<std::ptrdiff_t>(k), samples.end());
  return samples[k];
}

double flow_rate(const LabResult& r, const LabConfig& cfg, int flow, Time from, Time to) {
  const auto& bins = r.flows[flow].bins;
  const size_t a = bin_index(cfg, from);
  const size_t b = std::min(bin_index(cfg, to), bins.size());
  if (b <= a) return 0;
  uint64_t sum = 0;
  for (size_t i = a; i < b; ++i) sum += bins[i];
  return rate_of(static_cast<double>(sum), cfg.bin * static_cast<int64_t>(b - a));
}

double jain(const LabResult& r, const LabConfig& cfg, Time from, Time to, std::span<const int> ids) {
  std::vector<int> all;
  if (ids.empty()) {
    for (size_t i = 0; i < r.flows.size(); ++i) all.push_back(static_cast<int>(i));
    ids = all;
  }
  double s = 0, s2 = 0;
  for (int i : ids) {
    const double x = flow_rate(r, cfg, i, from, to);
    s += x;
    s2 += x * x;
  }
  if (s2 <= 0) return 0;
  return s * s / (static_cast<double>(ids.size()) * s2);
}

double utilisation(const LabResult& r, const LabConfig& cfg, int port, Time from, Time to) {
  const auto& bins = r.port_bins[port];
  const size_t a = bin_index(cfg, from);
  const size_t b = std::min(bin_index(cfg, to), bins.size());
  if (b <= a) return 0;
  uint64_t sum = 0;
  for (size_t i = a; i < b; ++i) sum += bins[i];
  const double cap = bytes_in(static_cast<double>(cfg.port_rate_bps), cfg.bin * static_cast<int64_t>(b - a));
  return static_cast<double>(sum) / cap;
}

Duration convergence_time(const LabResult& r, const LabConfig& cfg, std::span<const int> ids,
                          double capacity_bps, Time from, Duration window, double min_jain,
                          double min_util) {
  auto good = [&](Time t) {
    double total = 0;
    for (int i : ids) total += flow_rate(r, cfg, i, t, t + window);
    return total >= min_util * capacity_bps && jain(r, cfg, t, t + window, ids) >= min_jain;
  };
  // Slide one bin at a time, from the last full window back towards `from`.
  const Time last = cfg.end - window;
  if (last < from || !good(last)) return Duration::picos(-1);
  Time t = last;
  while (t - cfg.bin >= from && good(t - cfg.bin)) t = t - cfg.bin;
  return t - from;
}

std::vector<LabFlowSpec> alltoall_flows(int hosts, uint64_t bytes, double skew, Duration spread,
                                        uint64_t seed) {
  std::vector<LabFlowSpec> specs;
  Rng rng{seed};
  for (int s = 0; s < hosts; ++s) {
    const Time start = Time::zero() + Duration::picos(static_cast<int64_t>(rng.next() * static_cast<double>(spread.ps)));
    for (int i = 1; i < hosts; ++i) {
      const int d = (s + i) % hosts;
      const double k = d == 0 ? skew : 1.0;
      specs.push_back(LabFlowSpec{s, d, start, static_cast<uint64_t>(static_cast<double>(bytes) * k)});
    }
  }
  return specs;
}

FctStats fct_stats(const LabResult& r) {
  FctStats st;
  std::vector<double> slow;
  for (const auto& f : r.flows) {
    if (f.spec.bytes == 0) continue;
    if (f.finish == Time::never()) {
      ++st.unfinished;
      continue;
    }
    ++st.finished;
    st.last_finish = std::max(st.last_finish, f.finish);
    slow.push_back(static_cast<double>((f.finish - f.spec.start).ps) / static_cast<double>(f.ideal.ps));
  }
  std::sort(slow.begin(), slow.end());
  auto pct = [&](double p) {
    if (slow.empty()) return 0.0;
    const size_t k = std::min(slow.size() - 1, static_cast<size_t>(p / 100.0 * static_cast<double>(slow.size())));
    return slow[k];
  };
  st.p50_slowdown = pct(50);
  st.p99_slowdown = pct(99);
  return st;
}

}  // namespace sroce::cc::lab
