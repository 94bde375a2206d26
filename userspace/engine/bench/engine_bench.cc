// sroce_engine_bench: two engines back to back in one thread, no I/O, to
// measure the engine's per-packet cost through requester + responder +
// completer. Usage:
//   sroce_engine_bench [write|send] [bytes] [seconds] [--icrc] [--copy]
// Default: 4 KiB RDMA WRITEs over a 4096 path MTU, ICRC offloaded (the
// datapath's job on a NIC), payload copy excluded (MemoryAccess does not
// touch memory), which is the configuration of the >= 5 Mpps/core target.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "sroce/engine/engine.h"

using namespace sroce;

namespace {

class BenchMemory : public MemoryAccess {
 public:
  explicit BenchMemory(bool copy) : copy_(copy), buf_(1 << 20) {}
  bool read(uint64_t addr, std::span<std::byte> out) override {
    if (copy_) std::memcpy(out.data(), &buf_[(addr & 0x7ffff)], out.size());
    return true;
  }
  bool write(uint64_t addr, std::span<const std::byte> in) override {
    if (copy_) std::memcpy(&buf_[(addr & 0x7ffff)], in.data(), in.size());
    return true;
  }

 private:
  bool copy_;
  std::vector<std::byte> buf_;
};

struct Side {
  Side(uint32_t ip, uint64_t seed, bool icrc, bool copy, bool lossy, uint16_t lanes)
      : gid(Gid::from_ipv4(ip)), mem(copy) {
    EngineConfig cfg;
    cfg.lossy.enable = lossy;
    cfg.lossy.lanes = lanes;
    cfg.gids = {&gid, 1};
    cfg.seed = seed;
    cfg.icrc_offload = !icrc;
    cfg.max_unacked_psns = 4096;
    eng = std::make_unique<Engine>(cfg, mem);
    pd = *eng->alloc_pd();
    cq = *eng->create_cq(65536);
    mr = *eng->reg_mr(pd, 0x100000, 1 << 20,
                      kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead);
    QpInitAttr a;
    a.send_cq = a.recv_cq = cq;
    a.cap = {4096, 4096, 1, 1, 0};
    qp = *eng->create_qp(pd, a);
  }
  Gid gid;
  BenchMemory mem;
  std::unique_ptr<Engine> eng;
  Handle pd, cq;
  MrKeys mr;
  Qpn qp;
};

void connect(Side& s, const Side& peer) {
  QpAttr a;
  a.qp_state = QpState::kInit;
  a.qp_access_flags = kAccessRemoteWrite | kAccessRemoteRead;
  if (!s.eng->modify_qp(s.qp, a, kQpState | kQpPkeyIndex | kQpPort | kQpAccessFlags, Time::zero())
           .ok())
    std::abort();
  a.qp_state = QpState::kRtr;
  a.ah_attr.dgid = peer.gid;
  a.path_mtu = Mtu::k4096;
  a.dest_qp_num = peer.qp;
  a.rq_psn = 0;
  a.max_dest_rd_atomic = 16;
  a.min_rnr_timer = 1;
  if (!s.eng
           ->modify_qp(s.qp, a,
                       kQpState | kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn | kQpMaxDestRdAtomic |
                           kQpMinRnrTimer,
                       Time::zero())
           .ok())
    std::abort();
  a.qp_state = QpState::kRts;
  a.sq_psn = 0;
  a.timeout = 14;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.max_rd_atomic = 16;
  if (!s.eng
           ->modify_qp(
               s.qp, a,
               kQpState | kQpSqPsn | kQpTimeout | kQpRetryCnt | kQpRnrRetry | kQpMaxQpRdAtomic,
               Time::zero())
           .ok())
    std::abort();
}

}  // namespace

int main(int argc, char** argv) {
  bool send = false, icrc = false, copy = false, lossy = true;
  uint16_t lanes = kDefaultLanes;
  uint32_t bytes = 4096;
  double seconds = 2.0;
  int pos = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--icrc")
      icrc = true;
    else if (a == "--copy")
      copy = true;
    else if (a == "--compat")
      lossy = false;  // compatible mode only (no lossy negotiation)
    else if (a == "--lanes" && i + 1 < argc)
      lanes = static_cast<uint16_t>(std::atoi(argv[++i]));
    else if (pos == 0 && (a == "write" || a == "send"))
      send = a == "send", ++pos;
    else if (pos == 1)
      bytes = static_cast<uint32_t>(std::atoi(a.c_str())), ++pos;
    else if (pos == 2)
      seconds = std::atof(a.c_str()), ++pos;
  }
  if (send && bytes == 4096 && pos < 2) bytes = 64;
  Side a(0x0a000001, 1, icrc, copy, lossy, lanes), b(0x0a000002, 2, icrc, copy, lossy, lanes);
  connect(a, b);
  connect(b, a);

  Sge sge{0x100000, bytes, a.mr.lkey};
  SendWr wr;
  wr.opcode = send ? WrOpcode::kSend : WrOpcode::kRdmaWrite;
  wr.sgl = {&sge, 1};
  wr.rdma.remote_addr = 0x100000;
  wr.rdma.rkey = b.mr.rkey;
  Sge rsge{0x100000, 4096, b.mr.lkey};
  RecvWr rwr;
  rwr.sgl = {&rsge, 1};

  constexpr size_t kBurst = 32;
  std::vector<std::byte> bufs(kBurst * Engine::kMaxPacket);
  size_t lens[kBurst];
  PacketMeta metas[kBurst];
  std::vector<Wc> wc(256);
  uint64_t packets = 0, msgs = 0, posted = 0, recvs = 0;
  Time now = Time::zero();
  const auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  for (uint64_t iter = 0;; ++iter) {
    // Keep the send queue full; signal one WR in 64 (unsignaled in between).
    while (posted - msgs < 1024) {
      wr.send_flags = (posted % 64 == 63) ? uint32_t{kSendSignaled} : 0u;
      if (send && recvs < posted + 1) {
        while (b.eng->post_recv(b.qp, rwr) == 0) ++recvs;
      }
      if (a.eng->post_send(a.qp, wr, now) != 0) break;
      ++posted;
    }
    // A datapath loop: a tx burst from each side is the other side's rx burst.
    for (int k = 0; k < 8; ++k) {
      size_t na = 0, nb = 0;
      while (na < kBurst) {
        auto tx = a.eng->poll_transmit(
            std::span(&bufs[na * Engine::kMaxPacket], Engine::kMaxPacket), now);
        if (!tx) break;
        lens[na] = tx->len;
        metas[na++] = tx->meta;
      }
      for (size_t i = 0; i < na; ++i)
        b.eng->on_packet(std::span(&bufs[i * Engine::kMaxPacket], lens[i]), metas[i], now);
      while (nb < kBurst) {
        auto tx = b.eng->poll_transmit(
            std::span(&bufs[nb * Engine::kMaxPacket], Engine::kMaxPacket), now);
        if (!tx) break;
        lens[nb] = tx->len;
        metas[nb++] = tx->meta;
      }
      for (size_t i = 0; i < nb; ++i)
        a.eng->on_packet(std::span(&bufs[i * Engine::kMaxPacket], lens[i]), metas[i], now);
      packets += na + nb;
      if (na + nb == 0) break;
    }
    for (int n; (n = a.eng->poll_cq(a.cq, wc)) > 0;)
      for (int i = 0; i < n; ++i) {
        if (wc[static_cast<size_t>(i)].status != WcStatus::kSuccess) {
          std::fprintf(stderr, "completion error %s\n",
                       to_string(wc[static_cast<size_t>(i)].status));
          return 1;
        }
        msgs += 64;
      }
    if (send)
      for (int n; (n = b.eng->poll_cq(b.cq, wc)) > 0;) {
      }
    now += Duration::nanos(100);
    if ((iter & 1023) == 0 && elapsed() >= seconds) break;
  }
  const double t = elapsed();
  const uint64_t req = a.eng->stats().tx_packets, acks = b.eng->stats().tx_packets;
  std::printf(
      "%s %u B, icrc %s, payload copy %s, %s: %.2f M packets/s (%.2f M requests/s + %.2f M "
      "ACKs/s), %.2f M msgs/s, %.2f Gbit/s\n",
      send ? "SEND" : "WRITE", bytes, icrc ? "on" : "offloaded", copy ? "on" : "off",
      lossy ? "lossy mode offered" : "compatible mode",
      packets / t / 1e6, req / t / 1e6, acks / t / 1e6, msgs / t / 1e6,
      msgs * 8.0 * bytes / t / 1e9);
  return 0;
}
