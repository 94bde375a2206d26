// Test harness: sroced as a child process, optionally inside a network
// namespace; a pair of namespaces joined by veth, created with unique names
// and removed by the destructor.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace sroce::test {

// Path of the sroced binary under test (SROCED_BIN, set by CMake).
std::string sroced_path();
bool have_root();
// A name unique to this test process: "<prefix>-<pid>-<counter>".
std::string unique_name(const std::string& prefix);
int run(const std::string& cmd);  // shell command, returns its exit status

// Two namespaces "<base>a" and "<base>b" joined by a veth pair
// (10.<n>.0.1 and 10.<n>.0.2 /24, MTU 9000).
class NetnsPair {
 public:
  NetnsPair();
  ~NetnsPair();
  bool ok() const { return ok_; }
  std::string ns_a, ns_b, addr_a, addr_b;
  // A UDP socket created inside namespace `ns` (the calling thread returns to
  // its own namespace afterwards).
  static int udp_socket_in(const std::string& ns);

 private:
  bool ok_ = false;
};

class DaemonProcess {
 public:
  // Starts sroced with `args`, in `netns` when not empty, and waits for its
  // control socket. The socket path is a fresh one under /tmp.
  explicit DaemonProcess(std::vector<std::string> args, const std::string& netns = "",
                         const std::string& socket = "");
  ~DaemonProcess();
  bool ok() const { return ok_; }
  const std::string& socket() const { return socket_; }
  pid_t pid() const { return pid_; }
  // SIGTERM (or `sig`) and wait; returns the exit status (-1 on timeout,
  // 128+signal when killed).
  int stop(int sig = 15, int timeout_ms = 5000);

 private:
  pid_t pid_ = -1;
  std::string socket_;
  bool ok_ = false;
};

}  // namespace sroce::test
