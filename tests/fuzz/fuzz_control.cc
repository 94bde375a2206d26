// The service layer's control messages (docs/security.md, "Fuzzing"): the
// fuzzer's bytes, cut into messages, go over a real control socket into
// sroced's Service (framing check, HELLO, every op's body parsing, the objects
// they make), the rings are polled, and the replies are checked.
//
// Input: records [len lo][len hi][flags][bytes]; flags bit 0 makes the record a
// well-framed request (magic, op from the first byte, len and seq filled in),
// bit 1 sends a HELLO first. One context per input, closed at its end, so
// inputs do not see each other's objects.
//
// Invariants (abort on violation): every reply names a request that was sent
// (its seq and op) and carries 0 or a -errno; a well-framed request always gets
// exactly one reply; the context's objects are all gone once it closes.
#include <spdlog/spdlog.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <memory>
#include <string>

#include "config.h"
#include "fuzz_check.h"
#include "memory.h"
#include "service.h"

using namespace sroce;
using namespace sroce::daemon;

namespace {

struct World {
  Config cfg;
  Gid gid = Gid::from_ipv4(0x7f000001);
  std::unique_ptr<ProcessMemory> mem;
  std::unique_ptr<Engine> eng;
  std::unique_ptr<Service> svc;
  std::map<int, uint64_t> keys;  // fd -> the key Service watches it with
  Time now = Time::zero();
};

World* world() {
  static World* w = [] {
    spdlog::set_level(spdlog::level::off);
    auto* x = new World;
    x->cfg.control.socket = "/tmp/sroce-fuzz-control-" + std::to_string(getpid()) + ".sock";
    x->mem = std::make_unique<ProcessMemory>();
    EngineConfig ec;
    ec.gids = {&x->gid, 1};
    ec.max_sge = x->cfg.engine.max_sge;
    ec.max_inline_data = x->cfg.engine.max_inline_data;
    x->eng = std::make_unique<Engine>(ec, *x->mem);
    ServiceEnv env;
    env.engine = x->eng.get();
    env.memory = x->mem.get();
    env.config = &x->cfg;
    env.gids = {x->gid};
    env.netdev = "lo";
    env.watch = [x](int fd, uint64_t k) { x->keys[fd] = k; };
    env.unwatch = [x](int fd) { x->keys.erase(fd); };
    env.stats_json = [](uint32_t, uid_t) { return std::string("{}"); };
    x->svc = std::make_unique<Service>(std::move(env));
    FUZZ_CHECK(x->svc->listen().ok());
    return x;
  }();
  return w;
}

// The key of the newest socket context (watched with kKeySocket).
bool context_key(World& w, uint64_t& key) {
  for (auto& [fd, k] : w.keys)
    if ((k >> 32) == Service::kKeySocket && static_cast<uint32_t>(k) >= static_cast<uint32_t>(key))
      key = k;
  return key != 0;
}

void pump(World& w, uint64_t key, uint32_t events = EPOLLIN) {
  w.now += Duration::micros(10);
  w.svc->on_fd_ready(key, events, w.now);
  w.svc->poll_rings(w.now);
  w.svc->poll_completions();
}

// Reads every reply waiting on the client; checks it against the requests.
void replies(int fd, std::map<uint64_t, uint16_t>& pending) {
  alignas(8) std::byte in[SROCE_MAX_MSG + 64];
  alignas(8) unsigned char control[CMSG_SPACE(sizeof(int) * 8)];
  for (;;) {
    iovec iov{in, sizeof in};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    ssize_t n = recvmsg(fd, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (n <= 0) return;
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < k; ++i) {
        int f;
        memcpy(&f, CMSG_DATA(c) + i * sizeof(int), sizeof f);
        close(f);
      }
    }
    sroce_msg_hdr h;
    FUZZ_CHECK(static_cast<size_t>(n) >= sizeof h);
    memcpy(&h, in, sizeof h);
    FUZZ_CHECK(h.magic == SROCE_ABI_MAGIC);
    FUZZ_CHECK(h.len == static_cast<size_t>(n) - sizeof h);
    auto it = pending.find(h.seq);
    FUZZ_CHECK(it != pending.end() && it->second == h.op);
    FUZZ_CHECK(h.status <= 0 && h.status > -4096);
    pending.erase(it);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  World& w = *world();
  int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  FUZZ_CHECK(fd >= 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  snprintf(a.sun_path, sizeof a.sun_path, "%s", w.cfg.socket_path().c_str());
  FUZZ_CHECK(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  w.svc->on_listen_ready(w.now);
  uint64_t key = 0;
  FUZZ_CHECK(context_key(w, key));

  std::map<uint64_t, uint16_t> pending;  // seq -> op of well-framed requests
  uint64_t seq = 1000;
  size_t at = 0;
  bool alive = true;
  for (int n = 0; n < 16 && at + 3 <= size && alive; ++n) {
    size_t len = std::min<size_t>(data[at] | (size_t{data[at + 1]} << 8),
                                  SROCE_MAX_MSG - sizeof(sroce_msg_hdr));
    uint8_t flags = data[at + 2];
    at += 3;
    len = std::min(len, size - at);
    alignas(8) std::byte msg[SROCE_MAX_MSG];
    size_t mlen = 0;
    if (flags & 2) {
      sroce_msg_hdr h{SROCE_ABI_MAGIC, SROCE_OP_HELLO, sizeof(sroce_hello), ++seq, 0, 0};
      sroce_hello hb{SROCE_ABI_VERSION, 0};
      memcpy(msg, &h, sizeof h);
      memcpy(msg + sizeof h, &hb, sizeof hb);
      if (send(fd, msg, sizeof h + sizeof hb, MSG_NOSIGNAL) > 0) pending[h.seq] = h.op;
    }
    if (flags & 1) {
      uint16_t op =
          len ? static_cast<uint16_t>(SROCE_OP_HELLO + data[at] % (SROCE_OP_COUNT - SROCE_OP_HELLO))
              : uint16_t{SROCE_OP_QUERY_DEVICE};
      size_t body = len ? len - 1 : 0;
      sroce_msg_hdr h{SROCE_ABI_MAGIC, op, static_cast<uint16_t>(body), ++seq, 0, 0};
      memcpy(msg, &h, sizeof h);
      if (body) memcpy(msg + sizeof h, data + at + 1, body);
      mlen = sizeof h + body;
      if (send(fd, msg, mlen, MSG_NOSIGNAL) > 0) pending[h.seq] = op;
    } else {
      memcpy(msg, data + at, len);
      mlen = len;
      // Raw bytes can still be a well-framed request (the fuzzer finds the magic): the
      // daemon answers it like any other, under the seq the bytes chose. An op it does not
      // know is garbage (dropped and counted, no reply), as in service_control.cc.
      sroce_msg_hdr h;
      bool framed = false;
      if (mlen >= sizeof h) {
        memcpy(&h, msg, sizeof h);
        framed = h.magic == SROCE_ABI_MAGIC && h.len == mlen - sizeof h && h.op >= SROCE_OP_HELLO &&
                 h.op < SROCE_OP_COUNT;
      }
      if (send(fd, msg, mlen, MSG_NOSIGNAL) > 0 && framed) pending[h.seq] = h.op;
    }
    at += len;
    pump(w, key);
    replies(fd, pending);
    alive = false;
    for (auto& [f, k] : w.keys)
      if (k == key) alive = true;
  }
  // A context the daemon kept answered every well-framed request it was sent.
  if (alive) FUZZ_CHECK(pending.empty());
  close(fd);
  if (alive) {
    // As sroced's event loop does: wait for the daemon's end to report the hang-up, then
    // pump. close() drops our reference to the socket, but the kernel releases it (and
    // the daemon's end reads EOF) only when the last reference goes, which another task
    // holding the file for a moment can delay past close()'s return: one pump right
    // after close() then read EAGAIN and the context was still there (fuzz.control
    // failed once so under a loaded make test). A daemon that never hears of the close
    // fails here after 10 s.
    int dfd = -1;
    for (auto& [f, k] : w.keys)
      if (k == key) dfd = f;
    FUZZ_CHECK(dfd >= 0);
    pollfd p{dfd, POLLIN | POLLRDHUP, 0};
    FUZZ_CHECK(poll(&p, 1, 10000) == 1);
    uint32_t ev = EPOLLIN;
    if (p.revents & POLLHUP) ev |= EPOLLHUP;
    if (p.revents & POLLRDHUP) ev |= EPOLLRDHUP;
    if (p.revents & POLLERR) ev |= EPOLLERR;
    pump(w, key, ev);
  }
  for (auto& [f, k] : w.keys) FUZZ_CHECK(k != key);  // closed with the socket
  FUZZ_CHECK(w.svc->context_count() == 0);
  FUZZ_CHECK(w.svc->object_counts().total() == 0);
  return 0;
}
