// The kernel path of the service (docs/kmod.md, "What the other components
// must add: sroced"): contexts of rdma_sroce.ko served through its control
// channel with the very handlers of the socket path.
//
// Differences from the socket path, all here or behind `Context::kernel`:
// a context is created by HELLO naming the module's context id and the
// opener's uid/gid/pid (sroce_khello_ext), to which the socket path's uid
// policy applies as to SO_PEERCRED's; replies go back
// as {REPLY, ctx} messages without fds; rings and MRs are the module's memory
// mapped from the channel; completion and async events are channel
// messages; `sgid_index` in address vectors is an index into the kernel's
// GID table, translated to the engine's; CLOSE ends a context, EOF the
// device.
#include <infiniband/verbs.h>
#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "service.h"

namespace sroce::daemon {

namespace {

template <typename T>
bool ext_as(std::span<const std::byte> ext, T& out) {
  if (ext.size() < sizeof(T)) return false;
  memcpy(&out, ext.data(), sizeof(T));
  return true;
}

// Messages read per wakeup: bounds the time the channel holds the loop.
constexpr int kKernelBudget = 256;

}  // namespace

Result<void> Service::attach_kernel(const std::string& ibdev) {
  Reply r;
  (void)op_query_device(r);
  sroce_device_attr attr;
  memcpy(&attr, r.body, sizeof attr);
  auto k = KernelChannel::attach(ibdev, attr);
  if (!k) return k.error();
  kchan_ = std::move(*k);
  env_.watch(kchan_->fd(), key(kKeyKernel, 0));
  env_.watch(kchan_->doorbell_fd(), key(kKeyKernelDoorbell, 0));
  // QP1 for the IPv6 GIDs of the kernel's table: through the datapath when it
  // carries IPv6 (it owns [::]:port then), else through a socket of its own
  // (gsi_socket.h) that shares the channel's key: on_kernel_ready reads both
  // without blocking.
  if (!env_.datapath_ipv6) {
    if (auto g = Gsi6Socket::open(cfg_.datapath.port, env_.netdev); g) {
      gsi6_ = std::move(*g);
      env_.watch(gsi6_->fd(), key(kKeyKernel, 1));
    } else {
      spdlog::warn("sroced: kernel path: {}; MADs of IPv6 GIDs are not carried", g.error().message);
    }
  }
  spdlog::info("sroced: kernel path: attached to {} through {}", ibdev, SROCE_KDEV_PATH);
  return {};
}

void Service::on_kernel_ready(uint32_t events, Time now) {
  if (gsi6_) on_gsi6_ready();
  alignas(8) std::byte buf[SROCE_KMSG_MAX + 64];
  for (int i = 0; i < kKernelBudget && kchan_; ++i) {
    ssize_t n = kchan_->read_message(buf);
    if (n == -EAGAIN || n == -EINTR) break;
    if (n == 0) {
      kernel_detach("the device is gone (rdma link delete, or its netdev went away)");
      return;
    }
    if (n < 0) {
      kernel_detach(strerror(static_cast<int>(-n)));
      return;
    }
    sroce_kmsg km;
    if (static_cast<size_t>(n) < sizeof km) {
      ++stats_.ctl_garbage;
      continue;
    }
    memcpy(&km, buf, sizeof km);
    std::span<std::byte> body{buf + sizeof km, static_cast<size_t>(n) - sizeof km};
    switch (km.kind) {
      case SROCE_KMSG_REQUEST:
        on_kernel_request(km.ctx, body, now);
        break;
      case SROCE_KMSG_CLOSE:
        if (auto it = kctx_.find(km.ctx); it != kctx_.end())
          close_context(it->second, "closed by the kernel");
        break;
      case SROCE_KMSG_GID: {
        sroce_kgid g;
        if (ext_as(body, g)) kchan_->on_gid(g);
        break;
      }
      case SROCE_KMSG_GSI_SEND:
        on_gsi_send(body);
        break;
      default:
        ++stats_.ctl_garbage;
        break;
    }
  }
  if (kchan_ && (events & EPOLLERR)) kernel_detach("channel error");
}

void Service::on_gsi_send(std::span<const std::byte> body) {
  // A MAD of QP1 (docs/kmod.md, "The GSI QP"): queued as one UD datagram for
  // the loop's transmit step; a full queue drops it as a congested fabric
  // would (UD, IBA 9.7.7; ib_mad retries on its own timeouts).
  sroce_kgsi h;
  if (!ext_as(body, h) || body.size() != sizeof h + h.len) {
    ++stats_.ctl_garbage;
    return;
  }
  Gid dgid;
  memcpy(dgid.raw, h.dgid, 16);
  if (!dgid.is_ipv4() && !env_.datapath_ipv6) {
    // IPv6 GIDs: QP1's own socket, at once (this datapath carries IPv4 only).
    alignas(8) std::byte pkt[kGsiMaxPacket];
    PacketMeta meta;
    size_t len = gsi_encode(h, body.subspan(sizeof h), cfg_.datapath.port, gsi6_psn_++, pkt, meta);
    int rc = len && gsi6_ ? gsi6_->send(std::span(pkt, len), meta) : -EAFNOSUPPORT;
    if (rc == 0) {
      ++stats_.gsi_sent;
    } else {
      ++stats_.gsi_dropped;
      spdlog::debug("kernel path: QP1 MAD over IPv6 to QP {}: {}", h.remote_qpn, strerror(-rc));
    }
    return;
  }
  if (gsi_tx_.push(h, body.subspan(sizeof h), cfg_.datapath.port)) {
    ++stats_.gsi_sent;
  } else {
    ++stats_.gsi_dropped;
    spdlog::debug("kernel path: QP1 MAD to QP {} dropped ({} queued)", h.remote_qpn,
                  gsi_tx_.size());
  }
}

bool Service::on_gsi_packet(std::span<const std::byte> payload, const PacketMeta& meta) {
  if (!kchan_ || !gsi_is_qp1(payload)) return false;
  sroce_kgsi h;
  std::span<const std::byte> mad;
  GsiDrop d = gsi_decode(payload, meta, true, h, mad);
  if (d != GsiDrop::kNone) {
    ++stats_.gsi_rx_dropped;
    spdlog::debug("kernel path: datagram for QP1 dropped: {}", to_string(d));
    return true;
  }
  int rc = kchan_->write_message(SROCE_KMSG_GSI_RECV, 0, &h, sizeof h, mad.data(), mad.size());
  if (rc != 0) {
    ++stats_.gsi_rx_dropped;
    spdlog::debug("kernel path: GSI_RECV: {}", strerror(-rc));
    return true;
  }
  ++stats_.gsi_received;
  return true;
}

void Service::on_gsi6_ready() {
  alignas(8) std::byte buf[Engine::kMaxPacket];
  for (int i = 0; i < kKernelBudget; ++i) {
    PacketMeta meta;
    ssize_t n = gsi6_->recv(buf, meta);
    if (n == -EAGAIN || n == -EWOULDBLOCK) return;
    if (n < 0) {
      ++stats_.gsi_rx_dropped;
      continue;
    }
    // Only QP1 is served over IPv6 (the engine's GIDs are IPv4).
    if (!on_gsi_packet(std::span(buf, static_cast<size_t>(n)), meta)) ++stats_.gsi_rx_dropped;
  }
}

std::optional<TxPacket> Service::poll_gsi_transmit(std::span<std::byte> out, Time now) {
  return gsi_tx_.pop(out, now);
}

int Service::kernel_hello(uint32_t kctx, std::span<const std::byte> body, Reply& r) {
  sroce_hello req;
  sroce_khello_ext who;
  if (!ext_as(body, req)) return -EINVAL;
  if (req.abi_version != SROCE_ABI_VERSION) return -EPROTONOSUPPORT;
  if (body.size() != sizeof req + sizeof who) return -EINVAL;
  memcpy(&who, body.data() + sizeof req, sizeof who);
  if (auto old = kctx_.find(kctx); old != kctx_.end()) {
    // The module hands out an id only when it has no context under it: one
    // here is a leftover (a HELLO it gave up on, a CLOSE lost): drop it.
    spdlog::warn("kernel context {}: opened again; dropping the stale context {}", kctx,
                 old->second);
    close_context(old->second, "stale: its kernel id was opened again");
  }
  // The socket path's uid policy (SO_PEERCRED there, the module's word here).
  if (!uid_allowed(who.uid, who.gid)) {
    ++stats_.ctl_refused;
    spdlog::warn("kernel context {}: pid {} uid {} refused by the uid policy (control.allow_*)",
                 kctx, who.pid, who.uid);
    return -EACCES;
  }
  // Per-uid limits (secwire's limits module) plug in here, with who.uid, as
  // on the socket path's accept.
  if (free_tags_.empty()) {
    ++stats_.ctl_refused;
    spdlog::warn("kernel context {}: refused: control.max_contexts ({}) reached", kctx,
                 cfg_.control.max_contexts);
    return -EMFILE;
  }
  auto c = std::make_unique<Context>();
  c->id = next_context_id_++;
  c->kernel = true;
  c->kctx = kctx;
  c->pid = static_cast<pid_t>(who.pid);
  c->uid = who.uid;
  c->gid = who.gid;
  c->hello = true;
  c->tag = free_tags_.back();
  free_tags_.pop_back();
  mem_.attach_mapped(c->tag);
  ++stats_.contexts_opened;
  spdlog::info("context {}: kernel context {} opened (pid {} uid {})", c->id, kctx, who.pid,
               who.uid);
  auto& resp = r.as<sroce_hello_resp>();
  resp.abi_version = SROCE_ABI_VERSION;
  resp.context = c->id;
  kctx_[kctx] = c->id;
  contexts_.emplace(c->id, std::move(c));
  return 0;
}

void Service::on_kernel_request(uint32_t kctx, std::span<std::byte> msg, Time now) {
  sroce_msg_hdr h;
  if (msg.size() < sizeof h) {
    ++stats_.ctl_garbage;
    return;
  }
  memcpy(&h, msg.data(), sizeof h);
  if (h.magic != SROCE_ABI_MAGIC || h.len != msg.size() - sizeof h || h.op < SROCE_OP_HELLO ||
      h.op >= SROCE_OP_COUNT) {
    ++stats_.ctl_garbage;
    return;
  }
  std::span<std::byte> body = msg.subspan(sizeof h);
  ++stats_.ctl_requests;
  Reply r;
  int status = 0;
  auto it = kctx_.find(kctx);
  Context* c = it == kctx_.end() ? nullptr : find(it->second);
  if (h.op == SROCE_OP_HELLO) {
    status = kernel_hello(kctx, body, r);
  } else if (!c) {
    status = -EPROTO;  // HELLO comes first
  } else if (h.op == SROCE_OP_CREATE_COMP_CHANNEL || h.op == SROCE_OP_DESTROY_COMP_CHANNEL ||
             h.op == SROCE_OP_STATS) {
    status = -EOPNOTSUPP;  // the channels are the kernel's own
  } else {
    ++c->requests;
    // Address vectors name the kernel's GID table on this path.
    if (h.op == SROCE_OP_CREATE_AH && body.size() >= sizeof(sroce_create_ah)) {
      auto* a = reinterpret_cast<sroce_create_ah*>(body.data());
      status = kernel_sgid_in(a->attr.sgid_index);
    } else if (h.op == SROCE_OP_MODIFY_QP && body.size() >= sizeof(sroce_modify_qp)) {
      auto* m = reinterpret_cast<sroce_modify_qp*>(body.data());
      if (m->attr_mask & IBV_QP_AV) status = kernel_sgid_in(m->attr.ah_attr.sgid_index);
    }
    if (status == 0) status = dispatch(*c, h.op, body, r, now);
    if (status == 0 && h.op == SROCE_OP_QUERY_QP && r.len >= sizeof(sroce_qp_attr))
      kernel_sgid_out(reinterpret_cast<sroce_qp_attr*>(r.body)->ah_attr.sgid_index);
  }
  for (int i = 0; i < r.nfds; ++i) close(r.fds[i]);
  if (status != 0) ++stats_.ctl_errors;
  if (!kchan_) return;
  sroce_msg_hdr rh{};
  rh.magic = SROCE_ABI_MAGIC;
  rh.op = h.op;
  rh.seq = h.seq;
  rh.status = status;
  size_t blen = status == 0 ? r.len : 0;
  rh.len = static_cast<uint16_t>(blen);
  int rc = kchan_->write_message(SROCE_KMSG_REPLY, kctx, &rh, sizeof rh, r.body, blen);
  if (rc != 0 && rc != -ENOENT)
    spdlog::warn("kernel context {}: reply to op {}: {}", kctx, h.op, strerror(-rc));
  // A HELLO the module did not get an answer to made no context there: none here either.
  if (rc != 0 && h.op == SROCE_OP_HELLO && status == 0) {
    if (auto k = kctx_.find(kctx); k != kctx_.end()) close_context(k->second, "never opened");
  }
}

int Service::kernel_sgid_in(uint8_t& index) {
  auto g = kchan_->gid(index);
  if (!g) {
    spdlog::debug("kernel path: sgid_index {} is not in the kernel's GID table", index);
    return -EINVAL;
  }
  for (size_t i = 0; i < env_.gids.size(); ++i) {
    if (memcmp(env_.gids[i].raw, g->raw, 16) == 0) {
      index = static_cast<uint8_t>(i);
      return 0;
    }
  }
  // The GID exists on the interface but sroced does not send from it (it
  // serves the IPv4 addresses it found at start, docs/sroced.md).
  spdlog::warn(
      "kernel path: sgid_index {} names a GID this sroced does not serve (use an IPv4 GID index)",
      index);
  return -EINVAL;
}

void Service::kernel_sgid_out(uint8_t& index) {
  if (index >= env_.gids.size()) return;
  if (auto k = kchan_->index_of(env_.gids[index])) index = static_cast<uint8_t>(*k);
}

int Service::kernel_map(const sroce_kmap& m, int prot, SharedMemory& out) {
  if (!kchan_) return -ENODEV;
  if (m.bytes == 0 || m.bytes > (1ull << 40)) return -EINVAL;
  int rc = out.map(kchan_->fd(), m.offset, m.bytes, prot);
  if (rc != 0)
    spdlog::warn("kernel path: mmap of region {:#x} ({} bytes): {}", m.offset, m.bytes,
                 strerror(-rc));
  return rc;
}

int Service::kernel_ring(std::span<const std::byte> ext, uint32_t size, uint32_t esz,
                         SharedMemory& out) {
  sroce_kring_ext e;
  if (!ext_as(ext, e)) return -EINVAL;
  if (e.size != size || e.entry_size != esz || e.map.bytes < ShmRing::bytes_for(size, esz)) {
    spdlog::warn("kernel path: ring of {}x{} offered, {}x{} expected", e.size, e.entry_size, size,
                 esz);
    return -EPROTO;
  }
  return kernel_map(e.map, PROT_READ | PROT_WRITE, out);
}

int Service::kernel_qp_rings(std::span<const std::byte> ext, uint32_t sq_size, uint32_t sq_esz,
                             uint32_t rq_size, uint32_t rq_esz, size_t sq_bytes, bool srq,
                             SharedMemory& out) {
  sroce_kqp_ext e;
  if (!ext_as(ext, e)) return -EINVAL;
  size_t total = sq_bytes + (srq ? 0 : ShmRing::bytes_for(rq_size, rq_esz));
  if (e.sq_size != sq_size || e.sq_entry_size != sq_esz || e.rq_size != rq_size ||
      e.rq_entry_size != rq_esz || e.sq_offset != 0 || e.rq_offset != (srq ? ~0ull : sq_bytes) ||
      e.map.bytes < total) {
    spdlog::warn("kernel path: QP rings laid out otherwise than expected (SQ {}x{}, RQ {}x{})",
                 e.sq_size, e.sq_entry_size, e.rq_size, e.rq_entry_size);
    return -EPROTO;
  }
  return kernel_map(e.map, PROT_READ | PROT_WRITE, out);
}

int Service::kernel_mr(std::span<const std::byte> ext, uint64_t length, SharedMemory& out,
                       std::byte*& at, bool& writable) {
  sroce_kmr_ext e;
  if (!ext_as(ext, e)) return -EINVAL;
  if (e.first_byte > e.map.bytes || length > e.map.bytes - e.first_byte) return -EINVAL;
  writable = e.writable != 0;
  int rc = kernel_map(e.map, PROT_READ | (writable ? PROT_WRITE : 0), out);
  if (rc != 0) return rc;
  at = out.base() + e.first_byte;
  return 0;
}

void Service::kernel_detach(const char* why) {
  if (!kchan_) return;
  std::vector<uint32_t> ids;
  for (auto& [id, c] : contexts_)
    if (c->kernel) ids.push_back(id);
  if (ids.empty())
    spdlog::info("sroced: kernel channel of {} closed: {}", kchan_->ibdev(), why);
  else
    spdlog::warn("sroced: kernel channel of {}: {}; dropping {} kernel contexts", kchan_->ibdev(),
                 why, ids.size());
  for (uint32_t id : ids) close_context(id, why);
  env_.unwatch(kchan_->fd());
  env_.unwatch(kchan_->doorbell_fd());
  if (gsi6_) env_.unwatch(gsi6_->fd());
  gsi6_.reset();
  kchan_.reset();
}

}  // namespace sroce::daemon
