#include "ud_port.h"

#include <arpa/inet.h>

#include <cerrno>
#include <cstring>
#include <ctime>

namespace sroce::pingmesh {

namespace {

Error fail(const std::string& what, int err) {
  return Error{err ? err : EIO, what + ": " + std::strerror(err ? err : EIO)};
}

constexpr size_t kAhCacheMax = 4096;

}  // namespace

bool parse_gid(const std::string& addr, Gid& out) {
  out.fill(0);
  in_addr a4{};
  if (inet_pton(AF_INET, addr.c_str(), &a4) == 1) {
    out[10] = out[11] = 0xff;
    std::memcpy(out.data() + 12, &a4, 4);
    return true;
  }
  return inet_pton(AF_INET6, addr.c_str(), out.data()) == 1;
}

std::string gid_text(const Gid& g) {
  static const uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  char s[INET6_ADDRSTRLEN] = "";
  if (std::memcmp(g.data(), kMapped, 12) == 0)
    inet_ntop(AF_INET, g.data() + 12, s, sizeof(s));
  else
    inet_ntop(AF_INET6, g.data(), s, sizeof(s));
  return s;
}

UdPort::~UdPort() {
  for (auto& [k, ah] : ahs_) ibv_destroy_ah(ah);
  if (qp_) ibv_destroy_qp(qp_);
  if (cq_) ibv_destroy_cq(cq_);
  if (mr_) ibv_dereg_mr(mr_);
  if (channel_) ibv_destroy_comp_channel(channel_);
  if (pd_) ibv_dealloc_pd(pd_);
  if (ctx_) ibv_close_device(ctx_);
}

std::string UdPort::device_name() const { return ctx_ ? ibv_get_device_name(ctx_->device) : ""; }

uint64_t UdPort::host_ns() const {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

uint64_t UdPort::to_ns(uint64_t raw) const {
  if (clock_khz_ == 0 || clock_khz_ == 1000000) return raw;
  return static_cast<uint64_t>(static_cast<unsigned __int128>(raw) * 1000000u / clock_khz_);
}

Result<void> UdPort::open(const std::string& dev, int gid_index, const std::string& addr) {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (!list || n == 0) {
    if (list) ibv_free_device_list(list);
    return Error{ENODEV, "no RDMA device (on sroce: run under sroce-run, or load rdma_sroce)"};
  }
  ibv_device* d = nullptr;
  for (int i = 0; i < n; ++i)
    if (dev.empty() || dev == ibv_get_device_name(list[i])) {
      d = list[i];
      break;
    }
  if (!d) {
    ibv_free_device_list(list);
    return Error{ENODEV, "no RDMA device named " + dev};
  }
  ctx_ = ibv_open_device(d);
  ibv_free_device_list(list);
  if (!ctx_) return fail("ibv_open_device", errno);

  // The GID: the one whose address is `addr`, else the index given, else 0.
  Gid want{};
  const bool have_want = !addr.empty() && parse_gid(addr, want);
  gid_index_ = gid_index >= 0 ? gid_index : 0;
  if (gid_index < 0 && have_want) {
    ibv_port_attr pa{};
    const int len = ibv_query_port(ctx_, 1, &pa) == 0 ? pa.gid_tbl_len : 16;
    for (int i = 0; i < len; ++i) {
      ibv_gid g{};
      if (ibv_query_gid(ctx_, 1, i, &g) != 0) continue;
      if (std::memcmp(g.raw, want.data(), 16) == 0) {
        gid_index_ = i;
        break;
      }
    }
  }
  ibv_gid g{};
  if (ibv_query_gid(ctx_, 1, gid_index_, &g) != 0) return fail("ibv_query_gid", errno);
  std::memcpy(gid_.data(), g.raw, 16);

  ibv_device_attr_ex dx{};
  if (ibv_query_device_ex(ctx_, nullptr, &dx) == 0) clock_khz_ = dx.hca_core_clock;

  pd_ = ibv_alloc_pd(ctx_);
  if (!pd_) return fail("ibv_alloc_pd", errno);
  channel_ = ibv_create_comp_channel(ctx_);  // optional: without it the agent sleeps 1 ms
  const uint32_t cqe = 2 * (kRecvDepth + kSendDepth);
  ibv_cq_init_attr_ex ca{};
  ca.cqe = cqe;
  ca.channel = channel_;
  ca.wc_flags = IBV_WC_EX_WITH_COMPLETION_TIMESTAMP | IBV_WC_EX_WITH_SRC_QP | IBV_WC_EX_WITH_BYTE_LEN;
  if (clock_khz_ != 0) cqx_ = ibv_create_cq_ex(ctx_, &ca);
  if (cqx_) {
    hw_ts_ = true;
    cq_ = ibv_cq_ex_to_cq(cqx_);
  } else {
    cq_ = ibv_create_cq(ctx_, static_cast<int>(cqe), nullptr, channel_, 0);
    if (!cq_) return fail("ibv_create_cq", errno);
  }
  buf_.assign((kRecvDepth + kSendDepth) * kSlot, 0);
  mr_ = ibv_reg_mr(pd_, buf_.data(), buf_.size(), IBV_ACCESS_LOCAL_WRITE);
  if (!mr_) return fail("ibv_reg_mr", errno);

  ibv_qp_init_attr qa{};
  qa.send_cq = cq_;
  qa.recv_cq = cq_;
  qa.qp_type = IBV_QPT_UD;
  qa.cap.max_send_wr = kSendDepth;
  qa.cap.max_recv_wr = kRecvDepth;
  qa.cap.max_send_sge = 1;
  qa.cap.max_recv_sge = 1;
  qp_ = ibv_create_qp(pd_, &qa);
  if (!qp_) return fail("ibv_create_qp (UD)", errno);
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.pkey_index = 0;
  a.port_num = 1;
  a.qkey = kProbeQkey;
  if (int e = ibv_modify_qp(qp_, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY))
    return fail("modify_qp INIT", e);
  a = {};
  a.qp_state = IBV_QPS_RTR;
  if (int e = ibv_modify_qp(qp_, &a, IBV_QP_STATE)) return fail("modify_qp RTR", e);
  a = {};
  a.qp_state = IBV_QPS_RTS;
  a.sq_psn = 0;
  if (int e = ibv_modify_qp(qp_, &a, IBV_QP_STATE | IBV_QP_SQ_PSN)) return fail("modify_qp RTS", e);
  for (uint32_t i = 0; i < kRecvDepth; ++i)
    if (int e = post_recv(i)) return fail("ibv_post_recv", e);
  if (channel_) ibv_req_notify_cq(cq_, 0);
  return {};
}

int UdPort::post_recv(uint32_t slot) {
  ibv_sge s{};
  s.addr = reinterpret_cast<uintptr_t>(buf_.data() + slot * kSlot);
  s.length = kSlot;
  s.lkey = mr_->lkey;
  ibv_recv_wr wr{};
  wr.wr_id = make_wr_id(WrKind::kRecv, slot);
  wr.sg_list = &s;
  wr.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  return ibv_post_recv(qp_, &wr, &bad);
}

ibv_ah* UdPort::ah_for(const Gid& dgid, uint32_t label, int& err) {
  const auto key = std::make_pair(dgid, label);
  auto it = ahs_.find(key);
  if (it != ahs_.end()) return it->second;
  if (ahs_.size() >= kAhCacheMax) {
    ++ah_full_;
    err = ENOMEM;
    return nullptr;
  }
  ibv_ah_attr aa{};
  aa.is_global = 1;
  aa.port_num = 1;
  std::memcpy(aa.grh.dgid.raw, dgid.data(), 16);
  aa.grh.sgid_index = static_cast<uint8_t>(gid_index_);
  aa.grh.hop_limit = 64;
  aa.grh.flow_label = label;
  ibv_ah* ah = ibv_create_ah(pd_, &aa);
  if (!ah) {
    err = errno ? errno : EIO;
    return nullptr;
  }
  ahs_.emplace(key, ah);
  return ah;
}

int UdPort::send(const Gid& dgid, uint32_t dqpn, uint32_t label, const ProbeMsg& m, uint64_t wr_id) {
  if (outstanding_ >= kSendDepth) return EAGAIN;
  int err = 0;
  ibv_ah* ah = ah_for(dgid, label, err);
  if (!ah) return err;
  const uint32_t slot = kRecvDepth + (send_next_ % kSendDepth);
  uint8_t* p = buf_.data() + slot * kSlot;
  encode(m, p);
  ibv_sge s{};
  s.addr = reinterpret_cast<uintptr_t>(p);
  s.length = kProbeLen;
  s.lkey = mr_->lkey;
  ibv_send_wr wr{};
  wr.wr_id = wr_id;
  wr.sg_list = &s;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.ud.ah = ah;
  wr.wr.ud.remote_qpn = dqpn;
  wr.wr.ud.remote_qkey = kProbeQkey;
  ibv_send_wr* bad = nullptr;
  if (int e = ibv_post_send(qp_, &wr, &bad)) return e;
  ++send_next_;
  ++outstanding_;
  return 0;
}

namespace {

// The sender of a UD receive from its GRH area (IBA 11.4.1.1): over RoCEv2/IPv4 the last 20
// bytes are the IPv4 header (A17.4.5.2), over IPv6 the 40 bytes are the IPv6 header.
Gid grh_source(const uint8_t* g) {
  Gid out{};
  if ((g[20] >> 4) == 4) {
    out[10] = out[11] = 0xff;
    std::memcpy(out.data() + 12, g + 20 + 12, 4);
  } else {
    std::memcpy(out.data(), g + 8, 16);
  }
  return out;
}

}  // namespace

size_t UdPort::poll(std::vector<Completion>& out, size_t max) {
  out.clear();
  for (uint32_t slot : repost_) post_recv(slot);
  repost_.clear();
  auto fill = [&](uint64_t wr_id, bool ok, bool is_recv, uint64_t ts, uint32_t src_qp, uint32_t len) {
    Completion c;
    c.wr_id = wr_id;
    c.ok = ok;
    c.recv = is_recv;
    c.ts_ns = ts;
    if (is_recv) {
      const auto slot = static_cast<uint32_t>(wr_value(wr_id));
      const uint8_t* b = buf_.data() + slot * kSlot;
      c.src_qp = src_qp;
      if (ok && len >= kGrhLen) {
        c.src = grh_source(b);
        c.payload = b + kGrhLen;
        c.len = len - static_cast<uint32_t>(kGrhLen);
      }
      repost_.push_back(slot);
    } else if (outstanding_ > 0) {
      --outstanding_;
    }
    out.push_back(c);
  };
  if (cqx_) {
    ibv_poll_cq_attr pa{};
    if (ibv_start_poll(cqx_, &pa) != 0) return 0;
    do {
      const bool is_recv = wr_kind(cqx_->wr_id) == WrKind::kRecv;
      const bool ok = cqx_->status == IBV_WC_SUCCESS;
      fill(cqx_->wr_id, ok, is_recv, to_ns(ibv_wc_read_completion_ts(cqx_)),
           ok && is_recv ? ibv_wc_read_src_qp(cqx_) : 0, ok ? ibv_wc_read_byte_len(cqx_) : 0);
    } while (out.size() < max && ibv_next_poll(cqx_) == 0);
    ibv_end_poll(cqx_);
  } else {
    ibv_wc wc[32];
    const int got = ibv_poll_cq(cq_, static_cast<int>(std::min<size_t>(max, 32)), wc);
    const uint64_t now = host_ns();
    for (int i = 0; i < got; ++i) {
      const bool is_recv = wr_kind(wc[i].wr_id) == WrKind::kRecv;
      fill(wc[i].wr_id, wc[i].status == IBV_WC_SUCCESS, is_recv, now, wc[i].src_qp, wc[i].byte_len);
    }
  }
  return out.size();
}

void UdPort::arm() {
  if (!channel_) return;
  ibv_cq* ev_cq = nullptr;
  void* ev_ctx = nullptr;
  // The channel fd is non-blocking (set by the agent): this returns at once when no event.
  if (ibv_get_cq_event(channel_, &ev_cq, &ev_ctx) == 0) ibv_ack_cq_events(ev_cq, 1);
  ibv_req_notify_cq(cq_, 0);
}

}  // namespace sroce::pingmesh
