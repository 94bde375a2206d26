// The control socket: accepting processes, framing, HELLO and queries,
// tearing a context down when its process goes away.
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstring>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "service.h"

namespace sroce::daemon {

namespace {
// Closing a connection that sends nothing but garbage bounds the work one
// misbehaving process can cause.
constexpr uint32_t kMaxGarbagePerContext = 64;
}  // namespace

Service::Service(ServiceEnv env)
    : env_(std::move(env)), cfg_(*env_.config), engine_(*env_.engine), mem_(*env_.memory) {
  // Tags 1..0xfffe: 0xffff is the daemon's own window (ProcessMemory::kLocalTag), never a context's.
  const uint32_t tags = std::min<uint32_t>(cfg_.control.max_contexts, ProcessMemory::kLocalTag - 1);
  for (uint32_t t = tags; t >= 1; --t) free_tags_.push_back(static_cast<uint16_t>(t));
  wc_scratch_.resize(64);
  sge_scratch_.resize(cfg_.engine.max_sge + 1);
  inline_scratch_.resize(cfg_.engine.max_inline_data + 64);
}

Service::~Service() {
  for (auto& [id, c] : contexts_) destroy_objects(*c);
  if (listen_fd_ >= 0) close(listen_fd_);
  if (bound_) unlink(path_.c_str());
}

Result<void> Service::listen() {
  path_ = cfg_.socket_path();
  auto slash = path_.rfind('/');
  if (slash != std::string::npos && slash > 0) {
    std::string dir = path_.substr(0, slash);
    mkdir(dir.c_str(), 0755);  // /run/sroce; an existing directory is fine
  }
  listen_fd_ = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) return Error{errno, fmt::format("socket(AF_UNIX): {}", strerror(errno))};
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  snprintf(a.sun_path, sizeof a.sun_path, "%s", path_.c_str());
  // A socket file left by a daemon that died is stale if nobody answers on it.
  int probe = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (probe >= 0) {
    bool live = connect(probe, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    close(probe);
    if (live) return Error{EADDRINUSE, fmt::format("{}: another sroced is serving this socket", path_)};
  }
  unlink(path_.c_str());
  if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0)
    return Error{errno, fmt::format("bind({}): {}", path_, strerror(errno))};
  bound_ = true;
  chmod(path_.c_str(), cfg_.control.socket_mode);
  if (::listen(listen_fd_, 64) != 0) return Error{errno, fmt::format("listen({}): {}", path_, strerror(errno))};
  return {};
}

bool Service::uid_allowed(uid_t uid, gid_t gid) const {
  const auto& p = cfg_.control;
  if (uid == 0 && p.allow_root) return true;
  if (uid == geteuid() && p.allow_same_uid) return true;
  for (uint32_t u : p.allow_uids)
    if (u == uid) return true;
  for (uint32_t g : p.allow_gids)
    if (g == gid) return true;
  return false;
}

Context* Service::find(uint32_t id) {
  auto it = contexts_.find(id);
  return it == contexts_.end() ? nullptr : it->second.get();
}

void Service::on_listen_ready(Time now) {
  for (;;) {
    int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) accept_failed(errno, now);  // never a busy loop
      return;
    }
    ucred cred{};
    socklen_t cl = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) != 0) {
      close(fd);
      continue;
    }
    // Refused peers (uid policy, control.max_contexts, limits.contexts_per_uid)
    // are told why and closed at once (service_limits.cc).
    if (int st = admit_connection(cred); st != 0) {
      refuse_connection(fd, st);
      continue;
    }
    auto c = std::make_unique<Context>();
    c->id = next_context_id_++;
    c->sock = fd;
    c->pid = cred.pid;
    c->uid = cred.uid;
    c->gid = cred.gid;
    c->net_raw = cred.uid == 0 || proc_has_net_raw(cred.pid, cred.uid);
    note_accepted(*c, now);
    // The tag names no memory until HELLO brings the process's own mem file (op_hello).
    c->tag = free_tags_.back();
    free_tags_.pop_back();
    ++stats_.contexts_opened;
    spdlog::info("context {}: pid {} uid {} connected", c->id, cred.pid, cred.uid);
    env_.watch(fd, key(kKeySocket, c->id));
    contexts_.emplace(c->id, std::move(c));
  }
}

void Service::on_fd_ready(uint64_t k, uint32_t events, Time now) {
  if ((k >> 32) == kKeyKernel) {
    on_kernel_ready(events, now);
    return;
  }
  if ((k >> 32) == kKeyKernelDoorbell) {
    if (kchan_) kchan_->drain_doorbell();  // the rings are polled every pass
    return;
  }
  uint32_t id = static_cast<uint32_t>(k);
  Context* c = find(id);
  if (!c) return;
  if ((k >> 32) == kKeyDoorbell) {
    uint64_t v;
    while (read(c->doorbell_fd, &v, sizeof v) == sizeof v) {
    }
    return;  // the rings are polled every pass
  }
  // Drain all pending requests before looking at a hang-up: a process may
  // send its last requests and exit.
  for (int i = 0; i < 64; ++i) {
    c = find(id);
    if (!c) return;
    uint64_t before = c->requests + c->garbage;
    handle_message(*c, now);
    c = find(id);
    if (!c || c->requests + c->garbage == before) break;
  }
  c = find(id);
  if (c && (events & (EPOLLHUP | EPOLLRDHUP | EPOLLERR))) close_context(id, "hung up");
}

void Service::handle_message(Context& c, Time now) {
  alignas(8) std::byte buf[SROCE_MAX_MSG + 64];
  alignas(8) unsigned char control[CMSG_SPACE(sizeof(int) * 8)];
  iovec iov{buf, sizeof buf};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  ssize_t n = recvmsg(c.sock, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
  if (n < 0) {
    if (errno != EAGAIN && errno != EINTR) close_context(c.id, "receive error");
    return;
  }
  if (n == 0) {
    close_context(c.id, "closed");
    return;
  }
  // Only HELLO and SHARE_MR take a descriptor (the process's mem file, a memfd); whatever else came is closed
  // after the request (Reply::in_fds).
  Reply r;
  for (cmsghdr* cm = CMSG_FIRSTHDR(&msg); cm; cm = CMSG_NXTHDR(&msg, cm)) {
    if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) {
      size_t nfd = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < nfd; ++i) {
        int fd;
        memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof fd);
        if (r.in_nfds < Reply::kMaxInFds)
          r.in_fds[r.in_nfds++] = fd;
        else
          close(fd);
      }
    }
  }
  struct CloseInFds {
    Reply& r;
    ~CloseInFds() {
      for (int i = 0; i < r.in_nfds; ++i)
        if (r.in_fds[i] >= 0) close(r.in_fds[i]);
    }
  } close_in_fds{r};
  sroce_msg_hdr h;
  bool ok = static_cast<size_t>(n) >= sizeof h && !(msg.msg_flags & MSG_TRUNC);
  if (ok) {
    memcpy(&h, buf, sizeof h);
    ok = h.magic == SROCE_ABI_MAGIC && h.len == static_cast<size_t>(n) - sizeof h && h.op >= SROCE_OP_HELLO &&
         h.op < SROCE_OP_COUNT;
  }
  if (!ok) {
    ++stats_.ctl_garbage;
    if (++c.garbage >= kMaxGarbagePerContext) close_context(c.id, "sent only garbage");
    return;
  }
  ++c.requests;
  ++stats_.ctl_requests;
  int status;
  bool gone = false;
  if (c.refused) {
    status = c.refused;
  } else if (!c.hello && h.op != SROCE_OP_HELLO && h.op != SROCE_OP_STATS) {
    status = -EPROTO;  // HELLO comes first
  } else if (c.hello && !c.kernel && !mem_.alive(c.tag)) {
    // The connecting process exec'd or exited: whoever holds the socket now (a forked
    // child) gets nothing more from this context (docs/security.md, "Memory").
    status = -EIO;
    gone = true;
  } else if ((status = admit_request(c, h.op, {buf + sizeof h, h.len})) == 0) {  // uid_limits.h
    status = dispatch(c, h.op, {buf + sizeof h, h.len}, r, now);
  }
  if (status != 0) ++stats_.ctl_errors;
  uint32_t id = c.id;
  bool refused = c.refused != 0;
  send_reply(c, h, status, r);
  for (int i = 0; i < r.nfds; ++i) close(r.fds[i]);  // our copies of the passed fds
  if (refused && find(id)) close_context(id, "refused");
  if (gone && find(id)) close_gone_context(id);
}

void Service::send_reply(Context& c, const sroce_msg_hdr& req, int status, Reply& r) {
  sroce_msg_hdr h{};
  h.magic = SROCE_ABI_MAGIC;
  h.op = req.op;
  h.seq = req.seq;
  h.status = status;
  size_t body = status == 0 || req.op == SROCE_OP_STATS ? r.len : 0;
  h.len = static_cast<uint16_t>(body);
  iovec iov[2] = {{&h, sizeof h}, {r.body, body}};
  msghdr msg{};
  msg.msg_iov = iov;
  msg.msg_iovlen = body ? 2 : 1;
  alignas(8) unsigned char control[CMSG_SPACE(sizeof(int) * 4)];
  if (status == 0 && r.nfds > 0) {
    msg.msg_control = control;
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * r.nfds);
    cmsghdr* cm = CMSG_FIRSTHDR(&msg);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int) * r.nfds);
    memcpy(CMSG_DATA(cm), r.fds, sizeof(int) * r.nfds);
  }
  // Never block on a process: one that does not read its replies loses its
  // context rather than stall everyone else.
  if (sendmsg(c.sock, &msg, MSG_DONTWAIT | MSG_NOSIGNAL) < 0) close_context(c.id, "reply not deliverable");
}

int Service::fail(Context& c, const char* op, const Error& e) {
  spdlog::debug("context {}: {}: {}", c.id, op, e.message);
  return -(e.code ? e.code : EINVAL);
}

template <typename T>
static bool body_as(std::span<const std::byte> body, T& out) {
  if (body.size() < sizeof(T)) return false;
  memcpy(&out, body.data(), sizeof(T));
  return true;
}

int Service::dispatch(Context& c, uint16_t op, std::span<const std::byte> body, Reply& r, Time now) {
  switch (op) {
    case SROCE_OP_HELLO: return op_hello(c, body, r);
    case SROCE_OP_QUERY_DEVICE: return op_query_device(r);
    case SROCE_OP_QUERY_PORT: return op_query_port(body, r);
    case SROCE_OP_QUERY_GID: return op_query_gid(body, r);
    case SROCE_OP_ALLOC_PD: return op_alloc_pd(c, r);
    case SROCE_OP_DEALLOC_PD: return op_dealloc_pd(c, body);
    case SROCE_OP_REG_MR: return op_reg_mr(c, body, r);
    case SROCE_OP_DEREG_MR: return op_dereg_mr(c, body);
    case SROCE_OP_REREG_MR: return op_rereg_mr(c, body, r);
    case SROCE_OP_SHARE_MR: return op_share_mr(c, body, r);
    case SROCE_OP_ALLOC_MW: return op_alloc_mw(c, body, r);
    case SROCE_OP_DEALLOC_MW: return op_dealloc_mw(c, body);
    case SROCE_OP_CREATE_CQ: return op_create_cq(c, body, r);
    case SROCE_OP_DESTROY_CQ: return op_destroy_cq(c, body);
    case SROCE_OP_RESIZE_CQ: return op_resize_cq(c, body, r);
    case SROCE_OP_CREATE_QP: return op_create_qp(c, body, r);
    case SROCE_OP_MODIFY_QP: return op_modify_qp(c, body, now);
    case SROCE_OP_QUERY_QP: return op_query_qp(c, body, r);
    case SROCE_OP_DESTROY_QP: return op_destroy_qp(c, body, r);
    case SROCE_OP_CREATE_SRQ: return op_create_srq(c, body, r);
    case SROCE_OP_MODIFY_SRQ: return op_modify_srq(c, body);
    case SROCE_OP_QUERY_SRQ: return op_query_srq(c, body, r);
    case SROCE_OP_DESTROY_SRQ: return op_destroy_srq(c, body);
    case SROCE_OP_CREATE_AH: return op_create_ah(c, body, r);
    case SROCE_OP_DESTROY_AH: return op_destroy_ah(c, body);
    case SROCE_OP_CREATE_COMP_CHANNEL: return op_create_channel(c, r);
    case SROCE_OP_DESTROY_COMP_CHANNEL: return op_destroy_channel(c, body);
    case SROCE_OP_STATS: return op_stats(c, body, r);
    default: return -EOPNOTSUPP;
  }
}

int Service::op_hello(Context& c, std::span<const std::byte> body, Reply& r) {
  sroce_hello req;
  if (!body_as(body, req)) return -EINVAL;
  if (req.abi_version != SROCE_ABI_VERSION) {
    spdlog::warn("context {}: pid {} speaks ABI {}, this daemon ABI {}", c.id, c.pid, req.abi_version,
                 SROCE_ABI_VERSION);
    return -EPROTONOSUPPORT;
  }
  if (c.hello) return -EALREADY;
  // The address space: the process's own /proc/<pid>/mem, checked (hello_mem_fd) and from
  // now on the only way the daemon reaches this context's memory.
  if (!(req.flags & SROCE_HELLO_MEM_FD) || body.size() < sizeof req + sizeof(sroce_hello_mem) ||
      r.in_nfds != 1) {
    spdlog::warn("context {}: pid {} sent HELLO without its /proc/self/mem (flags {:#x}, {} fds): refused; "
                 "a libsroce older than this sroced?",
                 c.id, c.pid, req.flags, r.in_nfds);
    return -EPERM;
  }
  sroce_hello_mem hm;
  memcpy(&hm, body.data() + sizeof req, sizeof hm);
  if (int rc = hello_mem_fd(c, r.in_fds[0], hm); rc != 0) return rc;
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) return -errno;
  int db = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (db < 0) {
    int e = errno;
    close(sv[0]);
    close(sv[1]);
    return -e;
  }
  fcntl(sv[0], F_SETFL, O_NONBLOCK);
  mem_.attach(c.tag, r.in_fds[0]);  // owns the fd now
  r.in_fds[0] = -1;
  c.async_fd = sv[0];
  c.doorbell_fd = db;
  c.hello = true;
  env_.watch(db, key(kKeyDoorbell, c.id));
  auto& resp = r.as<sroce_hello_resp>();
  resp.abi_version = SROCE_ABI_VERSION;
  resp.context = c.id;
  r.add_fd(sv[1]);
  r.add_fd(dup(db));
  return 0;
}

int Service::op_query_device(Reply& r) {
  const auto& e = cfg_.engine;
  auto& a = r.as<sroce_device_attr>();
  a.fw_ver = 0;
  a.node_guid = env_.node_guid;
  a.sys_image_guid = env_.node_guid;
  a.max_mr_size = 1ull << 47;
  a.page_size_cap = 0xfffff000;
  a.vendor_id = 0xffffff;  // no IEEE OUI, as Linux rxe reports; 0 makes pyverbs treat the device as unknown
  a.vendor_part_id = 0;
  a.hw_ver = 0;
  a.max_qp = e.max_qps;
  a.max_qp_wr = e.max_qp_wr;
  a.device_cap_flags = IBV_DEVICE_RC_RNR_NAK_GEN | IBV_DEVICE_SHUTDOWN_PORT | IBV_DEVICE_PORT_ACTIVE_EVENT |
                       IBV_DEVICE_SYS_IMAGE_GUID | IBV_DEVICE_SRQ_RESIZE |
                       // memory windows, type 1 and type 2B (engine mw.cc)
                       IBV_DEVICE_MEM_WINDOW | IBV_DEVICE_MEM_WINDOW_TYPE_2B;
  a.max_sge = e.max_sge;
  a.max_cq = e.max_cqs;
  a.max_cqe = e.max_cqe;
  a.max_mr = e.max_mrs;
  a.max_pd = e.max_pds;
  a.max_qp_rd_atom = e.max_rd_atomic;
  a.max_qp_init_rd_atom = e.max_rd_atomic;
  a.max_srq = e.max_srqs;
  a.max_srq_wr = e.max_qp_wr;
  a.max_srq_sge = e.max_sge;
  a.max_ah = e.max_ahs;
  a.max_inline_data = e.max_inline_data;
  a.max_pkeys = 1;
  a.atomic_cap = IBV_ATOMIC_HCA;
  a.phys_port_cnt = 1;
  return 0;
}

int Service::op_query_port(std::span<const std::byte> body, Reply& r) {
  sroce_query_port req;
  if (!body_as(body, req)) return -EINVAL;
  if (req.port_num != 1) return -EINVAL;
  auto& a = r.as<sroce_port_attr>();
  a.state = IBV_PORT_ACTIVE;
  a.max_mtu = IBV_MTU_4096;
  // The largest IB MTU whose packets (IPv4 20 + UDP 8 + BTH 12 + the largest
  // extension header 28 + ICRC 4, + the lossy trailer 28 when offered) fit
  // the interface MTU.
  const uint32_t overhead = 72 + env_.extra_header_bytes;
  uint32_t room = env_.netdev_mtu > overhead ? env_.netdev_mtu - overhead : 0;
  uint32_t mtu = IBV_MTU_256;
  for (uint32_t m = IBV_MTU_4096; m >= IBV_MTU_256; --m) {
    if ((128u << m) <= room) {
      mtu = m;
      break;
    }
  }
  a.active_mtu = mtu;
  a.gid_tbl_len = static_cast<uint32_t>(env_.gids.size());
  a.port_cap_flags = 0;
  a.max_msg_sz = 1u << 31;
  a.pkey_tbl_len = 1;
  a.active_width = 2;   // 4X (IBA 14.2.5.6, PortInfo LinkWidthActive)
  a.active_speed = 32;  // EDR (25 Gbit/s per lane), as soft-RoCE reports on fast links
  a.phys_state = 5;     // LinkUp
  a.link_layer = IBV_LINK_LAYER_ETHERNET;
  return 0;
}

int Service::op_query_gid(std::span<const std::byte> body, Reply& r) {
  sroce_query_gid req;
  if (!body_as(body, req)) return -EINVAL;
  if (req.port_num != 1 || req.index >= env_.gids.size()) return -EINVAL;
  auto& g = r.as<sroce_gid_entry>();
  memcpy(g.gid, env_.gids[req.index].raw, 16);
  g.index = req.index;
  g.gid_type = 1;  // RoCE v2
  return 0;
}

int Service::op_stats(Context& c, std::span<const std::byte> body, Reply& r) {
  uint32_t what = 0;
  if (body.size() >= sizeof what) memcpy(&what, body.data(), sizeof what);
  std::string json = env_.stats_json ? env_.stats_json(what, c.uid) : "{}";
  if (json.size() <= SROCE_MAX_MSG - sizeof(sroce_msg_hdr)) {
    memcpy(r.body, json.data(), json.size());
    r.len = json.size();
    return 0;
  }
  // Too large for one message: hand over a memfd holding the text (see
  // struct sroce_stats_req in the ABI).
  SharedMemory m;
  int rc = m.create("sroce-stats", json.size());
  if (rc != 0) return rc;
  memcpy(m.base(), json.data(), json.size());
  r.len = 0;
  r.add_fd(dup(m.fd()));
  return 0;
}

void Service::close_context(uint32_t id, const char* why) {
  auto it = contexts_.find(id);
  if (it == contexts_.end()) return;
  Context& c = *it->second;
  if (c.kernel) {
    spdlog::info("context {}: kernel context {} {}: destroying {} objects", c.id, c.kctx, why, c.object_count());
    ++stats_.contexts_closed;
  } else if (!c.refused) {
    spdlog::info("context {}: pid {} {}: destroying {} objects", c.id, c.pid, why, c.object_count());
    ++stats_.contexts_closed;
  }
  destroy_objects(c);
  if (c.kernel) kctx_.erase(c.kctx);
  if (c.sock >= 0) {
    env_.unwatch(c.sock);
    close(c.sock);
  }
  if (c.doorbell_fd >= 0) {
    env_.unwatch(c.doorbell_fd);
    close(c.doorbell_fd);
  }
  if (c.async_fd >= 0) close(c.async_fd);
  if (c.tag) {
    mem_.detach(c.tag);
    free_tags_.push_back(c.tag);
  }
  contexts_.erase(it);
}

void Service::shutdown() {
  // Work requests the engine holds complete with IBV_WC_WR_FLUSH_ERR (IBA
  // 10.3.1: a QP in ERR flushes its queues) and reach the CQ rings before the
  // device goes away; what is still in the send rings the provider flushes.
  for (auto& [id, c] : contexts_) {
    for (auto& [qpn, qp] : c->qps) {
      QpAttr err;
      err.qp_state = QpState::kErr;
      (void)engine_.modify_qp(qpn, err, kQpState, now_);
    }
  }
  poll_completions();
  for (auto& [id, c] : contexts_) {
    if (!c->hello) continue;
    // IBV_EVENT_DEVICE_FATAL: the element is unused (the device). The
    // module reports it to kernel contexts itself when the channel closes.
    if (!c->kernel) send_async_event(*c, 0, IBV_EVENT_DEVICE_FATAL);
    for (auto& [h, cq] : c->cqs) cq.ring.set_error();
    for (auto& [h, srq] : c->srqs) srq.ring.set_error();
    for (auto& [q, qp] : c->qps) {
      if (qp.sq.valid()) qp.sq.set_error();
      if (qp.rq.valid()) qp.rq.set_error();
    }
  }
  std::vector<uint32_t> ids;
  for (auto& [id, c] : contexts_) ids.push_back(id);
  for (uint32_t id : ids) close_context(id, "daemon shutting down");
  kernel_detach("daemon shutting down");
  if (listen_fd_ >= 0) {
    env_.unwatch(listen_fd_);
    close(listen_fd_);
    listen_fd_ = -1;
  }
  if (bound_) {
    unlink(path_.c_str());
    bound_ = false;
  }
}

}  // namespace sroce::daemon
