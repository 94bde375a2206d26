// Key randomness for the engine (docs/security.md, "Keys"): every L_Key,
// R_Key and memory window key gets bits fresh from getrandom(2), read 256
// bytes at a time (one system call per 64 registrations), so no key follows
// from the keys a peer has seen. Only `engine.seed` (a test mode, shown by
// `sroce status`) makes the engine derive them from a seed instead.
#pragma once

#include <fcntl.h>
#include <sys/random.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "sroce/engine/engine.h"

namespace sroce::daemon {

class GetrandomSource final : public RandomSource {
 public:
  uint32_t next32() override {
    if (pos_ + sizeof(uint32_t) > sizeof buf_) {
      fill(buf_, sizeof buf_);
      pos_ = 0;
    }
    uint32_t v;
    memcpy(&v, buf_ + pos_, sizeof v);
    memset(buf_ + pos_, 0, sizeof v);  // a key's bits are used once
    pos_ += sizeof v;
    return v;
  }
  uint64_t next64() {
    uint64_t v;
    fill(reinterpret_cast<uint8_t*>(&v), sizeof v);
    return v;
  }

 private:
  // getrandom(2) blocks only until the kernel's pool is initialised once
  // after boot. It cannot fail on Linux >= 3.17 but with EINTR; without it
  // (a seccomp filter, an old kernel) /dev/urandom; with neither there is no
  // safe key to give, and sroced stops rather than hand out guessable ones.
  static void fill(uint8_t* p, size_t n) {
    size_t got = 0;
    while (got < n) {
      ssize_t r = getrandom(p + got, n - got, 0);
      if (r > 0) {
        got += static_cast<size_t>(r);
      } else if (r < 0 && errno != EINTR) {
        break;
      }
    }
    if (got == n) return;
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    while (fd >= 0 && got < n) {
      ssize_t r = read(fd, p + got, n - got);
      if (r <= 0 && !(r < 0 && errno == EINTR)) break;
      if (r > 0) got += static_cast<size_t>(r);
    }
    if (fd >= 0) close(fd);
    if (got == n) return;
    fprintf(stderr, "sroced: neither getrandom(2) nor /dev/urandom gives random bytes: no key can be made\n");
    abort();
  }

  uint8_t buf_[256] = {};
  size_t pos_ = sizeof buf_;
};

}  // namespace sroce::daemon
