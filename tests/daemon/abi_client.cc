// The test client's side of the sroce ABI.
#include "abi_client.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>

namespace sroce::test {

namespace {
int64_t now_ms() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000 + ts.tv_nsec / 1000000;
}
}  // namespace

AbiClient::~AbiClient() {
  for (auto& m : maps_) munmap(m.base, m.len);
  if (fd_ >= 0) close(fd_);
  if (async_fd_ >= 0) close(async_fd_);
  if (doorbell_fd_ >= 0) close(doorbell_fd_);
}

int AbiClient::connect(const std::string& path) {
  fd_ = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (fd_ < 0) return -errno;
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  snprintf(a.sun_path, sizeof a.sun_path, "%s", path.c_str());
  if (::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return -errno;
  return 0;
}

bool AbiClient::send_raw(const void* p, size_t len) {
  return send(fd_, p, len, MSG_NOSIGNAL) == static_cast<ssize_t>(len);
}

int AbiClient::call(uint16_t op, const void* body, size_t len, void* reply, size_t cap, std::vector<int>* fds,
                    size_t* reply_len) {
  return call_fd(op, body, len, -1, reply, cap, fds, reply_len);
}

int AbiClient::call_fd(uint16_t op, const void* body, size_t len, int send_fd, void* reply, size_t cap,
                       std::vector<int>* fds, size_t* reply_len) {
  sroce_msg_hdr h{};
  h.magic = SROCE_ABI_MAGIC;
  h.op = op;
  h.len = static_cast<uint16_t>(len);
  h.seq = ++seq_;
  std::byte out[SROCE_MAX_MSG];
  memcpy(out, &h, sizeof h);
  if (len) memcpy(out + sizeof h, body, len);
  iovec oiov{out, sizeof h + len};
  msghdr omsg{};
  omsg.msg_iov = &oiov;
  omsg.msg_iovlen = 1;
  alignas(8) unsigned char ocontrol[CMSG_SPACE(sizeof(int))];
  if (send_fd >= 0) {
    omsg.msg_control = ocontrol;
    omsg.msg_controllen = sizeof ocontrol;
    cmsghdr* cm = CMSG_FIRSTHDR(&omsg);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(cm), &send_fd, sizeof(int));
  }
  if (sendmsg(fd_, &omsg, MSG_NOSIGNAL) < 0) {
    // Refused and closed before the request went out: the notice is queued.
    // A reset (the daemon closed with this request unread) comes first.
    sroce_msg_hdr notice{};
    ssize_t r = recv(fd_, &notice, sizeof notice, MSG_DONTWAIT);
    if (r < 0 && errno == ECONNRESET) r = recv(fd_, &notice, sizeof notice, MSG_DONTWAIT);
    if (r == static_cast<ssize_t>(sizeof notice) && notice.magic == SROCE_ABI_MAGIC && notice.seq == 0 &&
        notice.status < 0)
      return notice.status;
    return -EIO;
  }

  int64_t deadline = now_ms() + 5000;
  bool reset = false;
  for (;;) {
    pollfd p{fd_, POLLIN, 0};
    int left = static_cast<int>(deadline - now_ms());
    if (left <= 0 || poll(&p, 1, left) <= 0) return -ETIMEDOUT;
    std::byte in[SROCE_MAX_MSG + 64];
    alignas(8) unsigned char control[CMSG_SPACE(sizeof(int) * 8)];
    iovec iov{in, sizeof in};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    ssize_t n = recvmsg(fd_, &msg, MSG_CMSG_CLOEXEC);
    if (n < 0 && errno == ECONNRESET && !reset) {  // refused and closed: the notice follows
      reset = true;
      continue;
    }
    if (n <= 0) return -EIO;
    std::vector<int> got;
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < k; ++i) {
        int f;
        memcpy(&f, CMSG_DATA(c) + i * sizeof(int), sizeof f);
        got.push_back(f);
      }
    }
    sroce_msg_hdr r;
    if (static_cast<size_t>(n) < sizeof r) return -EIO;
    memcpy(&r, in, sizeof r);
    if (r.seq == 0 && r.status < 0) {  // the daemon's refusal notice (service_limits.cc)
      for (int f : got) close(f);
      return r.status;
    }
    if (r.seq != h.seq || r.op != op) {
      for (int f : got) close(f);
      continue;  // a late reply to an earlier request
    }
    size_t body_len = static_cast<size_t>(n) - sizeof r;
    if (reply && cap) {
      memset(reply, 0, cap);
      memcpy(reply, in + sizeof r, std::min(cap, body_len));
    }
    if (reply_len) *reply_len = body_len;
    if (fds) {
      *fds = got;
    } else {
      for (int f : got) close(f);
    }
    return r.status;
  }
}

Mapping AbiClient::map_fd(int fd, size_t len) {
  Mapping m;
  m.base = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  m.len = len;
  close(fd);
  if (m.base == MAP_FAILED) m.base = nullptr;
  return m;
}

int AbiClient::hello() {
  // As the provider: our own /proc/self/mem, and a probe the daemon reads back through it.
  int mem = open("/proc/self/mem", O_RDWR | O_CLOEXEC);
  if (mem < 0) return -errno;
  int rc = hello_with(mem, SROCE_HELLO_MEM_FD, false);
  close(mem);
  return rc;
}

int AbiClient::hello_with(int mem_fd, uint32_t flags, bool wrong_probe) {
  struct {
    sroce_hello hello;
    sroce_hello_mem mem;
  } req{};
  const volatile uint64_t probe = 0x5eed5eed00000000ull ^ reinterpret_cast<uintptr_t>(&req);
  req.hello = {SROCE_ABI_VERSION, flags};
  req.mem.probe_addr = reinterpret_cast<uintptr_t>(&probe);
  req.mem.probe = wrong_probe ? ~probe : probe;
  sroce_hello_resp resp{};
  std::vector<int> fds;
  int rc = call_fd(SROCE_OP_HELLO, &req, sizeof req, mem_fd, &resp, sizeof resp, &fds);
  if (rc != 0) return rc;
  if (fds.size() != 2) return -EPROTO;
  async_fd_ = fds[0];
  doorbell_fd_ = fds[1];
  context_ = resp.context;
  return 0;
}

std::string AbiClient::stats() {
  std::string s(SROCE_MAX_MSG, '\0');
  size_t len = 0;
  std::vector<int> fds;
  uint32_t what = 0;
  if (call(SROCE_OP_STATS, &what, sizeof what, s.data(), s.size(), &fds, &len) != 0) return "";
  if (!fds.empty()) {  // too large for one message: the text is in a memfd
    off_t size = lseek(fds[0], 0, SEEK_END);
    s.assign(static_cast<size_t>(size), '\0');
    ssize_t rd = pread(fds[0], s.data(), s.size(), 0);
    for (int f : fds) close(f);
    if (rd != size) return "";
    while (!s.empty() && s.back() == '\0') s.pop_back();
    return s;
  }
  s.resize(len);
  return s;
}

int AbiClient::alloc_pd(uint32_t* pd) {
  sroce_handle_resp r{};
  int rc = call(SROCE_OP_ALLOC_PD, nullptr, 0, &r, sizeof r);
  *pd = r.handle;
  return rc;
}

int AbiClient::reg_mr(uint32_t pd, const void* addr, size_t len, uint32_t access, sroce_reg_mr_resp* out) {
  sroce_reg_mr req{};
  req.addr = reinterpret_cast<uint64_t>(addr);
  req.length = len;
  req.iova = req.addr;
  req.pd = pd;
  req.access = access;
  return call(SROCE_OP_REG_MR, &req, sizeof req, out, sizeof *out);
}

int AbiClient::create_cq(uint32_t cqe, uint32_t channel, ClientCq* cq) {
  sroce_create_cq req{cqe, channel, 0x1234};
  sroce_create_cq_resp r{};
  std::vector<int> fds;
  int rc = call(SROCE_OP_CREATE_CQ, &req, sizeof req, &r, sizeof r, &fds);
  if (rc != 0) return rc;
  if (fds.size() != 1) return -EPROTO;
  cq->handle = r.handle;
  cq->cqe = r.cqe;
  cq->map = map_fd(fds[0], r.ring_bytes);
  if (!cq->map.base) return -ENOMEM;
  maps_.push_back(cq->map);
  cq->ring = ClientRing(cq->map.at(0));
  return 0;
}

int AbiClient::create_qp(uint32_t pd, uint32_t send_cq, uint32_t recv_cq, uint8_t type, uint32_t wr, ClientQp* qp) {
  sroce_create_qp req{};
  req.pd = pd;
  req.send_cq = send_cq;
  req.recv_cq = recv_cq;
  req.qp_type = type;
  req.user_handle = 0x5678;
  req.cap = sroce_qp_cap{wr, wr, 2, 2, 64, 0};
  sroce_create_qp_resp r{};
  std::vector<int> fds;
  int rc = call(SROCE_OP_CREATE_QP, &req, sizeof req, &r, sizeof r, &fds);
  if (rc != 0) return rc;
  if (fds.size() != 1) return -EPROTO;
  qp->qpn = r.qpn;
  qp->cap = r.cap;
  qp->map = map_fd(fds[0], r.ring_bytes);
  if (!qp->map.base) return -ENOMEM;
  maps_.push_back(qp->map);
  qp->sq = ClientRing(qp->map.at(r.sq_offset));
  if (r.rq_offset != ~0ull) qp->rq = ClientRing(qp->map.at(r.rq_offset));
  return 0;
}

int AbiClient::modify_qp(uint32_t qpn, const sroce_qp_attr& a, uint32_t mask) {
  sroce_modify_qp req{};
  req.qpn = qpn;
  req.attr_mask = mask;
  req.attr = a;
  return call(SROCE_OP_MODIFY_QP, &req, sizeof req);
}

int AbiClient::destroy_qp(uint32_t qpn) {
  sroce_handle_req req{qpn, 0};
  sroce_destroy_qp_resp r{};
  return call(SROCE_OP_DESTROY_QP, &req, sizeof req, &r, sizeof r);
}

int AbiClient::create_channel(uint32_t* handle, int* fd) {
  sroce_handle_resp r{};
  std::vector<int> fds;
  int rc = call(SROCE_OP_CREATE_COMP_CHANNEL, nullptr, 0, &r, sizeof r, &fds);
  if (rc != 0) return rc;
  if (fds.size() != 1) return -EPROTO;
  *handle = r.handle;
  *fd = fds[0];
  return 0;
}

void AbiClient::ring_doorbell(const ClientRing& r) {
  if (r.sleeping()) {
    uint64_t one = 1;
    (void)!write(doorbell_fd_, &one, sizeof one);
  }
}

void AbiClient::post_send(ClientQp& qp, const sroce_send_wqe& w, const sroce_sge* sge) {
  uint32_t p = qp.sq.prod();
  std::byte* s = qp.sq.slot(p);
  memcpy(s, &w, sizeof w);
  if (w.send_flags & 8 /* IBV_SEND_INLINE */) {
    memcpy(s + sizeof w, reinterpret_cast<const void*>(sge[0].addr), w.inline_len);
  } else {
    memcpy(s + sizeof w, sge, w.num_sge * sizeof *sge);
  }
  qp.sq.set_prod(p + 1);
  ring_doorbell(qp.sq);
}

void AbiClient::post_recv(ClientQp& qp, uint64_t wr_id, const sroce_sge* sge, uint32_t n) {
  uint32_t p = qp.rq.prod();
  std::byte* s = qp.rq.slot(p);
  sroce_recv_wqe w{wr_id, n, 0};
  memcpy(s, &w, sizeof w);
  memcpy(s + sizeof w, sge, n * sizeof *sge);
  qp.rq.set_prod(p + 1);
  ring_doorbell(qp.rq);
}

std::vector<sroce_cqe> AbiClient::wait_cqes(ClientCq& cq, size_t n, int timeout_ms) {
  std::vector<sroce_cqe> out;
  int64_t deadline = now_ms() + timeout_ms;
  while (out.size() < n && now_ms() < deadline) {
    uint32_t prod = cq.ring.prod();
    while (cq.cons != prod) {
      sroce_cqe e;
      memcpy(&e, cq.ring.slot(cq.cons), sizeof e);
      out.push_back(e);
      ++cq.cons;
    }
    cq.ring.set_cons(cq.cons);
    if (out.size() < n) usleep(20);
  }
  return out;
}

}  // namespace sroce::test
