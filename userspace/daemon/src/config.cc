// TOML configuration: schema walk with one message per bad key.
#include "config.h"

#include <arpa/inet.h>

#include <cctype>
#include <cerrno>
#include <fstream>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <toml++/toml.h>

#include "sroce/cc/cc.h"
#include "sroce/engine/engine.h"
#include "sroce_abi.h"

namespace sroce::daemon {

std::string Config::socket_path() const {
  if (!control.socket.empty()) return control.socket;
  return fmt::format("{}/{}.sock", SROCE_RUN_DIR, device.name);
}

namespace {

std::string describe(const toml::node& n) {
  if (auto s = n.as_string()) return fmt::format("\"{}\"", s->get());
  if (auto i = n.as_integer()) return fmt::format("{}", i->get());
  if (auto b = n.as_boolean()) return b->get() ? "true" : "false";
  if (auto f = n.as_floating_point()) return fmt::format("{} (a float)", f->get());
  if (n.is_table()) return "a table";
  if (n.is_array()) return "an array";
  return "a date/time";
}

// Walks the parsed document key by key; the first problem wins (one clear
// message beats a list of consequences).
class Reader {
 public:
  Reader(const toml::table& root, std::string_view source) : root_(root), source_(source) {}

  bool failed() const { return !error_.empty(); }
  const std::string& error() const { return error_; }

  void fail(std::string_view key, std::string_view expected, std::string_view got) {
    if (failed()) return;
    error_ = fmt::format("{}: {}: expected {}, got {}", source_, key, expected, got);
  }

  template <typename T>
  void integer(std::string_view key, T& out, int64_t lo, int64_t hi, bool pow2 = false) {
    known_.insert(std::string(key));
    auto v = root_.at_path(key);
    if (!v) return;
    std::string expected = fmt::format("{} in {}..{}", pow2 ? "a power of two" : "an integer", lo, hi);
    auto i = v.as_integer();
    if (!i) return fail(key, expected, describe(*v.node()));
    int64_t x = i->get();
    if (x < lo || x > hi || (pow2 && (x & (x - 1)) != 0)) return fail(key, expected, fmt::format("{}", x));
    out = static_cast<T>(x);
  }

  void boolean(std::string_view key, bool& out) {
    known_.insert(std::string(key));
    auto v = root_.at_path(key);
    if (!v) return;
    auto b = v.as_boolean();
    if (!b) return fail(key, "true or false", describe(*v.node()));
    out = b->get();
  }

  // `allowed` empty: any non-empty string up to `max_len` unless allow_empty.
  void string(std::string_view key, std::string& out, const std::vector<std::string>& allowed = {},
              bool allow_empty = true, size_t max_len = 255) {
    known_.insert(std::string(key));
    auto v = root_.at_path(key);
    if (!v) return;
    std::string expected = "a string";
    if (!allowed.empty()) expected = fmt::format("one of \"{}\"", fmt::join(allowed, "\", \""));
    auto s = v.as_string();
    if (!s) return fail(key, expected, describe(*v.node()));
    const std::string& x = s->get();
    if (!allowed.empty()) {
      bool found = false;
      for (const auto& a : allowed) found = found || a == x;
      if (!found) return fail(key, expected, describe(*v.node()));
    } else if ((x.empty() && !allow_empty) || x.size() > max_len) {
      return fail(key, fmt::format("a {}string of at most {} bytes", allow_empty ? "" : "non-empty ", max_len),
                  describe(*v.node()));
    }
    out = x;
  }

  void uint_list(std::string_view key, std::vector<uint32_t>& out) {
    known_.insert(std::string(key));
    auto v = root_.at_path(key);
    if (!v) return;
    const char* expected = "an array of integers in 0..4294967294";
    auto a = v.as_array();
    if (!a) return fail(key, expected, describe(*v.node()));
    out.clear();
    for (const auto& e : *a) {
      auto i = e.as_integer();
      if (!i || i->get() < 0 || i->get() >= 0xffffffffLL) return fail(key, expected, "an element " + describe(e));
      out.push_back(static_cast<uint32_t>(i->get()));
    }
  }

  void string_list(std::string_view key, std::vector<std::string>& out) {
    known_.insert(std::string(key));
    auto v = root_.at_path(key);
    if (!v) return;
    const char* expected = "an array of non-empty strings";
    auto a = v.as_array();
    if (!a) return fail(key, expected, describe(*v.node()));
    out.clear();
    for (const auto& e : *a) {
      auto s = e.as_string();
      if (!s || s->get().empty()) return fail(key, expected, "an element " + describe(e));
      out.push_back(s->get());
    }
  }

  void ipv4_list(std::string_view key, std::vector<std::string>& out) {
    known_.insert(std::string(key));
    auto v = root_.at_path(key);
    if (!v) return;
    const char* expected = "an array of IPv4 addresses as strings (\"10.0.0.1\")";
    auto a = v.as_array();
    if (!a) return fail(key, expected, describe(*v.node()));
    out.clear();
    for (const auto& e : *a) {
      auto s = e.as_string();
      in_addr tmp{};
      if (!s || inet_pton(AF_INET, s->get().c_str(), &tmp) != 1)
        return fail(key, expected, "an element " + describe(e));
      out.push_back(s->get());
    }
  }

  // Any key present in the file but not read by the schema is a typo or a
  // key from another version: refuse it rather than silently ignore it.
  void check_unknown() { walk(root_, ""); }

 private:
  void walk(const toml::table& t, const std::string& prefix) {
    for (const auto& [k, node] : t) {
      if (failed()) return;
      std::string path = prefix.empty() ? std::string(k.str()) : prefix + "." + std::string(k.str());
      if (known_.count(path)) continue;
      if (auto sub = node.as_table()) {
        bool is_section = false;
        for (const auto& kn : known_) is_section = is_section || kn.rfind(path + ".", 0) == 0;
        if (is_section) {
          walk(*sub, path);
          continue;
        }
      }
      error_ = fmt::format("{}: {}: unknown key (see packaging/sroced.toml for every key)", source_, path);
    }
  }

  const toml::table& root_;
  std::string source_;
  std::string error_;
  std::set<std::string> known_;
};

// Copies `src` into `dst`, recursing into tables (for --set overrides).
void merge(toml::table& dst, const toml::table& src) {
  for (const auto& [k, node] : src) {
    auto* d = dst.get(k);
    if (node.is_table() && d && d->is_table()) {
      merge(*d->as_table(), *node.as_table());
    } else {
      dst.insert_or_assign(k, node);
    }
  }
}

const std::vector<std::string> kCcAlgorithms = {"none", "dcqcn", "hpcc", "odin", "delay", "ltp"};

const std::vector<std::string> kLogLevels = {"trace", "debug", "info", "warn", "error", "critical", "off"};

bool is_ipv4(const std::string& s) {
  in_addr tmp{};
  return inet_pton(AF_INET, s.c_str(), &tmp) == 1;
}

bool is_mac(std::string_view s) {
  if (s.size() != 17) return false;
  for (size_t i = 0; i < 17; ++i) {
    if (i % 3 == 2 ? s[i] != ':' : !isxdigit(static_cast<unsigned char>(s[i]))) return false;
  }
  return true;
}

// Cross-key rules of the [dpdk] section (only when datapath.kind = "dpdk").
Result<void> validate_dpdk(const Config& c) {
  auto bad = [](std::string s) { return Error{EINVAL, std::move(s)}; };
  const auto& d = c.dpdk;
  const bool shorthand = d.vdev == "af_xdp" || d.vdev == "af_packet";
  if (!shorthand && !d.vdev.empty() &&
      (d.vdev.rfind("net_", 0) != 0 || d.vdev.find_first_of(" \t") != std::string::npos))
    return bad(fmt::format("dpdk.vdev: expected \"af_xdp\", \"af_packet\", \"\" (a PCI port bound to vfio-pci) "
                           "or a --vdev string such as \"net_af_xdp0,iface=eth1\", got \"{}\"",
                           d.vdev));
  if (!d.lcores.empty() && (d.lcores.size() > 4 || d.lcores.find_first_not_of("0123456789") != std::string::npos))
    return bad(fmt::format("dpdk.lcores: expected \"\" (not pinned) or one CPU number such as \"1\" (one lcore "
                           "runs the loop: the engine is single-threaded), got \"{}\"",
                           d.lcores));
  if (d.mbuf_cache > d.mbufs * 2 / 3)
    return bad(fmt::format("dpdk.mbuf_cache: expected at most dpdk.mbufs / 1.5 = {} (rte_mempool_create), got {}",
                           d.mbufs * 2 / 3, d.mbuf_cache));
  // Every rx descriptor holds an mbuf, tx rings hold sent ones until
  // reaped, and the loop holds up to two bursts: the pool must cover them.
  uint64_t need = uint64_t{d.queues} * (d.rx_desc + d.tx_desc) + 4ull * c.datapath.batch + d.mbuf_cache;
  if (d.vdev == "af_xdp" || d.vdev.rfind("net_af_xdp", 0) == 0)
    need += uint64_t{d.queues} * 4096;  // the af_xdp PMD's fill and completion rings
  if (d.mbufs < need)
    return bad(fmt::format("dpdk.mbufs: expected at least {} for {} queue(s) of {} rx + {} tx descriptors "
                           "(plus bursts and the cache), got {}",
                           need, d.queues, d.rx_desc, d.tx_desc, d.mbufs));
  uint64_t room = d.mbuf_data_room ? d.mbuf_data_room : 4480;
  uint64_t pool_mb = (uint64_t{d.mbufs} * (room + 256) >> 20) + 1;
  if (uint64_t{d.memory_mb} < pool_mb + 32)
    return bad(fmt::format("dpdk.memory_mb: expected at least {} (the mbuf pool takes about {} MiB, EAL 32 MiB), "
                           "got {}",
                           pool_mb + 32, pool_mb, d.memory_mb));
  if ((d.vdev == "af_xdp" || d.vdev.rfind("net_af_xdp", 0) == 0) && d.xdp_prog.empty() && c.datapath.port != 4791)
    return bad(fmt::format("datapath.port: sroce's XDP program steers only UDP 4791 (proto/roce.h SROCE_UDP_PORT) "
                           "to the af_xdp socket; expected 4791 or a dpdk.xdp_prog of your own, got {}",
                           c.datapath.port));
  for (const auto& n : d.static_neighbours) {
    auto eq = n.find('=');
    if (eq == std::string::npos || !is_ipv4(n.substr(0, eq)) || !is_mac(std::string_view(n).substr(eq + 1)))
      return bad(fmt::format("dpdk.static_neighbours: expected entries \"A.B.C.D=xx:xx:xx:xx:xx:xx\", got \"{}\"", n));
  }
  return {};
}

}  // namespace

Result<void> validate(const Config& c) {
  auto bad = [](std::string s) { return Error{EINVAL, std::move(s)}; };
  if (c.device.name.empty() || c.device.name.size() > 63 ||
      c.device.name.find_first_of("/ \t") != std::string::npos)
    return bad(fmt::format("device.name: expected 1..63 characters without '/' or spaces, got \"{}\"",
                           c.device.name));
  if (c.device.netdev.size() > 15)
    return bad(fmt::format("device.netdev: expected an interface name of at most 15 characters, got \"{}\"",
                           c.device.netdev));
#ifdef SROCE_HAVE_DPDK
  if (c.datapath.kind != "udp" && c.datapath.kind != "dpdk")
    return bad(fmt::format("datapath.kind: expected \"udp\" or \"dpdk\", got \"{}\"", c.datapath.kind));
#else
  if (c.datapath.kind != "udp")
    return bad(fmt::format("datapath.kind: expected \"udp\" (this sroced was built without DPDK: "
                           "CONFIG_DATAPATH_DPDK and libdpdk-dev, docs/dpdk.md), got \"{}\"",
                           c.datapath.kind));
#endif
  if (c.datapath.kind == "dpdk") {
    if (auto v = validate_dpdk(c); !v) return v;
  }
  if (c.datapath.rx_buffer_bytes < 4608)
    return bad(fmt::format("datapath.rx_buffer_bytes: expected at least 4608 (one 4096-MTU packet), got {}",
                           c.datapath.rx_buffer_bytes));
  if (c.datapath.rx_buffers + c.datapath.tx_slots > 2 * c.datapath.uring_entries)
    return bad(fmt::format("datapath.uring_entries: expected at least (rx_buffers + tx_slots) / 2 = {} so "
                           "completions cannot overflow, got {}",
                           (c.datapath.rx_buffers + c.datapath.tx_slots + 1) / 2, c.datapath.uring_entries));
  std::string sock = c.socket_path();
  if (sock.size() >= 108)
    return bad(fmt::format("control.socket: expected a path shorter than 108 bytes (sun_path), got {} bytes",
                           sock.size()));
  if (!sock.empty() && sock[0] != '/')
    return bad(fmt::format("control.socket: expected an absolute path, got \"{}\"", sock));
  bool cc_ok = false;
  for (const auto& a : kCcAlgorithms) cc_ok = cc_ok || a == c.engine.cc.algorithm;
  if (!cc_ok)
    return bad(fmt::format("engine.cc.algorithm: expected one of \"{}\", got \"{}\"",
                           fmt::join(kCcAlgorithms, "\", \""), c.engine.cc.algorithm));
  if (c.engine.cc.delay_target_us != 0 && c.engine.cc.delay_target_us < c.engine.cc.base_rtt_us)
    return bad(fmt::format("engine.cc.delay_target_us: expected 0 (base_rtt_us + 2 us) or at least "
                           "engine.cc.base_rtt_us = {} (a target below the unloaded RTT is never met), got {}",
                           c.engine.cc.base_rtt_us, c.engine.cc.delay_target_us));
  bool level_ok = false;
  for (const auto& l : kLogLevels) level_ok = level_ok || l == c.log.level;
  if (!level_ok)
    return bad(fmt::format("log.level: expected one of \"{}\", got \"{}\"", fmt::join(kLogLevels, "\", \""),
                           c.log.level));
  return {};
}

Result<Config> parse_config(std::string_view text, std::string_view source, const std::vector<std::string>& sets) {
  toml::table root;
  try {
    root = toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    const auto& b = e.source().begin;
    return Error{EINVAL, fmt::format("{}:{}:{}: TOML syntax error: {}", source, b.line, b.column, e.description())};
  }
  for (const auto& s : sets) {
    auto eq = s.find('=');
    if (eq == std::string::npos || eq == 0)
      return Error{EINVAL, fmt::format("--set {}: expected key=value (value in TOML syntax)", s)};
    try {
      toml::table one = toml::parse(std::string_view(s), std::string_view("--set"));
      merge(root, one);
    } catch (const toml::parse_error& e) {
      return Error{EINVAL, fmt::format("--set {}: {} (strings need quotes: log.level=\"debug\")", s,
                                       e.description())};
    }
  }

  Config c;
  Reader r(root, source);
  r.string("device.name", c.device.name, {}, false, 63);
  r.string("device.netdev", c.device.netdev, {}, true, 15);
  r.ipv4_list("device.addresses", c.device.addresses);
  r.boolean("device.ipv6", c.device.ipv6);
  r.string("device.kernel", c.device.kernel, {"auto", "on", "off"});

  r.string("control.socket", c.control.socket, {}, true, 107);
  r.integer("control.socket_mode", c.control.socket_mode, 0, 0777);
  r.boolean("control.allow_root", c.control.allow_root);
  r.boolean("control.allow_same_uid", c.control.allow_same_uid);
  r.uint_list("control.allow_uids", c.control.allow_uids);
  r.uint_list("control.allow_gids", c.control.allow_gids);
  r.integer("control.max_contexts", c.control.max_contexts, 1, 65534);
  r.integer("control.max_objects_per_context", c.control.max_objects_per_context, 16, 1 << 20);

  r.string("datapath.kind", c.datapath.kind, {"udp", "dpdk"});
  r.integer("datapath.port", c.datapath.port, 1, 65535);
  r.boolean("datapath.gso", c.datapath.gso);
  r.boolean("datapath.send_zc", c.datapath.send_zc);
  r.boolean("datapath.gro", c.datapath.gro);
  r.integer("datapath.batch", c.datapath.batch, 1, 1024);
  r.integer("datapath.rx_buffers", c.datapath.rx_buffers, 1, 1024);
  r.integer("datapath.rx_buffer_bytes", c.datapath.rx_buffer_bytes, 4608, 1 << 20);
  r.integer("datapath.tx_slots", c.datapath.tx_slots, 2, 4096);
  r.integer("datapath.uring_entries", c.datapath.uring_entries, 8, 32768, true);
  r.integer("datapath.max_tx_ports", c.datapath.max_tx_ports, 1, 65535);
  r.integer("datapath.sndbuf", c.datapath.sndbuf, 65536, 1 << 30);
  r.integer("datapath.rcvbuf", c.datapath.rcvbuf, 65536, 1 << 30);
  r.integer("datapath.busy_poll_us", c.datapath.busy_poll_us, 0, 1000000);
  r.integer("datapath.realtime_priority", c.datapath.realtime_priority, 0, 99);
  r.integer("datapath.slice_us", c.datapath.slice_us, 0, 100000);
  if (c.datapath.slice_us != 0 && c.datapath.slice_us < 100)
    r.fail("datapath.slice_us", "0 (the kernel's default) or 100..100000", fmt::format("{}", c.datapath.slice_us));
  r.boolean("datapath.memory_batching", c.datapath.memory_batching);

  r.string("dpdk.vdev", c.dpdk.vdev, {}, true, 1023);
  r.integer("dpdk.port", c.dpdk.port, 0, 31);
  r.integer("dpdk.queues", c.dpdk.queues, 1, 16);
  r.string("dpdk.lcores", c.dpdk.lcores, {}, true, 15);
  r.boolean("dpdk.huge_pages", c.dpdk.huge_pages);
  r.integer("dpdk.memory_mb", c.dpdk.memory_mb, 16, 1 << 20);
  r.integer("dpdk.mbufs", c.dpdk.mbufs, 511, 1 << 22);
  r.integer("dpdk.mbuf_cache", c.dpdk.mbuf_cache, 0, 512);
  r.integer("dpdk.mbuf_data_room", c.dpdk.mbuf_data_room, 0, 65535);
  if (c.dpdk.mbuf_data_room != 0 && c.dpdk.mbuf_data_room < 2048)
    r.fail("dpdk.mbuf_data_room", "0 (sized for the PMD) or 2048..65535", fmt::format("{}", c.dpdk.mbuf_data_room));
  r.integer("dpdk.rx_desc", c.dpdk.rx_desc, 64, 16384, true);
  r.integer("dpdk.tx_desc", c.dpdk.tx_desc, 64, 16384, true);
  r.string("dpdk.xdp_prog", c.dpdk.xdp_prog, {}, true, 4095);
  r.integer("dpdk.sleep_poll_us", c.dpdk.sleep_poll_us, 0, 1000000);
  r.integer("dpdk.idle_yield_passes", c.dpdk.idle_yield_passes, 0, 1 << 30);
  r.integer("dpdk.max_tx_ports", c.dpdk.max_tx_ports, 1, 65535);
  r.string_list("dpdk.static_neighbours", c.dpdk.static_neighbours);
  r.string_list("dpdk.eal_args", c.dpdk.eal_args);

  r.integer("engine.max_qps", c.engine.max_qps, 1, 1 << 20);
  r.integer("engine.max_cqs", c.engine.max_cqs, 1, 1 << 20);
  r.integer("engine.max_mrs", c.engine.max_mrs, 1, 1 << 22);
  r.integer("engine.max_pds", c.engine.max_pds, 1, 1 << 20);
  r.integer("engine.max_srqs", c.engine.max_srqs, 0, 1 << 20);
  r.integer("engine.max_ahs", c.engine.max_ahs, 0, 1 << 22);
  r.integer("engine.max_cqe", c.engine.max_cqe, 16, 1 << 22);
  r.integer("engine.max_qp_wr", c.engine.max_qp_wr, 16, 1 << 20);
  r.integer("engine.max_sge", c.engine.max_sge, 1, 256);
  r.integer("engine.max_inline_data", c.engine.max_inline_data, 0, 4096);
  r.integer("engine.max_rd_atomic", c.engine.max_rd_atomic, 1, 255);
  r.integer("engine.seed", c.engine.seed, 0, INT64_MAX);
  r.boolean("engine.lossy", c.engine.lossy);
  r.integer("engine.lanes", c.engine.lanes, 0, 64);
  r.integer("engine.lane_train_bytes", c.engine.lane_train_bytes, 0, 1 << 20);
  r.string("engine.cc.algorithm", c.engine.cc.algorithm, kCcAlgorithms);
  r.integer("engine.cc.line_rate_mbps", c.engine.cc.line_rate_mbps, 1, 1'000'000);
  r.integer("engine.cc.base_rtt_us", c.engine.cc.base_rtt_us, 1, 1'000'000);
  r.integer("engine.cc.delay_target_us", c.engine.cc.delay_target_us, 0, 1'000'000);
  r.integer("engine.cc.delay_per_hop_bytes", c.engine.cc.delay_per_hop_bytes, 0, 100'000'000);
  r.string("engine.cc.dcqcn_preset", c.engine.cc.dcqcn_preset, {"connectx", "paper"});
  r.boolean("engine.cc.notification_point", c.engine.cc.notification_point);
  r.integer("engine.cc.ack_every", c.engine.cc.ack_every, 1, 64);
  r.boolean("engine.cc.int_telemetry", c.engine.cc.int_telemetry);
  r.boolean("engine.cc.per_lane", c.engine.cc.per_lane);
  r.boolean("engine.lane_weights", c.engine.lane_weights);
  r.integer("engine.reorder_timeout_max_us", c.engine.reorder_timeout_max_us, 0, 1'000'000);

  r.integer("limits.contexts_per_uid", c.limits.contexts_per_uid, 1, 65534);
  r.integer("limits.qps_per_uid", c.limits.qps_per_uid, 1, 1 << 20);
  r.integer("limits.mrs_per_uid", c.limits.mrs_per_uid, 1, 1 << 22);
  r.integer("limits.mr_bytes_per_uid", c.limits.mr_bytes_per_uid, 4096, INT64_MAX);
  r.integer("limits.ring_fds_per_uid", c.limits.ring_fds_per_uid, 4, 1 << 20);
  r.boolean("limits.root", c.limits.root);
  r.integer("limits.hello_timeout_ms", c.limits.hello_timeout_ms, 10, 3'600'000);

  r.string("log.level", c.log.level, kLogLevels);

  r.check_unknown();
  if (r.failed()) return Error{EINVAL, r.error()};
  auto v = validate(c);
  if (!v) return Error{EINVAL, fmt::format("{}: {}", source, v.error().message)};
  return c;
}

void apply_cc_config(const Config& c, EngineConfig& ec) {
  const auto& k = c.engine.cc;
  const auto alg = cc::parse_algorithm(k.algorithm);  // "none" (or anything else): off
  ec.cc.enable = alg.has_value();
  if (!alg) return;
  ec.cc.config.algorithm = *alg;
  ec.cc.config.dcqcn = k.dcqcn_preset == "paper" ? cc::DcqcnConfig::paper() : cc::DcqcnConfig::connectx();
  ec.cc.config.delay.base_target = k.delay_target_us ? Duration::micros(k.delay_target_us) : Duration::picos(0);
  ec.cc.config.delay.per_hop_bytes = k.delay_per_hop_bytes;
  ec.cc.config.ltp.fallback = ec.cc.config.delay;  // LTP's safe fallback is the delay rule
  ec.cc.line_rate_bps = uint64_t{k.line_rate_mbps} * 1'000'000;
  ec.cc.base_rtt = Duration::micros(k.base_rtt_us);
  ec.cc.notification_point = k.notification_point;
  ec.cc.ack_every = k.ack_every;
  ec.cc.int_telemetry = k.int_telemetry;
  ec.cc.per_lane = k.per_lane;
}

Result<Config> load_config(const std::string& path, bool required, const std::vector<std::string>& sets) {
  std::ifstream in(path);
  if (!in) {
    if (required) return Error{ENOENT, fmt::format("{}: cannot open the configuration file", path)};
    return parse_config("", "(defaults)", sets);
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_config(ss.str(), path, sets);
}

}  // namespace sroce::daemon
