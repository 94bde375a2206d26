#include "sroce/sim/flows.h"

#include <algorithm>
#include <cstdio>

namespace sroce::sim {

namespace {
// wr_id = flow index << kChunkBits | chunk index.
constexpr uint32_t kChunkBits = 24;
}  // namespace

FlowRunner::FlowRunner(Network& net, std::vector<Host*> hosts, const FlowRunnerConfig& cfg)
    : net_(net), hosts_(std::move(hosts)), cfg_(cfg) {
  cfg_.chunk_bytes = std::max<uint32_t>(cfg_.chunk_bytes, 1);
  cfg_.max_qps_per_pair = std::max<uint32_t>(cfg_.max_qps_per_pair, 1);
  cfg_.qp.traffic_class = cfg_.traffic_class;
}

Result<void> FlowRunner::setup() {
  hs_.resize(hosts_.size());
  idle_.resize(hosts_.size());
  idle_head_.assign(hosts_.size(), 0);
  idle_count_.assign(hosts_.size(), 0);
  open_.assign(hosts_.size(), 0);
  pending_.resize(hosts_.size());
  pending_head_.assign(hosts_.size(), 0);
  for (size_t i = 0; i < hosts_.size(); ++i) {
    Host& h = *hosts_[i];
    HostState& s = hs_[i];
    auto pd = h.engine().alloc_pd();
    if (!pd) return Error{pd.error().code, h.name() + " alloc_pd: " + pd.error().message};
    s.pd = *pd;
    auto cq = h.engine().create_cq(cfg_.qp.cqe);
    if (!cq) return Error{cq.error().code, h.name() + " create_cq: " + cq.error().message};
    s.cq = *cq;
    h.watch_cq(s.cq);
    const uint32_t acc = kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead;
    auto keys = reg_region(h, s.pd, h.memory().base(), h.memory().size(), acc);
    if (!keys) return keys.error();
    s.keys = *keys;
    if (!cfg_.verify) {
      s.src_buf = h.memory().alloc(cfg_.chunk_bytes, 4096);
      s.dst_buf = h.memory().alloc(cfg_.chunk_bytes, 4096);
    }
    const auto idx = static_cast<uint32_t>(i);
    h.on_completion([this, idx](Host&, Handle, const Wc& wc, Time now) { on_wc(idx, wc, now); });
  }
  return {};
}

void FlowRunner::fill(uint64_t flow, std::span<std::byte> out) const {
  for (size_t i = 0; i < out.size(); i += 8) {
    const uint64_t w = Rng::mix(flow * 0x9e3779b97f4a7c15ull ^ (i / 8));
    for (size_t b = 0; b < 8 && i + b < out.size(); ++b)
      out[i + b] = static_cast<std::byte>(w >> (8 * b));
  }
}

Result<void> FlowRunner::add(const std::vector<FlowSpec>& flows) {
  Simulator& sim = net_.sim();
  for (const FlowSpec& f : flows) {
    if (f.src >= hosts_.size() || f.dst >= hosts_.size() || f.src == f.dst)
      return Error{EINVAL, "flow " + std::to_string(flows_.size()) + ": bad hosts " +
                               std::to_string(f.src) + " -> " + std::to_string(f.dst)};
    const uint64_t index = flows_.size();
    FlowRecord r;
    r.spec = f;
    r.spec.bytes = std::max<uint64_t>(f.bytes, 1);
    r.wrs = static_cast<uint32_t>((r.spec.bytes + cfg_.chunk_bytes - 1) / cfg_.chunk_bytes);
    if (r.wrs >= (1u << kChunkBits)) return Error{EINVAL, "flow too large for chunk_bytes"};
    flows_.push_back(r);
    flow_qp_.push_back(0);
    waiting_next_.push_back(kNoFlow);
    if (cfg_.verify) {
      Regions g;
      g.src = hosts_[f.src]->memory().alloc(r.spec.bytes, 64);
      g.dst = hosts_[f.dst]->memory().alloc(r.spec.bytes, 64);
      fill(index, hosts_[f.src]->memory().at(g.src, r.spec.bytes));
      auto d = hosts_[f.dst]->memory().at(g.dst, r.spec.bytes);
      std::fill(d.begin(), d.end(), std::byte{0});
      regions_.push_back(g);
    }
    sim.call_at(std::max(f.start, sim.now()), [this, index](Time now) { start_flow(index, now); });
  }
  return {};
}

std::optional<std::pair<Engine*, Qpn>> FlowRunner::sender_qp(uint64_t index) const {
  // flow_qp_ is set when the flow starts; before, it names QP 0 (the caller
  // checks the flow's start time).
  if (index >= flows_.size() || flow_qp_[index] >= qps_.size()) return std::nullopt;
  const QpEnd& c = qps_[flow_qp_[index]].client;
  return std::make_pair(c.engine, c.qpn);
}

Result<uint32_t> FlowRunner::new_qp(uint32_t src, uint32_t dst) {
  Qp q;
  QpEnd* ends[2] = {&q.client, &q.server};
  const uint32_t who[2] = {src, dst};
  for (int k = 0; k < 2; ++k) {
    Host& h = *hosts_[who[k]];
    const HostState& s = hs_[who[k]];
    QpInitAttr ia;
    ia.qp_type = QpType::kRc;
    ia.send_cq = ia.recv_cq = s.cq;
    // The server end posts nothing: no send queue, so no lossy send window
    // (the engine holds only the responder half of lossy mode for it).
    ia.cap.max_send_wr = k == 0 ? cfg_.qp.send_wr : 0;
    ia.cap.max_recv_wr = 1;  // WRITEs consume no receives
    ia.cap.max_send_sge = 1;
    ia.cap.max_recv_sge = 1;
    auto qpn = h.engine().create_qp(s.pd, ia);
    if (!qpn) return Error{qpn.error().code, h.name() + " create_qp: " + qpn.error().message};
    QpEnd& e = *ends[k];
    e.host = &h;
    e.engine = &h.engine();
    e.addr = h.addr();
    e.pd = s.pd;
    e.send_cq = e.recv_cq = s.cq;
    e.qpn = *qpn;
  }
  q.src = src;
  q.dst = dst;
  ++open_[src];
  Rng rng(Rng::mix(net_.sim().seed() ^ (uint64_t{src} << 40 | uint64_t{dst} << 16 | qps_.size())));
  q.client.sq_psn = static_cast<uint32_t>(rng.next() & 0xffffff);
  q.server.sq_psn = static_cast<uint32_t>(rng.next() & 0xffffff);
  const Time now = net_.sim().now();
  if (auto r = connect_qp(q.client, q.server, cfg_.qp, q.server.sq_psn, now); !r) return r.error();
  if (auto r = connect_qp(q.server, q.client, cfg_.qp, q.client.sq_psn, now); !r) return r.error();
  qps_.push_back(q);
  return static_cast<uint32_t>(qps_.size() - 1);
}

void FlowRunner::fail(uint64_t flow, const std::string& why) {
  FlowRecord& r = flows_[flow];
  if (r.error) return;
  r.error = true;
  ++errors_;
  if (first_error_.empty()) first_error_ = "flow " + std::to_string(flow) + ": " + why;
}

bool FlowRunner::close_oldest_idle(uint32_t host) {
  auto& list = idle_[host];
  while (idle_head_[host] < list.size()) {
    const IdleEntry e = list[idle_head_[host]++];
    const Qp& o = qps_[e.qp];
    if (o.idle && o.idle_mark == e.mark) {
      close_qp(e.qp);
      return true;
    }
  }
  return false;
}

void FlowRunner::start_flow(uint64_t index, Time) {
  FlowRecord& r = flows_[index];
  auto& pool = pairs_[uint64_t{r.spec.src} << 32 | r.spec.dst];
  // An idle QP of the pair, else a new one, else the least loaded.
  int64_t pick = -1;
  for (uint32_t q : pool)
    if (qps_[q].outstanding == 0 && qps_[q].queued == 0) {
      pick = q;
      break;
    }
  const uint32_t src = r.spec.src;
  bool may_open = pool.size() < cfg_.max_qps_per_pair;
  if (pick < 0 && may_open && cfg_.max_open_qps_per_host != 0 &&
      open_[src] >= cfg_.max_open_qps_per_host && !close_oldest_idle(src)) {
    if (pool.empty()) {
      // Every QP of the host is busy: wait for one to go idle (became_idle).
      pending_[src].push_back(index);
      ++flows_waited_;
      return;
    }
    may_open = false;  // queue behind the pair's least loaded QP
  }
  ++started_;
  if (pick < 0 && may_open) {
    auto q = new_qp(r.spec.src, r.spec.dst);
    if (!q) return fail(index, q.error().message);
    pool.push_back(*q);
    pick = *q;
  }
  if (pick < 0) {
    auto load = [&](uint32_t q) { return qps_[q].outstanding + qps_[q].queued; };
    pick = pool.front();
    for (uint32_t q : pool)
      if (load(q) < load(static_cast<uint32_t>(pick))) pick = q;
  }
  const auto q = static_cast<uint32_t>(pick);
  Qp& qp = qps_[q];
  if (qp.idle) {
    qp.idle = false;
    ++qp.idle_mark;
    --idle_count_[qp.src];
  }
  flow_qp_[index] = q;
  // Behind the flows already waiting on this QP.
  if (qp.wait_tail == kNoFlow) qp.wait_head = index;
  else waiting_next_[qp.wait_tail] = index;
  qp.wait_tail = index;
  qp.queued += r.wrs;
  post_waiting(q);
}

void FlowRunner::post_waiting(uint32_t q) {
  Qp& qp = qps_[q];
  if (qp.posting) return;  // the outer call goes on with what this one would post
  qp.posting = true;
  while (qp.wait_head != kNoFlow && qp.outstanding < cfg_.qp.send_wr) {
    const uint64_t index = qp.wait_head;
    FlowRecord& r = flows_[index];
    const uint32_t c = r.wrs_posted;
    if (c + 1 >= r.wrs || r.error) {  // its last WRITE (or none left): off the list
      qp.wait_head = waiting_next_[index];
      if (qp.wait_head == kNoFlow) qp.wait_tail = kNoFlow;
    }
    if (r.error) {
      qp.queued -= r.wrs - c;
      continue;
    }
    const HostState& s = hs_[r.spec.src];
    const HostState& d = hs_[r.spec.dst];
    const uint64_t off = uint64_t{c} * cfg_.chunk_bytes;
    const auto len =
        static_cast<uint32_t>(std::min<uint64_t>(cfg_.chunk_bytes, r.spec.bytes - off));
    const uint64_t src = cfg_.verify ? regions_[index].src + off : s.src_buf;
    const uint64_t dst = cfg_.verify ? regions_[index].dst + off : d.dst_buf;
    const Sge sge{src, len, s.keys.lkey};
    SendWr wr;
    wr.wr_id = index << kChunkBits | c;
    wr.opcode = WrOpcode::kRdmaWrite;
    wr.send_flags = kSendSignaled;
    wr.sgl = std::span<const Sge>(&sge, 1);
    wr.rdma.remote_addr = dst;
    wr.rdma.rkey = d.keys.rkey;
    ++r.wrs_posted;
    --qp.queued;
    ++qp.outstanding;
    if (const int rc = qp.client.host->post_send(qp.client.qpn, wr); rc != 0) {
      --qp.outstanding;
      fail(index, "post_send failed, errno " + std::to_string(rc));
      if (c + 1 < r.wrs) {  // still on the list: the rest is dropped when it comes up
        qp.queued -= r.wrs - c - 1;
        r.wrs_posted = r.wrs;
      }
    }
  }
  qp.posting = false;
}

void FlowRunner::start_pending(uint32_t h) {
  if (pending_head_[h] >= pending_[h].size()) return;
  // A flow of this host waits for a QP: it starts now, as its own event (we
  // are inside the engine's completion callback), and takes the freed place.
  const uint64_t next = pending_[h][pending_head_[h]++];
  if (pending_head_[h] == pending_[h].size()) {
    pending_[h].clear();
    pending_head_[h] = 0;
  }
  net_.sim().call_at(net_.sim().now(), [this, next](Time now) { start_flow(next, now); });
}

void FlowRunner::became_idle(uint32_t q) {
  Qp& qp = qps_[q];
  const bool bounded = cfg_.idle_qps_per_host != 0 || cfg_.max_open_qps_per_host != 0;
  if (!bounded || qp.idle || qp.closed) return;
  qp.idle = true;
  const uint32_t h = qp.src;
  idle_[h].push_back({q, qp.idle_mark});
  ++idle_count_[h];
  start_pending(h);
  // Close the QPs idle longest, past the bound (entries of QPs that were
  // reused since are stale: their mark moved on).
  while (cfg_.idle_qps_per_host != 0 && idle_count_[h] > cfg_.idle_qps_per_host) {
    const IdleEntry e = idle_[h][idle_head_[h]++];
    const Qp& o = qps_[e.qp];
    if (o.idle && o.idle_mark == e.mark) close_qp(e.qp);
  }
  if (idle_head_[h] > 64 && idle_head_[h] * 2 > idle_[h].size()) {
    idle_[h].erase(idle_[h].begin(), idle_[h].begin() + static_cast<std::ptrdiff_t>(idle_head_[h]));
    idle_head_[h] = 0;
  }
}

void FlowRunner::close_qp(uint32_t q) {
  Qp& qp = qps_[q];
  qp.closed = true;
  --open_[qp.src];
  if (qp.idle) --idle_count_[qp.src];
  qp.idle = false;
  ++qp.idle_mark;
  // Everything it carried is acknowledged; a late duplicate still on the
  // wire is dropped by the peer as for an unknown QP.
  for (QpEnd* e : {&qp.client, &qp.server})
    if (auto r = e->engine->destroy_qp(e->qpn); !r && first_error_.empty())
      first_error_ = "destroy_qp: " + r.error().message;
  auto& pool = pairs_[uint64_t{qp.src} << 32 | qp.dst];
  pool.erase(std::remove(pool.begin(), pool.end(), q), pool.end());
  ++qps_closed_;
}

void FlowRunner::on_wc(uint32_t host, const Wc& wc, Time now) {
  const uint64_t index = wc.wr_id >> kChunkBits;
  if (index >= flows_.size() || flows_[index].spec.src != host) return;
  FlowRecord& r = flows_[index];
  const uint32_t q = flow_qp_[index];
  Qp& qp = qps_[q];
  if (qp.outstanding > 0) --qp.outstanding;
  if (wc.status != WcStatus::kSuccess) {
    fail(index, std::string("completion status ") + to_string(wc.status));
  } else if (++r.wrs_done == r.wrs && !r.error) {
    r.end = now;
    ++completed_;
    bytes_done_ += r.spec.bytes;
  }
  post_waiting(q);
  if (qp.outstanding == 0 && qp.queued == 0) {
    if (wc.status == WcStatus::kSuccess) {
      became_idle(q);
    } else if (cfg_.max_open_qps_per_host != 0 && !qp.closed) {
      // A QP in error never goes idle: under a window it would hold its
      // place for good and the host's waiting flows would never start.
      close_qp(q);
      start_pending(host);
    }
  }
}

uint64_t FlowRunner::qp_memory_bytes() const {
  uint64_t n = 0;
  for (const Qp& q : qps_)
    if (!q.closed)
      for (const QpEnd* e : {&q.client, &q.server})
        if (auto b = e->engine->qp_memory_bytes(e->qpn)) n += *b;
  return n;
}

bool FlowRunner::verify(std::string* why) const {
  if (!cfg_.verify) return true;
  std::vector<std::byte> want;
  for (uint64_t i = 0; i < flows_.size(); ++i) {
    const FlowRecord& r = flows_[i];
    if (!r.done()) continue;
    want.resize(r.spec.bytes);
    fill(i, want);
    auto got = hosts_[r.spec.dst]->memory().at(regions_[i].dst, r.spec.bytes);
    if (!std::equal(got.begin(), got.end(), want.begin())) {
      const auto mm = std::mismatch(got.begin(), got.end(), want.begin());
      if (why != nullptr)
        *why = "flow " + std::to_string(i) + " differs at byte " +
               std::to_string(mm.first - got.begin());
      return false;
    }
  }
  return true;
}

}  // namespace sroce::sim
