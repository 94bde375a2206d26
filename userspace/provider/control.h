// The provider's side of the sroced control channel: request/reply over a Unix SOCK_SEQPACKET
// socket, file descriptors in replies via SCM_RIGHTS (userspace/abi/sroce_abi.h).
//
// Thread-safe: one request is in flight at a time (a mutex around send+receive), which is
// what verbs control calls need. Never blocks forever: a reply that does not arrive within the
// timeout fails the call with ETIMEDOUT; a hung-up daemon fails it with EIO and marks the
// channel dead, which the context turns into IBV_EVENT_DEVICE_FATAL.
#ifndef SROCE_PROVIDER_CONTROL_H
#define SROCE_PROVIDER_CONTROL_H

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>

#include "sroce_abi.h"

namespace sroce::provider {

// Up to this many fds come back with one reply (HELLO: async socket + doorbell).
inline constexpr int kMaxReplyFds = 4;

struct ReplyFds {
  int fd[kMaxReplyFds] = {-1, -1, -1, -1};
  int count = 0;
  // Takes fd i (the caller owns it from now on).
  int take(int i) {
    int f = fd[i];
    fd[i] = -1;
    return f;
  }
  ~ReplyFds();
};

class ControlChannel {
 public:
  ControlChannel() = default;
  ~ControlChannel();
  ControlChannel(const ControlChannel&) = delete;
  ControlChannel& operator=(const ControlChannel&) = delete;

  // Connects to the daemon's socket. Returns 0 or an errno value.
  int connect_to(const std::string& path);
  // Uses an already connected SOCK_SEQPACKET socket (tests).
  void adopt(int fd) { fd_ = fd; }

  // Sends op with `body` and waits for the reply. Copies at most `reply_cap` bytes of the reply
  // body to `reply` (the rest of the caller's buffer is zeroed) and returns the reply status:
  // 0 or a positive errno (the daemon's -errno negated, or EIO/ETIMEDOUT/EPROTO locally).
  int call(uint16_t op, const void* body, size_t body_len, void* reply, size_t reply_cap,
           ReplyFds* fds = nullptr, size_t* reply_len = nullptr);
  // The same, passing `send_fd` with the request (SCM_RIGHTS; the caller keeps its copy).
  int call_with_fd(uint16_t op, const void* body, size_t body_len, int send_fd, void* reply,
                   size_t reply_cap, ReplyFds* fds = nullptr, size_t* reply_len = nullptr);

  // HELLO as the daemon wants it on the socket path: with this process's own /proc/self/mem,
  // the only way sroced reaches our memory (docs/security.md, "Memory"), and a probe it reads
  // back through it. Returns as call().
  int hello(sroce_hello_resp* resp, ReplyFds* fds);

  int fd() const { return fd_; }
  bool dead() const { return dead_.load(std::memory_order_acquire); }
  void mark_dead() { dead_.store(true, std::memory_order_release); }
  void set_timeout_ms(int ms) { timeout_ms_ = ms; }

 private:
  int receive_reply(uint16_t op, uint64_t seq, void* reply, size_t reply_cap, ReplyFds* fds,
                    size_t* reply_len);

  int fd_ = -1;
  uint64_t seq_ = 0;
  int timeout_ms_ = 30000;
  std::atomic<bool> dead_{false};
  std::mutex mutex_;
};

// The socket of device `devname`: $SROCE_SOCKET if set, else SROCE_RUN_DIR/<devname>.sock.
std::string control_socket_path(const char* devname);

}  // namespace sroce::provider

#endif  // SROCE_PROVIDER_CONTROL_H
