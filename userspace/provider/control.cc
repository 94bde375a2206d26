#include "control.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

namespace sroce::provider {

ReplyFds::~ReplyFds() {
  for (int& f : fd) {
    if (f >= 0) close(f);
    f = -1;
  }
}

ControlChannel::~ControlChannel() {
  if (fd_ >= 0) close(fd_);
}

std::string control_socket_path(const char* devname) {
  const char* env = getenv("SROCE_SOCKET");
  if (env != nullptr && env[0] != '\0') return env;
  std::string path = SROCE_RUN_DIR;
  path += '/';
  path += devname;
  path += ".sock";
  return path;
}

int ControlChannel::connect_to(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) return ENAMETOOLONG;
  memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (fd < 0) return errno;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    int err = errno;
    close(fd);
    return err;
  }
  fd_ = fd;
  return 0;
}

static int64_t now_ms() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000 + ts.tv_nsec / 1000000;
}

int ControlChannel::call(uint16_t op, const void* body, size_t body_len, void* reply,
                         size_t reply_cap, ReplyFds* fds, size_t* reply_len) {
  return call_with_fd(op, body, body_len, -1, reply, reply_cap, fds, reply_len);
}

int ControlChannel::call_with_fd(uint16_t op, const void* body, size_t body_len, int send_fd,
                                 void* reply, size_t reply_cap, ReplyFds* fds,
                                 size_t* reply_len) {
  if (reply_cap > 0) memset(reply, 0, reply_cap);
  if (reply_len != nullptr) *reply_len = 0;
  if (body_len > SROCE_MAX_MSG - sizeof(sroce_msg_hdr)) return EINVAL;
  std::lock_guard<std::mutex> lock(mutex_);
  if (fd_ < 0 || dead()) return EIO;

  uint8_t buf[SROCE_MAX_MSG];
  sroce_msg_hdr hdr{};
  hdr.magic = SROCE_ABI_MAGIC;
  hdr.op = op;
  hdr.len = static_cast<uint16_t>(body_len);
  hdr.seq = ++seq_;
  memcpy(buf, &hdr, sizeof(hdr));
  if (body_len > 0) memcpy(buf + sizeof(hdr), body, body_len);
  iovec iov{buf, sizeof(hdr) + body_len};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char cbuf[CMSG_SPACE(sizeof(int))];
  if (send_fd >= 0) {
    msg.msg_control = cbuf;
    msg.msg_controllen = sizeof(cbuf);
    cmsghdr* cm = CMSG_FIRSTHDR(&msg);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(cm), &send_fd, sizeof(int));
  }
  ssize_t n;
  do {
    n = sendmsg(fd_, &msg, MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  if (n < 0) {
    if (errno == EPIPE || errno == ECONNRESET || errno == ENOTCONN) {
      mark_dead();
      // The daemon may have refused the connection and closed it before the
      // request went out: its notice (sequence 0) is still queued here.
      // A reset (it closed with our request unread) comes first, then the notice.
      sroce_msg_hdr notice{};
      ssize_t r = recv(fd_, &notice, sizeof notice, MSG_DONTWAIT);
      if (r < 0 && errno == ECONNRESET) r = recv(fd_, &notice, sizeof notice, MSG_DONTWAIT);
      if (r == static_cast<ssize_t>(sizeof notice) && notice.magic == SROCE_ABI_MAGIC && notice.seq == 0 &&
          notice.status < 0)
        return -notice.status;
    }
    return EIO;
  }
  return receive_reply(op, hdr.seq, reply, reply_cap, fds, reply_len);
}

int ControlChannel::hello(sroce_hello_resp* resp, ReplyFds* fds) {
  int mem = open("/proc/self/mem", O_RDWR | O_CLOEXEC);
  if (mem < 0) {
    int err = errno;
    fprintf(stderr, "libsroce: cannot open /proc/self/mem for sroced: %s\n", strerror(err));
    return err;
  }
  struct {
    sroce_hello hello;
    sroce_hello_mem mem;
  } req{};
  static_assert(sizeof(req) == sizeof(sroce_hello) + sizeof(sroce_hello_mem));
  // Any value at any address of ours does; this one lives until the reply is in.
  const volatile uint64_t probe = reinterpret_cast<uintptr_t>(&req) ^ 0x53524f43454d454dull;
  req.hello.abi_version = SROCE_ABI_VERSION;
  req.hello.flags = SROCE_HELLO_MEM_FD;
  req.mem.probe_addr = reinterpret_cast<uintptr_t>(&probe);
  req.mem.probe = probe;
  int err = call_with_fd(SROCE_OP_HELLO, &req, sizeof(req), mem, resp, sizeof(*resp), fds);
  close(mem);
  return err;
}

int ControlChannel::receive_reply(uint16_t op, uint64_t seq, void* reply, size_t reply_cap,
                                  ReplyFds* fds, size_t* reply_len) {
  const int64_t deadline = now_ms() + timeout_ms_;
  uint8_t buf[SROCE_MAX_MSG];
  bool reset = false;
  for (;;) {
    int64_t left = deadline - now_ms();
    if (left <= 0) return ETIMEDOUT;
    pollfd pfd{fd_, POLLIN, 0};
    int pr = poll(&pfd, 1, static_cast<int>(left));
    if (pr < 0 && errno == EINTR) continue;
    if (pr < 0) return EIO;
    if (pr == 0) return ETIMEDOUT;

    alignas(cmsghdr) char cbuf[CMSG_SPACE(sizeof(int) * kMaxReplyFds)];
    iovec iov{buf, sizeof(buf)};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cbuf;
    msg.msg_controllen = sizeof(cbuf);
    ssize_t n = recvmsg(fd_, &msg, MSG_CMSG_CLOEXEC);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    // A daemon that refused the connection and closed it with our request
    // unread: the reset is reported first, its notice (below) after.
    if (n < 0 && errno == ECONNRESET && !reset) {
      reset = true;
      continue;
    }
    if (n <= 0) {  // 0: the daemon hung up
      mark_dead();
      return EIO;
    }
    // Collect fds first so that they are closed (by ReplyFds) whatever happens next.
    ReplyFds local;
    ReplyFds* out = fds != nullptr ? fds : &local;
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < count; ++i) {
        int f;
        memcpy(&f, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
        if (out->count < kMaxReplyFds) {
          out->fd[out->count++] = f;
        } else {
          close(f);
        }
      }
    }
    if (static_cast<size_t>(n) < sizeof(sroce_msg_hdr)) return EPROTO;
    sroce_msg_hdr hdr;
    memcpy(&hdr, buf, sizeof(hdr));
    if (hdr.magic != SROCE_ABI_MAGIC) return EPROTO;
    if (hdr.seq == 0 && hdr.status < 0) {
      // A notice: the daemon refused this connection (uid policy, per-uid
      // limits: EACCES, EMFILE) and closed it (docs/security.md, "Limits").
      for (int i = 0; i < out->count; ++i) close(out->take(i));
      out->count = 0;
      mark_dead();
      return -hdr.status;
    }
    if (hdr.seq != seq) {
      // A late reply to a request that already timed out: drop it and keep waiting.
      for (int i = 0; i < out->count; ++i) close(out->take(i));
      out->count = 0;
      continue;
    }
    if (hdr.op != op) return EPROTO;
    if (hdr.status != 0) {
      for (int i = 0; i < out->count; ++i) close(out->take(i));
      out->count = 0;
      return hdr.status < 0 ? -hdr.status : EPROTO;
    }
    size_t body = static_cast<size_t>(n) - sizeof(hdr);
    if (body > hdr.len) body = hdr.len;
    size_t copy = body < reply_cap ? body : reply_cap;
    if (copy > 0) memcpy(reply, buf + sizeof(hdr), copy);
    if (reply_len != nullptr) *reply_len = body;
    return 0;
  }
}

}  // namespace sroce::provider
