// Property harness, part 1: generating a case from its seed (topology,
// impairments, regions, QPs, operations with their expected effects on the
// shadow memory, the optional protection fault) and posting it.
#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "property_case.h"
#include "sroce/sim/topology.h"

namespace sroce::sim {

std::string property_replay_hint(uint64_t seed) {
  const std::string s = std::to_string(seed);
  return "replay: sroce-sim run property --seed " + s + "  (or SROCE_SEED=" + s +
         " property_engine \"[property]\")";
}

uint32_t PropertyConfig::parse_ops(const std::string& list) {
  uint32_t bits = 0;
  size_t start = 0;
  while (start <= list.size()) {
    const size_t end = std::min(list.find(',', start), list.size());
    const std::string w = list.substr(start, end - start);
    if (w == "send") bits |= kOpSend;
    else if (w == "write") bits |= kOpWrite;
    else if (w == "read") bits |= kOpRead;
    else if (w == "atomic") bits |= kOpAtomic;
    else if (w == "all") bits |= kOpAll;
    else return 0;
    start = end + 1;
  }
  return bits;
}

namespace prop {

const char* op_name(WrOpcode op) {
  switch (op) {
    case WrOpcode::kRdmaWrite: return "WRITE";
    case WrOpcode::kRdmaWriteWithImm: return "WRITE_IMM";
    case WrOpcode::kSend: return "SEND";
    case WrOpcode::kSendWithImm: return "SEND_IMM";
    case WrOpcode::kRdmaRead: return "READ";
    case WrOpcode::kAtomicCmpSwp: return "CMP_SWAP";
    case WrOpcode::kAtomicFetchAdd: return "FETCH_ADD";
    default: return "?";
  }
}

WcOpcode wc_opcode_of(WrOpcode op) {
  switch (op) {
    case WrOpcode::kRdmaWrite:
    case WrOpcode::kRdmaWriteWithImm: return WcOpcode::kRdmaWrite;
    case WrOpcode::kRdmaRead: return WcOpcode::kRdmaRead;
    case WrOpcode::kAtomicCmpSwp: return WcOpcode::kCompSwap;
    case WrOpcode::kAtomicFetchAdd: return WcOpcode::kFetchAdd;
    default: return WcOpcode::kSend;
  }
}

const Region* region_of(const Side& s, uint64_t addr) {
  for (const Region& r : s.data)
    if (addr >= r.addr && addr < r.addr + r.len) return &r;
  return nullptr;
}

void Case::fail(std::string what) {
  res_.ok = false;
  if (res_.failures.size() < 8) res_.failures.push_back(std::move(what));
}

// --- generation --------------------------------------------------------------

void Case::build_impairments(Impairments& imp, std::string& desc) {
  char buf[200];
  if (rng_.chance(0.7)) imp.loss = rng_.real() * 0.01;
  if (rng_.chance(0.15)) imp.burst = {0.001 + rng_.real() * 0.004, 0.3 + rng_.real() * 0.4, 0.0, 1.0};
  if (rng_.chance(0.4)) {
    imp.reorder = rng_.real() * 0.05;
    imp.reorder_delay = Duration::nanos(rng_.range(500, 20000));
  }
  if (rng_.chance(0.3)) imp.duplicate = rng_.real() * 0.02;
  if (rng_.chance(0.3)) imp.corrupt = rng_.real() * 0.02;
  std::snprintf(buf, sizeof buf, " loss=%.4f burst=%s reorder=%.3f/%lldns dup=%.3f corrupt=%.3f",
                imp.loss, imp.burst.enabled() ? "on" : "off", imp.reorder,
                static_cast<long long>(imp.reorder_delay.ps / 1000), imp.duplicate, imp.corrupt);
  desc += buf;
}

bool Case::setup_side(Side& s, Host& h) {
  s.host = &h;
  auto pd = h.engine().alloc_pd();
  if (!pd) return fail("alloc_pd: " + pd.error().message), false;
  s.pd = *pd;
  ArenaMemory& m = h.memory();
  s.base = m.base();
  auto region = [&](uint64_t len, uint32_t access, Region& r) -> bool {
    m.alloc(kGuard, 1);
    r.addr = m.alloc(len, 64);
    r.len = len;
    auto k = reg_region(h, s.pd, r.addr, len, access);
    if (!k) return fail(k.error().message), false;
    r.keys = *k;
    m.audit_allow(r.addr, len);
    return true;
  };
  const uint32_t all = kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic;
  s.data.resize(kDataRegions);
  for (auto& r : s.data)
    if (!region(kRegionBytes, all, r)) return false;
  if (!region(kSmallRegion, kAccessLocalWrite | kAccessRemoteRead, s.ro) ||
      !region(kSmallRegion, kAccessLocalWrite | kAccessRemoteWrite, s.wo) ||
      !region(kSmallRegion, kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead, s.noatomic))
    return false;
  Region dead;
  if (!region(64, all, dead)) return false;
  s.dead = dead.keys;
  if (auto r = h.engine().dereg_mr(dead.keys.lkey); !r) return fail("dereg_mr: " + r.error().message), false;
  m.alloc(kGuard, 1);
  s.used = m.alloc(1, 1) - s.base + 1;
  // Random content everywhere (regions and guards); the shadow starts equal.
  auto mem = m.at(s.base, s.used);
  for (size_t i = 0; i < mem.size(); i += 8) {
    const uint64_t w = rng_.next();
    std::memcpy(mem.data() + i, &w, std::min<size_t>(8, mem.size() - i));
  }
  s.shadow.assign(mem.begin(), mem.end());
  s.dont_care.assign(s.used, 0);
  return true;
}

bool Case::build() {
  if (cfg_.tap) net_.set_tap(cfg_.tap);
  std::string desc;
  char buf[200];
  const uint64_t rates[] = {10'000'000'000ull, 25'000'000'000ull, 100'000'000'000ull};
  LinkConfig lc;
  lc.rate_bps = rates[rng_.below(3)];
  lc.delay = Duration::nanos(rng_.range(500, 4000));
  lc.queue_bytes = static_cast<uint64_t>(rng_.range(64, 1024)) << 10;
  mtu_ = static_cast<Mtu>(rng_.range(1, 5));
  HostConfig hc;
  hc.engine.seed = seed_;
  // Sized for the case (an engine preallocates its tables and queues).
  hc.engine.max_qps = 8;
  hc.engine.max_cqs = 8;
  hc.engine.max_mrs = 32;
  hc.engine.max_pds = 4;
  hc.engine.max_srqs = 4;
  hc.engine.max_ahs = 4;
  hc.engine.max_cqe = 4096;
  hc.engine.max_qp_wr = 1024;
  hc.arena_bytes = kDataRegions * kRegionBytes + (256u << 10);
  const bool b2b = rng_.chance(0.4);
  Host *a = nullptr, *b = nullptr;
  // Lossy mode (own stream: the rest of the case does not change).
  const bool lossy = cfg_.lossy == PropertyConfig::Lossy::kAuto && lrng_.chance(0.75);
  const uint16_t lane_choices[] = {1, 4, 16};
  hc.engine.lossy.enable = lossy;
  hc.engine.lossy.lanes = lane_choices[lrng_.below(3)];
  const bool pure_reorder = lossy && !b2b && hc.engine.lossy.lanes > 1 && lrng_.chance(0.25);
  // Trimming only with MTU >= 1024: without congestion control a trimmed
  // 256-byte MTU stream sends as many header bytes as the slow downlink
  // carries, and strict priority starves the data queue for good.
  const bool trimming =
      lossy && !b2b && !pure_reorder && lrng_.chance(0.3) && mtu_bytes(mtu_) >= 1024;
  res_.lossy = lossy;
  res_.pure_reorder = pure_reorder;
  res_.trimming = trimming;
  std::snprintf(buf, sizeof buf, "%.0fG delay=%lldns queue=%lluK mtu=%u",
                static_cast<double>(lc.rate_bps) / 1e9, static_cast<long long>(lc.delay.ps / 1000),
                static_cast<unsigned long long>(lc.queue_bytes >> 10), mtu_bytes(mtu_));
  if (b2b) {
    desc = std::string("back-to-back ") + buf;
    LinkConfig ab = lc, ba = lc;
    build_impairments(ab.impair, desc);
    ba.impair = ab.impair;
    if (rng_.chance(0.2)) {  // asymmetric: the way back is slower and longer
      ba.rate_bps = rates[rng_.below(3)];
      ba.delay = lc.delay + Duration::nanos(rng_.range(0, 20000));
      desc += " asymmetric";
    }
    BackToBack t = build_back_to_back(net_, hc, ab, ba);
    a = t.a;
    b = t.b;
  } else {
    LeafSpineConfig ls;
    ls.spines = static_cast<uint32_t>(rng_.range(2, 4));
    ls.host_link = ls.uplink = ls.downlink = lc;
    desc = "leaf-spine spines=" + std::to_string(ls.spines) + " " + buf;
    build_impairments(ls.downlink.impair, desc);
    if (pure_reorder) ls.downlink.impair = Impairments{};
    if (trimming) {
      // DCP-style switches: a slow downlink fills a small shared buffer, so
      // data packets get cut to their headers (the engine gets meta.trimmed).
      ls.sw.mmu = true;
      ls.sw.trim = true;
      ls.sw.buffer_bytes = static_cast<uint64_t>(lrng_.range(24, 96)) << 10;
      desc += " trim(buffer=" + std::to_string(ls.sw.buffer_bytes >> 10) + "K)";
      ls.downlink.rate_bps = lc.rate_bps / 2;
      ls.downlink.impair.corrupt = 0;  // a corrupted trimmed frame has no ICRC to catch it
    }
    LeafSpine t = build_leaf_spine(net_, ls, hc);
    a = t.hosts[0];
    b = t.hosts[1];
    // Sometimes one spine flaps: down for 50..500 us early in the run.
    if (rng_.chance(0.1)) {
      const uint32_t s = static_cast<uint32_t>(rng_.below(ls.spines));
      const Time t1 = Time{} + Duration::micros(rng_.range(10, 200));
      const Time t2 = t1 + Duration::micros(rng_.range(50, 500));
      for (auto& per_leaf : t.up) per_leaf[s]->impairments().outages.push_back({t1, t2});
      for (Link* l : t.down[s]) l->impairments().outages.push_back({t1, t2});
      desc += " flap(spine" + std::to_string(s) + ")";
    }
    if (pure_reorder) {
      // Pure path reordering: spine s adds s * step to every frame (each path
      // stays FIFO), nothing is lost, duplicated or corrupted.
      const Duration step = Duration::nanos(lrng_.range(300, 6000));
      const size_t nspines = t.up.empty() ? 0 : t.up[0].size();
      for (size_t s = 0; s < nspines; ++s) {
        for (auto& per_leaf : t.up) {
          Impairments& im = per_leaf[s]->impairments();
          im = Impairments{};
          im.reorder = s == 0 ? 0.0 : 1.0;
          im.reorder_delay = step * static_cast<int64_t>(s);
        }
        for (Link* l : t.down[s]) l->impairments() = Impairments{};
      }
      desc += " pure-reorder(step=" + std::to_string(step.ps / 1000) + "ns, impairments off)";
    }
  }
  if (lossy) {
    desc += " lossy(lanes=" + std::to_string(hc.engine.lossy.lanes) + ")";
  }
  if (!setup_side(sides_[0], *a) || !setup_side(sides_[1], *b)) return false;

  QpOptions qo;
  qo.mtu = mtu_;
  qo.send_wr = 128;
  qo.recv_wr = 128;
  qo.max_sge = kMaxSge;
  qo.cqe = 1024;
  qo.timeout = static_cast<uint8_t>(rng_.range(6, 9));
  qo.min_rnr_timer = static_cast<uint8_t>(rng_.range(1, 6));
  qo.max_rd_atomic = static_cast<uint8_t>(rng_.range(1, 16));
  const int pairs = static_cast<int>(rng_.range(1, 3));
  std::snprintf(buf, sizeof buf, " qps=%d timeout=%u rnr_timer=%u rd_atomic=%u", pairs, qo.timeout,
                qo.min_rnr_timer, qo.max_rd_atomic);
  desc += buf;
  for (int i = 0; i < pairs; ++i) {
    auto ea = create_qp_end(*a, qo, sides_[0].pd);
    auto eb = create_qp_end(*b, qo, sides_[1].pd);
    if (!ea || !eb) return fail((ea ? eb.error() : ea.error()).message), false;
    ea->sq_psn = static_cast<uint32_t>(rng_.next() & 0xffffff);
    eb->sq_psn = static_cast<uint32_t>(rng_.next() & 0xffffff);
    if (auto r = connect_qp(*ea, *eb, qo, eb->sq_psn, sim_.now()); !r) return fail(r.error().message), false;
    if (auto r = connect_qp(*eb, *ea, qo, ea->sq_psn, sim_.now()); !r) return fail(r.error().message), false;
    const int ia = static_cast<int>(ends_.size());
    ends_.push_back(End{*ea, 0, ia + 1, {}, {}, 1, Time{}});
    ends_.push_back(End{*eb, 1, ia, {}, {}, 1, Time{}});
  }
  for (int s = 0; s < 2; ++s) {
    sides_[s].host->on_completion([this, s](Host&, Handle, const Wc& wc, Time) { on_wc(s, wc); });
    sides_[s].host->on_async_event([this, s](Host&, const AsyncEvent& ev, Time) { on_async(s, ev); });
  }
  res_.description = desc;
  return true;
}

uint32_t Case::pick_len() {
  const uint64_t c = rng_.below(100);
  const auto mtu = static_cast<int64_t>(mtu_bytes(mtu_));
  if (c < 5) return 0;
  if (c < 35) return static_cast<uint32_t>(rng_.range(1, 64));
  if (c < 70) return static_cast<uint32_t>(rng_.range(65, 2 * mtu));
  return static_cast<uint32_t>(rng_.range(2 * mtu, 65536));
}

uint64_t Case::take(Side& s, uint64_t len, uint64_t align) {
  const size_t first = rng_.below(s.data.size());
  for (size_t k = 0; k < s.data.size(); ++k) {
    Region& r = s.data[(first + k) % s.data.size()];
    // A random gap keeps buffers unaligned and apart.
    const uint64_t start = (r.used + rng_.below(16) + align - 1) / align * align;
    if (start + len <= r.len) {
      r.used = start + len;
      return r.addr + start;
    }
  }
  return 0;
}

std::vector<Sge> Case::take_sgl(Side& s, uint64_t len) {
  std::vector<Sge> sgl;
  if (len == 0) return sgl;
  const uint64_t n = static_cast<uint64_t>(rng_.range(1, static_cast<int64_t>(std::min<uint64_t>(kMaxSge, len))));
  // n positive parts summing to len.
  std::vector<uint64_t> parts(n, 1);
  for (uint64_t rest = len - n; rest > 0;) {
    const uint64_t chunk = std::max<uint64_t>(1, rest / n);
    parts[rng_.below(n)] += chunk;
    rest -= chunk;
  }
  for (uint64_t p : parts) {
    const uint64_t addr = take(s, p, rng_.chance(0.5) ? 1 : 8);
    if (addr == 0) return {};
    // The lkey of the region holding addr.
    uint32_t lkey = 0;
    for (const Region& r : s.data)
      if (addr >= r.addr && addr < r.addr + r.len) lkey = r.keys.lkey;
    sgl.push_back(Sge{addr, static_cast<uint32_t>(p), lkey});
  }
  return sgl;
}

std::vector<std::byte> Case::gather(const Side& s, const std::vector<Sge>& sgl) const {
  std::vector<std::byte> out;
  for (const Sge& g : sgl) {
    const auto* p = s.shadow.data() + (g.addr - s.base);
    out.insert(out.end(), p, p + g.length);
  }
  return out;
}

void Case::scatter(Side& s, const std::vector<Sge>& sgl, const std::vector<std::byte>& bytes) {
  size_t off = 0;
  if (bytes.empty()) return;
  for (const Sge& g : sgl) {
    const size_t n = std::min<size_t>(g.length, bytes.size() - off);
    std::memcpy(sh(s, g.addr), bytes.data() + off, n);
    off += n;
    if (off == bytes.size()) break;
  }
}

void Case::dont_care(Side& s, const std::vector<Sge>& sgl) {
  for (const Sge& g : sgl) std::fill_n(s.dont_care.begin() + static_cast<long>(g.addr - s.base), g.length, 1);
}

void Case::schedule_recv(End& rx, const std::vector<Sge>& sgl, Expected e, Time t) {
  t = std::max(t, rx.last_recv_post);
  rx.last_recv_post = t;
  e.wr_id = kRecvFlag | rx.next_wr++;
  auto sg = std::make_shared<std::vector<Sge>>(sgl);
  ++pending_posts_;
  sim_.call_at(t, [this, &rx, sg, e](Time) {
    --pending_posts_;
    RecvWr wr;
    wr.wr_id = e.wr_id;
    wr.sgl = *sg;
    rx.rq.push_back(e);
    trace("post_recv side" + std::to_string(rx.side) + " qp" + std::to_string(rx.q.qpn) + " wr" +
          std::to_string(e.wr_id & ~kRecvFlag) + " sges=" + std::to_string(sg->size()));
    if (int rc = rx.q.host->post_recv(rx.q.qpn, wr); rc != 0) {
      rx.rq.pop_back();
      fail("post_recv on qp " + std::to_string(rx.q.qpn) + " returned errno " + std::to_string(rc));
    }
  });
}

void Case::schedule_send(End& tx, const SendWr& wr0, const std::vector<Sge>& sgl, Expected e, Time t) {
  auto sg = std::make_shared<std::vector<Sge>>(sgl);
  ++pending_posts_;
  sim_.call_at(t, [this, &tx, wr0, sg, e](Time) {
    --pending_posts_;
    SendWr wr = wr0;
    wr.wr_id = e.wr_id;
    wr.sgl = *sg;
    tx.sq.push_back(e);
    trace("post_send side" + std::to_string(tx.side) + " qp" + std::to_string(tx.q.qpn) + " wr" +
          std::to_string(e.wr_id) + " " + e.what);
    if (int rc = tx.q.host->post_send(tx.q.qpn, wr); rc != 0) {
      tx.sq.pop_back();
      fail("post_send " + e.what + " on qp " + std::to_string(tx.q.qpn) + " returned errno " +
           std::to_string(rc));
    }
  });
}

void Case::generate_op(Time t) {
  End& tx = ends_[rng_.below(ends_.size())];
  End& rx = ends_[static_cast<size_t>(tx.peer)];
  Side& ls = sides_[tx.side];
  Side& rs = sides_[rx.side];
  uint64_t c = rng_.below(100);
  // Redraw until the class is enabled (cfg_.ops is never 0 here).
  auto cls = [](uint64_t v) {
    return v < 30 ? PropertyConfig::kOpSend : v < 65 ? PropertyConfig::kOpWrite
                                            : v < 85 ? PropertyConfig::kOpRead : PropertyConfig::kOpAtomic;
  };
  while ((cls(c) & cfg_.ops) == 0) c = rng_.below(100);
  const WrOpcode op = c < 25   ? WrOpcode::kSend
                      : c < 30 ? WrOpcode::kSendWithImm
                      : c < 55 ? WrOpcode::kRdmaWrite
                      : c < 65 ? WrOpcode::kRdmaWriteWithImm
                      : c < 85 ? WrOpcode::kRdmaRead
                      : c < 93 ? WrOpcode::kAtomicCmpSwp
                               : WrOpcode::kAtomicFetchAdd;
  SendWr wr;
  wr.opcode = op;
  wr.send_flags = kSendSignaled;
  if (rng_.chance(0.1)) wr.send_flags |= kSendFence;
  if (rng_.chance(0.2)) wr.send_flags |= kSendSolicited;
  wr.imm_data = static_cast<uint32_t>(rng_.next());
  Expected e;
  e.wr_id = tx.next_wr++;
  e.opcode = wc_opcode_of(op);
  std::vector<Sge> sgl;
  uint32_t len = 8;

  if (op == WrOpcode::kAtomicCmpSwp || op == WrOpcode::kAtomicFetchAdd) {
    const uint64_t local = take(ls, 8, 8), remote = take(rs, 8, 8);
    if (local == 0 || remote == 0) return;
    sgl.push_back(Sge{local, 8, region_of(ls, local)->keys.lkey});
    uint64_t orig;
    std::memcpy(&orig, sh(rs, remote), 8);
    wr.atomic.remote_addr = remote;
    wr.atomic.rkey = region_of(rs, remote)->keys.rkey;
    uint64_t now;
    if (op == WrOpcode::kAtomicCmpSwp) {
      wr.atomic.compare_add = rng_.chance(0.5) ? orig : orig ^ (1ull << rng_.below(64));
      wr.atomic.swap = rng_.next();
      now = orig == wr.atomic.compare_add ? wr.atomic.swap : orig;
    } else {
      wr.atomic.compare_add = rng_.next();
      now = orig + wr.atomic.compare_add;
    }
    // Atomics operate on a 64-bit word in the host's byte order (IBA 9.4.5).
    std::memcpy(sh(ls, local), &orig, 8);
    std::memcpy(sh(rs, remote), &now, 8);
  } else {
    len = pick_len();
    sgl = take_sgl(ls, len);
    if (len > 0 && sgl.empty()) return;
    if (op == WrOpcode::kRdmaRead) {
      const uint64_t remote = take(rs, len, 1);
      if (remote == 0) return;
      wr.rdma.remote_addr = remote;
      wr.rdma.rkey = region_of(rs, remote) ? region_of(rs, remote)->keys.rkey : rs.data[0].keys.rkey;
      std::vector<std::byte> bytes(sh(rs, remote), sh(rs, remote) + len);
      scatter(ls, sgl, bytes);
    } else if (op == WrOpcode::kRdmaWrite || op == WrOpcode::kRdmaWriteWithImm) {
      const uint64_t remote = take(rs, len, 1);
      if (remote == 0) return;
      wr.rdma.remote_addr = remote;
      wr.rdma.rkey = region_of(rs, remote) ? region_of(rs, remote)->keys.rkey : rs.data[0].keys.rkey;
      const auto bytes = gather(ls, sgl);
      std::copy(bytes.begin(), bytes.end(), sh(rs, remote));
      if (op == WrOpcode::kRdmaWriteWithImm) {
        // The receive WQE is consumed but its buffers are not written (IBA 9.4.3).
        auto rsgl = take_sgl(rs, rng_.below(64));
        Expected r;
        r.opcode = WcOpcode::kRecvRdmaWithImm;
        r.check_len = true;
        r.byte_len = len;
        r.imm = true;
        r.imm_data = wr.imm_data;
        r.what = "recv for WRITE_IMM";
        const Time tr = rng_.chance(0.1) ? t + Duration::micros(rng_.range(5, 200))
                                         : Time{std::max<int64_t>(0, (t - Duration::nanos(rng_.range(0, 50000))).ps)};
        schedule_recv(rx, rsgl, r, tr);
      }
    } else {
      const uint32_t cap = len + (rng_.chance(0.5) ? 0 : static_cast<uint32_t>(rng_.below(64)));
      auto rsgl = take_sgl(rs, cap);
      if (cap > 0 && rsgl.empty()) return;
      scatter(rs, rsgl, gather(ls, sgl));
      Expected r;
      r.opcode = WcOpcode::kRecv;
      r.check_len = true;
      r.byte_len = len;
      r.imm = op == WrOpcode::kSendWithImm;
      r.imm_data = wr.imm_data;
      r.what = "recv for SEND";
      // Usually posted ahead of the SEND; sometimes late (RNR NAK path).
      const Time tr = rng_.chance(0.1) ? t + Duration::micros(rng_.range(5, 200))
                                       : Time{std::max<int64_t>(0, (t - Duration::nanos(rng_.range(0, 50000))).ps)};
      schedule_recv(rx, rsgl, r, tr);
    }
  }
  e.what = std::string(op_name(op)) + " len=" + std::to_string(len) + " sges=" + std::to_string(sgl.size());
  ++res_.ops;
  res_.bytes += len;
  schedule_send(tx, wr, sgl, e, t);
}

bool Case::fault_phase() {
  End& tx = ends_[rng_.below(ends_.size())];
  End& rx = ends_[static_cast<size_t>(tx.peer)];
  Side& ls = sides_[tx.side];
  Side& rs = sides_[rx.side];
  SendWr wr;
  wr.send_flags = kSendSignaled;
  Expected e;
  e.wr_id = tx.next_wr++;
  const uint32_t len = static_cast<uint32_t>(rng_.range(2, 256));
  std::vector<Sge> sgl = take_sgl(ls, len);
  if (sgl.empty()) return false;
  const Region& dr = rs.data[rng_.below(rs.data.size())];
  const Time t = sim_.now() + Duration::micros(5);
  // The fault runs on a clean fabric: a lost NAK would make the requester
  // time out against a responder already in ERR (RETRY_EXC_ERR, also right),
  // and the point here is the exact error of each fault.
  for (const auto& l : net_.links()) l->impairments() = Impairments{};
  switch (rng_.below(8)) {
    case 0: {  // R_Key of a deregistered MR (IBA C9-? / 9.7.4.1.5: remote access error)
      const WrOpcode ops[] = {WrOpcode::kRdmaWrite, WrOpcode::kRdmaRead, WrOpcode::kAtomicCmpSwp};
      wr.opcode = ops[rng_.below(3)];
      if (wr.opcode == WrOpcode::kAtomicCmpSwp) {
        sgl = {Sge{take(ls, 8, 8), 8, 0}};
        sgl[0].lkey = region_of(ls, sgl[0].addr)->keys.lkey;
        wr.atomic.remote_addr = dr.addr;
        wr.atomic.rkey = rs.dead.rkey;
      }
      wr.rdma.remote_addr = dr.addr;
      wr.rdma.rkey = rs.dead.rkey;
      res_.fault = std::string("bad rkey (") + op_name(wr.opcode) + ")";
      e.status = WcStatus::kRemAccessErr;
      break;
    }
    case 1:  // crosses the end of the remote MR
      wr.opcode = rng_.chance(0.5) ? WrOpcode::kRdmaWrite : WrOpcode::kRdmaRead;
      wr.rdma.remote_addr = dr.addr + dr.len - len / 2;
      wr.rdma.rkey = dr.keys.rkey;
      res_.fault = std::string("remote out of bounds (") + op_name(wr.opcode) + ")";
      e.status = WcStatus::kRemAccessErr;
      break;
    case 2:  // WRITE to an MR without REMOTE_WRITE
      wr.opcode = WrOpcode::kRdmaWrite;
      wr.rdma.remote_addr = rs.ro.addr + rng_.below(rs.ro.len - len);
      wr.rdma.rkey = rs.ro.keys.rkey;
      res_.fault = "no remote write access";
      e.status = WcStatus::kRemAccessErr;
      break;
    case 3:  // READ from an MR without REMOTE_READ
      wr.opcode = WrOpcode::kRdmaRead;
      wr.rdma.remote_addr = rs.wo.addr + rng_.below(rs.wo.len - len);
      wr.rdma.rkey = rs.wo.keys.rkey;
      res_.fault = "no remote read access";
      e.status = WcStatus::kRemAccessErr;
      break;
    case 4:  // atomic on an MR without REMOTE_ATOMIC
      wr.opcode = WrOpcode::kAtomicFetchAdd;
      sgl = {Sge{take(ls, 8, 8), 8, 0}};
      sgl[0].lkey = region_of(ls, sgl[0].addr)->keys.lkey;
      wr.atomic.remote_addr = rs.noatomic.addr + 8 * rng_.below(rs.noatomic.len / 8);
      wr.atomic.rkey = rs.noatomic.keys.rkey;
      wr.atomic.compare_add = 1;
      res_.fault = "no remote atomic access";
      e.status = WcStatus::kRemAccessErr;
      break;
    case 5:  // L_Key of a deregistered MR (IBA 10.6.3.1: local protection error)
      wr.opcode = rng_.chance(0.5) ? WrOpcode::kRdmaWrite : WrOpcode::kRdmaRead;
      sgl[rng_.below(sgl.size())].lkey = ls.dead.lkey;
      wr.rdma.remote_addr = take(rs, len, 1);
      wr.rdma.rkey = region_of(rs, wr.rdma.remote_addr)->keys.rkey;
      res_.fault = std::string("bad lkey (") + op_name(wr.opcode) + ")";
      e.status = WcStatus::kLocProtErr;
      break;
    case 6: {  // local SGE past the end of its MR
      wr.opcode = rng_.chance(0.5) ? WrOpcode::kRdmaWrite : WrOpcode::kRdmaRead;
      const Region& lr = ls.data[rng_.below(ls.data.size())];
      sgl = {Sge{lr.addr + lr.len - len / 2, len, lr.keys.lkey}};
      wr.rdma.remote_addr = take(rs, len, 1);
      wr.rdma.rkey = region_of(rs, wr.rdma.remote_addr)->keys.rkey;
      res_.fault = std::string("local out of bounds (") + op_name(wr.opcode) + ")";
      e.status = WcStatus::kLocProtErr;
      break;
    }
    default: {  // SEND longer than the receive buffer (IBA 9.9.3.1.2)
      wr.opcode = WrOpcode::kSend;
      const uint32_t big = static_cast<uint32_t>(rng_.range(2, 2 * mtu_bytes(mtu_) + 64));
      sgl = take_sgl(ls, big);
      auto rsgl = take_sgl(rs, big - static_cast<uint32_t>(rng_.range(1, std::min<int64_t>(big - 1, 64))));
      if (sgl.empty() || rsgl.empty()) return false;
      dont_care(rs, rsgl);  // a failed receive leaves its buffer undefined
      Expected r;
      r.status = WcStatus::kLocLenErr;
      r.what = "recv too small";
      schedule_recv(rx, rsgl, r, sim_.now());
      res_.fault = "receive buffer too small";
      e.status = WcStatus::kRemInvReqErr;
      break;
    }
  }
  e.opcode = wc_opcode_of(wr.opcode);
  e.what = std::string("fault: ") + res_.fault;
  fault_posted_ = true;
  schedule_send(tx, wr, sgl, e, t);
  return true;
}

// --- oracle ------------------------------------------------------------------

}  // namespace prop
}  // namespace sroce::sim
