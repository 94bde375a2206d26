#include "agent.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <deque>
#include <fstream>
#include <map>
#include <set>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "agent_metrics.h"
#include "tracer.h"
#include "ud_port.h"

namespace sroce::pingmesh {

namespace {

volatile std::sig_atomic_t g_stop = 0;
void on_signal(int) { g_stop = 1; }

uint64_t wall_ns() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

struct Target {
  std::string name, addr, kind;
  Gid gid{};
  uint32_t dst4 = 0;  // IPv4, network order; 0: not traceable
  unsigned max_ttl = 3;
  uint32_t qpn = 0;   // from the registry; 0: not known yet
};

struct Pair {
  size_t target = 0;
  uint16_t sport = 0;
  std::vector<std::string> hops;  // learnt hop per TTL (index ttl-1), "" unknown
};

struct Kind {
  double rate = 0;  // probes/s over all pairs of this kind
  double next_due = 0;
  std::vector<size_t> pairs;
  size_t rr = 0;
};

struct Slot {
  bool busy = false;
  uint64_t seq = 0;
  size_t pair = 0;
  uint64_t t1 = 0, t1_wall = 0, t2 = 0, t3 = 0, t4 = 0, t5 = 0, t6 = 0;
  bool have_t2 = false, have_ack1 = false, have_ack2 = false;
};

struct RSlot {
  bool busy = false;
  Gid peer{};
  uint32_t qpn = 0, label = 0;
  uint64_t seq = 0, t3 = 0;
};

struct TracePending {
  bool busy = false;
  size_t pair = 0;
  uint8_t ttl = 0;
  uint64_t sent = 0;
};

constexpr size_t kSlots = 4096;
constexpr size_t kRSlots = 1024;
constexpr size_t kMaxPairs = 4096;
constexpr uint64_t kTraceTimeoutNs = 1000000000ull;

class Agent {
 public:
  explicit Agent(const AgentOptions& o) : o_(o) {}
  int run();

 private:
  int load_pinglist();
  void add_pair(size_t target, uint16_t sport, const std::string& kind);
  size_t add_target(const nlohmann::json& t);
  void publish();
  void reload_registry();
  void reload_services();
  void send_probe(size_t pair, uint64_t now);
  void on_completion(const Completion& c, uint64_t now);
  void on_recv(const Completion& c, uint64_t now);
  void finish(Slot& s, const char* status);
  void expire(uint64_t now);
  void trace_step(uint64_t now);
  void on_hops(uint64_t now);
  void emit(const std::string& line);

  AgentOptions o_;
  nlohmann::json pl_;
  std::string host_, addr_;
  unsigned timeout_ms_ = 1000;
  double trace_rate_ = 0, trace_due_ = 0;
  size_t trace_rr_ = 0;
  std::vector<Target> targets_;
  std::vector<Pair> pairs_;
  std::map<std::string, Kind> kinds_;
  std::set<std::pair<std::string, uint16_t>> have_pair_;
  std::vector<Slot> slots_ = std::vector<Slot>(kSlots);
  std::vector<RSlot> rslots_ = std::vector<RSlot>(kRSlots);
  std::vector<TracePending> tp_ = std::vector<TracePending>(65536);
  std::deque<uint64_t> inflight_;
  std::deque<uint16_t> tinflight_;
  uint64_t seq_ = 1, rnext_ = 0;
  uint16_t tid_ = 1;
  UdPort port_;
  Tracer tracer_;
  Metrics metrics_;
  FILE* out_ = nullptr;
  std::string reg_file_;
};

void Agent::emit(const std::string& line) {
  std::fputs(line.c_str(), out_);
  std::fputc('\n', out_);
}

size_t Agent::add_target(const nlohmann::json& t) {
  Target x;
  x.name = t.value("name", t.value("addr", ""));
  x.addr = t.value("addr", "");
  x.kind = t.value("kind", "inter");
  x.max_ttl = std::clamp(t.value("max_ttl", 3u), 1u, 16u);
  parse_gid(x.addr, x.gid);
  in_addr a{};
  if (inet_pton(AF_INET, x.addr.c_str(), &a) == 1) x.dst4 = a.s_addr;
  for (size_t i = 0; i < targets_.size(); ++i)
    if (targets_[i].addr == x.addr) return i;
  targets_.push_back(x);
  return targets_.size() - 1;
}

void Agent::add_pair(size_t target, uint16_t sport, const std::string& kind) {
  if (pairs_.size() >= kMaxPairs || sport <= 0xc000) return;
  if (!have_pair_.insert({targets_[target].addr, sport}).second) return;
  Pair p;
  p.target = target;
  p.sport = sport;
  p.hops.assign(targets_[target].max_ttl, "");
  pairs_.push_back(p);
  kinds_[kind].pairs.push_back(pairs_.size() - 1);
}

int Agent::load_pinglist() {
  std::ifstream f(o_.pinglist);
  if (!f) {
    std::fprintf(stderr, "sroce pingmesh agent: cannot open pinglist %s\n", o_.pinglist.c_str());
    return 1;
  }
  pl_ = nlohmann::json::parse(f, nullptr, false);
  if (pl_.is_discarded() || !pl_.is_object() || !pl_.contains("addr") || !pl_.contains("targets")) {
    std::fprintf(stderr, "sroce pingmesh agent: %s is not a pinglist (JSON with \"addr\" and "
                 "\"targets\")\n", o_.pinglist.c_str());
    return 1;
  }
  host_ = pl_.value("host", "");
  addr_ = pl_["addr"].get<std::string>();
  timeout_ms_ = o_.timeout_ms ? o_.timeout_ms : pl_.value("timeout_ms", 1000u);
  const auto& r = pl_.contains("rates") ? pl_["rates"] : nlohmann::json::object();
  for (const auto& t : pl_["targets"]) {
    const size_t i = add_target(t);
    for (const auto& s : t.value("sports", nlohmann::json::array()))
      add_pair(i, s.get<uint16_t>(), targets_[i].kind);
  }
  // ToR-mesh: the rate is per peer; the others over all their pairs.
  size_t tor_peers = 0;
  for (const auto& t : targets_) tor_peers += t.kind == "tor";
  kinds_["tor"].rate = r.value("tor", 10.0) * static_cast<double>(tor_peers) * o_.rate_scale;
  kinds_["inter"].rate = r.value("inter", 40.0) * o_.rate_scale;
  kinds_["service"].rate = r.value("service", 10.0) * o_.rate_scale;
  trace_rate_ = o_.trace ? r.value("trace", 30.0) * o_.rate_scale : 0.0;
  return 0;
}

void Agent::publish() {
  if (o_.registry.empty()) return;
  reg_file_ = o_.registry + "/" + addr_ + ".json";
  const std::string tmp = reg_file_ + ".tmp";
  {
    std::ofstream f(tmp);
    f << nlohmann::json{{"host", host_}, {"addr", addr_}, {"gid", gid_text(port_.gid())},
                        {"qpn", port_.qpn()}, {"qkey", kProbeQkey}, {"pid", getpid()}}.dump()
      << "\n";
  }
  std::rename(tmp.c_str(), reg_file_.c_str());
}

void Agent::reload_registry() {
  if (o_.registry.empty()) return;
  for (auto& t : targets_) {
    std::ifstream f(o_.registry + "/" + t.addr + ".json");
    if (!f) continue;  // not up (yet): its probes wait
    auto j = nlohmann::json::parse(f, nullptr, false);
    if (j.is_discarded() || !j.contains("qpn")) continue;
    const auto q = j["qpn"].get<uint32_t>();
    if (q != t.qpn && t.qpn != 0) metrics_.peer_restarts++;
    t.qpn = q;
  }
}

void Agent::reload_services() {
  if (o_.services.empty()) return;
  std::ifstream f(o_.services);
  if (!f) return;
  auto j = nlohmann::json::parse(f, nullptr, false);
  if (!j.is_array()) return;
  for (const auto& s : j) {
    if (!s.is_object() || s.value("src", "") != addr_ || !s.contains("sport")) continue;
    const auto sport = s["sport"].get<unsigned>();
    if (sport <= 0xc000 || sport > 0xffff) continue;
    const size_t i = add_target({{"name", s.value("dst", "")}, {"addr", s.value("dst", "")},
                                 {"kind", "service"}, {"max_ttl", 3}});
    add_pair(i, static_cast<uint16_t>(sport), "service");
  }
  reload_registry();
}

void Agent::send_probe(size_t pi, uint64_t now) {
  Pair& p = pairs_[pi];
  Target& t = targets_[p.target];
  TargetStats& ts = metrics_.target(t.name, t.kind);
  if (t.qpn == 0) {
    ++ts.no_peer;
    return;
  }
  Slot& s = slots_[seq_ % kSlots];
  if (s.busy) {  // older than kSlots probes and not expired: never at the rates we use
    ++metrics_.slot_busy;
    return;
  }
  s = Slot{};
  s.busy = true;
  s.seq = seq_;
  s.pair = pi;
  s.t1 = now;
  s.t1_wall = wall_ns();
  ProbeMsg m;
  m.type = MsgType::kProbe;
  m.seq = seq_;
  m.reply_label = label_for_sport(p.sport);
  m.sent_wall = s.t1_wall;
  const int e = port_.send(t.gid, t.qpn, label_for_sport(p.sport), m, make_wr_id(WrKind::kProbe, seq_));
  if (e != 0) {
    s.busy = false;
    ++metrics_.send_errors;
    return;
  }
  ++ts.sent;
  inflight_.push_back(seq_);
  ++seq_;
}

void Agent::finish(Slot& s, const char* status) {
  const Pair& p = pairs_[s.pair];
  const Target& t = targets_[p.target];
  TargetStats& ts = metrics_.target(t.name, t.kind);
  std::string line = fmt::format(
      "{{\"type\":\"probe\",\"t\":{},\"src\":\"{}\",\"dst\":\"{}\",\"dst_name\":\"{}\",\"sport\":{},"
      "\"kind\":\"{}\",\"seq\":{},\"status\":\"{}\"",
      s.t1_wall, addr_, t.addr, t.name, p.sport, t.kind, s.seq, status);
  if (std::string_view(status) == "ok") {
    // R-Pingmesh: network RTT = (T5-T2)-(T4-T3), responder delay = T4-T3,
    // prober delay = (T6-T1)-(T5-T2).
    const auto rtt = static_cast<int64_t>(s.t5 - s.t2) - static_cast<int64_t>(s.t4 - s.t3);
    const auto resp = static_cast<int64_t>(s.t4 - s.t3);
    const auto prober = static_cast<int64_t>(s.t6 - s.t1) - static_cast<int64_t>(s.t5 - s.t2);
    line += fmt::format(",\"rtt_ns\":{},\"resp_ns\":{},\"prober_ns\":{}", rtt, resp, prober);
    ++ts.ok;
    ts.add_sample(rtt, resp, prober);
  } else if (std::string_view(status) == "timeout") {
    ++ts.timeout;
  } else {
    ++ts.ack2_lost;
  }
  emit(line + "}");
  s.busy = false;
}

void Agent::on_recv(const Completion& c, uint64_t now) {
  ProbeMsg m;
  if (!c.ok || !c.payload || !decode(c.payload, c.len, m)) {
    ++metrics_.bad_packets;
    return;
  }
  if (m.type == MsgType::kProbe) {  // answer at once: ACK1 now, ACK2 when ACK1 completed
    RSlot& r = rslots_[rnext_ % kRSlots];
    if (r.busy) {
      ++metrics_.resp_busy;
      return;
    }
    r = RSlot{true, c.src, c.src_qp, m.reply_label, m.seq, c.ts_ns};
    ProbeMsg a;
    a.type = MsgType::kAck1;
    a.seq = m.seq;
    if (port_.send(c.src, c.src_qp, m.reply_label, a, make_wr_id(WrKind::kAck1, rnext_ % kRSlots)) != 0) {
      r.busy = false;
      ++metrics_.send_errors;
      return;
    }
    ++rnext_;
    ++metrics_.answered;
    return;
  }
  Slot& s = slots_[m.seq % kSlots];
  if (!s.busy || s.seq != m.seq) {
    ++metrics_.late_acks;  // its probe timed out already
    return;
  }
  if (m.type == MsgType::kAck1) {
    if (s.have_ack1) return;
    s.have_ack1 = true;
    s.t5 = c.ts_ns;
    s.t6 = now;
  } else {
    s.have_ack2 = true;
    s.t3 = m.t3;
    s.t4 = m.t4;
  }
  if (s.have_t2 && s.have_ack1 && s.have_ack2) finish(s, "ok");
}

void Agent::on_completion(const Completion& c, uint64_t now) {
  if (c.recv) return on_recv(c, now);
  const uint64_t v = wr_value(c.wr_id);
  switch (wr_kind(c.wr_id)) {
    case WrKind::kProbe: {
      Slot& s = slots_[v % kSlots];
      if (!s.busy || s.seq != v) return;
      if (!c.ok) {
        ++metrics_.send_errors;
        return;
      }
      s.have_t2 = true;
      s.t2 = c.ts_ns;
      if (s.have_ack1 && s.have_ack2) finish(s, "ok");
      return;
    }
    case WrKind::kAck1: {
      RSlot& r = rslots_[v % kRSlots];
      if (!r.busy) return;
      if (!c.ok) {
        r.busy = false;
        return;
      }
      ProbeMsg a;
      a.type = MsgType::kAck2;
      a.seq = r.seq;
      a.t3 = r.t3;
      a.t4 = c.ts_ns;
      if (port_.send(r.peer, r.qpn, r.label, a, make_wr_id(WrKind::kAck2, v)) != 0) {
        ++metrics_.send_errors;
        r.busy = false;
      }
      return;
    }
    case WrKind::kAck2:
      rslots_[v % kRSlots].busy = false;
      return;
    default:
      return;
  }
}

void Agent::expire(uint64_t now) {
  const uint64_t limit = uint64_t{timeout_ms_} * 1000000ull;
  while (!inflight_.empty()) {
    Slot& s = slots_[inflight_.front() % kSlots];
    if (!s.busy || s.seq != inflight_.front()) {
      inflight_.pop_front();
      continue;
    }
    if (now - s.t1 < limit) break;
    finish(s, s.have_ack1 ? "ack2_lost" : "timeout");
    inflight_.pop_front();
  }
  while (!tinflight_.empty()) {
    TracePending& tp = tp_[tinflight_.front()];
    if (tp.busy && now - tp.sent < kTraceTimeoutNs) break;
    if (tp.busy) {
      const Pair& p = pairs_[tp.pair];
      emit(fmt::format("{{\"type\":\"hop\",\"t\":{},\"src\":\"{}\",\"dst\":\"{}\",\"sport\":{},"
                       "\"ttl\":{},\"hop\":null,\"ok\":false}}",
                       wall_ns(), addr_, targets_[p.target].addr, p.sport, tp.ttl));
      ++metrics_.trace_lost;
      tp.busy = false;
    }
    tinflight_.pop_front();
  }
}

void Agent::trace_step(uint64_t now) {
  if (pairs_.empty() || !tracer_.is_open()) return;
  const size_t pi = trace_rr_++ % pairs_.size();
  const Pair& p = pairs_[pi];
  const Target& t = targets_[p.target];
  if (t.dst4 == 0) return;
  for (unsigned ttl = 1; ttl <= t.max_ttl; ++ttl) {
    const uint16_t id = tid_++;
    if (tid_ == 0) tid_ = 1;
    TracePending& tp = tp_[id];
    if (tp.busy) continue;
    if (tracer_.send(t.dst4, p.sport, static_cast<uint8_t>(ttl), id) != 0) {
      ++metrics_.send_errors;
      continue;
    }
    tp = TracePending{true, pi, static_cast<uint8_t>(ttl), now};
    tinflight_.push_back(id);
    ++metrics_.trace_sent;
  }
}

void Agent::on_hops(uint64_t now) {
  std::vector<HopAnswer> ans;
  tracer_.drain(ans);
  for (const auto& a : ans) {
    TracePending& tp = tp_[a.id];
    if (!tp.busy) continue;
    Pair& p = pairs_[tp.pair];
    const Target& t = targets_[p.target];
    if (a.dst != t.dst4 || a.sport != p.sport) continue;
    tp.busy = false;
    ++metrics_.trace_answered;
    emit(fmt::format("{{\"type\":\"hop\",\"t\":{},\"src\":\"{}\",\"dst\":\"{}\",\"sport\":{},"
                     "\"ttl\":{},\"hop\":\"{}\",\"ok\":{},\"rtt_ns\":{}}}",
                     wall_ns(), addr_, t.addr, p.sport, tp.ttl, a.hop, a.exceeded ? "true" : "false",
                     now - tp.sent));
    if (!a.exceeded) continue;  // unreachable: the path ends there, nothing to learn
    std::string& h = p.hops[tp.ttl - 1];
    if (h == a.hop) continue;
    h = a.hop;
    std::string hops;
    for (const auto& x : p.hops) hops += (hops.empty() ? "" : ",") + (x.empty() ? "null" : "\"" + x + "\"");
    emit(fmt::format("{{\"type\":\"path\",\"t\":{},\"src\":\"{}\",\"dst\":\"{}\",\"sport\":{},"
                     "\"hops\":[{}]}}",
                     wall_ns(), addr_, t.addr, p.sport, hops));
  }
}

int Agent::run() {
  if (int r = load_pinglist()) return r;
  if (auto r = port_.open(o_.dev, o_.gid_index, addr_); !r) {
    std::fprintf(stderr, "sroce pingmesh agent: %s\n", r.error().message.c_str());
    return 1;
  }
  if (o_.trace) {
    if (auto r = tracer_.open(addr_); !r) {
      std::fprintf(stderr, "sroce pingmesh agent: no path traces: %s\n", r.error().message.c_str());
      trace_rate_ = 0;
    }
  }
  out_ = o_.out == "-" ? stdout : std::fopen(o_.out.c_str(), "a");
  if (!out_) {
    std::fprintf(stderr, "sroce pingmesh agent: cannot open %s\n", o_.out.c_str());
    return 1;
  }
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  if (port_.event_fd() >= 0) fcntl(port_.event_fd(), F_SETFL, fcntl(port_.event_fd(), F_GETFL) | O_NONBLOCK);
  publish();
  reload_services();
  reload_registry();
  emit(fmt::format("{{\"type\":\"start\",\"t\":{},\"host\":\"{}\",\"src\":\"{}\",\"dev\":\"{}\","
                   "\"pid\":{},\"qpn\":{},\"gid_index\":{},\"timestamps\":\"{}\",\"pairs\":{},"
                   "\"timeout_ms\":{}}}",
                   wall_ns(), host_, addr_, port_.device_name(), getpid(), port_.qpn(), port_.gid_index(),
                   port_.hw_timestamps() ? "completion" : "host", pairs_.size(), timeout_ms_));
  std::fflush(out_);

  const uint64_t t0 = port_.host_ns();
  auto secs = [&](uint64_t ns) { return static_cast<double>(ns - t0) / 1e9; };
  double next_registry = 2, next_services = 5, next_metrics = 1;
  std::vector<Completion> cs;
  cs.reserve(64);
  while (!g_stop) {
    uint64_t now = port_.host_ns();
    const double s = secs(now);
    if (o_.duration_s > 0 && s >= o_.duration_s) break;
    while (port_.poll(cs, 64) > 0) {
      now = port_.host_ns();
      for (const auto& c : cs) on_completion(c, now);
    }
    if (tracer_.is_open()) on_hops(now);
    expire(now);
    double next = s + 0.05;
    for (auto& [name, k] : kinds_) {
      if (k.rate <= 0 || k.pairs.empty()) continue;
      if (k.next_due < s - 1.0) k.next_due = s;  // after a stall: no burst to catch up
      while (k.next_due <= s) {
        send_probe(k.pairs[k.rr++ % k.pairs.size()], now);
        k.next_due += 1.0 / k.rate;
      }
      next = std::min(next, k.next_due);
    }
    if (trace_rate_ > 0) {
      if (trace_due_ < s - 1.0) trace_due_ = s;
      while (trace_due_ <= s) {
        trace_step(now);
        trace_due_ += 1.0 / trace_rate_;
      }
      next = std::min(next, trace_due_);
    }
    if (s >= next_registry) {
      reload_registry();
      publish();  // survives a registry that was cleaned under us
      next_registry = s + 2;
    }
    if (s >= next_services) {
      reload_services();
      next_services = s + 5;
    }
    if (!o_.metrics.empty() && s >= next_metrics) {
      metrics_.write(o_.metrics, host_, addr_);
      next_metrics = s + 1;
    }
    std::fflush(out_);
    port_.arm();
    if (port_.poll(cs, 64) > 0) {
      now = port_.host_ns();
      for (const auto& c : cs) on_completion(c, now);
      continue;
    }
    const double wait_s = std::max(0.0, next - secs(port_.host_ns()));
    pollfd fds[2] = {{port_.event_fd(), POLLIN, 0}, {tracer_.recv_fd(), POLLIN, 0}};
    int ms = static_cast<int>(wait_s * 1000.0 + 0.999);
    if (port_.event_fd() < 0) ms = std::min(ms, 1);
    ::poll(fds, 2, ms);
  }
  // Probes still in flight are reported as what they are when we stop: not answered yet.
  if (!o_.metrics.empty()) metrics_.write(o_.metrics, host_, addr_);
  if (!reg_file_.empty()) std::remove(reg_file_.c_str());
  std::fflush(out_);
  if (out_ != stdout) std::fclose(out_);
  return 0;
}

}  // namespace

int run_agent(const AgentOptions& o) {
  Agent a(o);
  return a.run();
}

}  // namespace sroce::pingmesh
