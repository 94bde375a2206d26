#include "harness.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace sroce::test {

std::string sroced_path() {
  const char* p = getenv("SROCED_BIN");
  return p ? p : SROCED_BIN;
}

bool have_root() { return geteuid() == 0; }

std::string unique_name(const std::string& prefix) {
  static std::atomic<int> n{0};
  return prefix + "-" + std::to_string(getpid()) + "-" + std::to_string(n++);
}

int run(const std::string& cmd) {
  int st = system((cmd + " >/dev/null 2>&1").c_str());
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

NetnsPair::NetnsPair() {
  // Short names: interface names are limited to 15 bytes.
  static std::atomic<int> n{0};
  int k = n++;
  std::string base = "sd" + std::to_string(getpid() % 100000) + "x" + std::to_string(k);
  ns_a = base + "a";
  ns_b = base + "b";
  int octet = 100 + (getpid() + k) % 100;
  addr_a = "10." + std::to_string(octet) + ".0.1";
  addr_b = "10." + std::to_string(octet) + ".0.2";
  std::string va = base + "va", vb = base + "vb";
  ok_ = run("ip netns add " + ns_a) == 0 && run("ip netns add " + ns_b) == 0 &&
        run("ip link add " + va + " netns " + ns_a + " type veth peer name " + vb + " netns " + ns_b) == 0 &&
        run("ip -n " + ns_a + " addr add " + addr_a + "/24 dev " + va) == 0 &&
        run("ip -n " + ns_b + " addr add " + addr_b + "/24 dev " + vb) == 0 &&
        run("ip -n " + ns_a + " link set " + va + " mtu 9000 up") == 0 &&
        run("ip -n " + ns_b + " link set " + vb + " mtu 9000 up") == 0 &&
        run("ip -n " + ns_a + " link set lo up") == 0 && run("ip -n " + ns_b + " link set lo up") == 0;
}

NetnsPair::~NetnsPair() {
  run("ip netns del " + ns_a);  // takes the veth pair with it
  run("ip netns del " + ns_b);
}

int NetnsPair::udp_socket_in(const std::string& ns) {
  int self = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
  int target = open(("/run/netns/" + ns).c_str(), O_RDONLY | O_CLOEXEC);
  int fd = -1;
  if (self >= 0 && target >= 0 && setns(target, CLONE_NEWNET) == 0) {
    fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    setns(self, CLONE_NEWNET);
  }
  if (self >= 0) close(self);
  if (target >= 0) close(target);
  return fd;
}

DaemonProcess::DaemonProcess(std::vector<std::string> args, const std::string& netns, const std::string& socket) {
  socket_ = socket.empty() ? "/tmp/" + unique_name("sroced-test") + ".sock" : socket;
  std::vector<std::string> argv;
  if (!netns.empty()) argv = {"/usr/sbin/ip", "netns", "exec", netns};
  argv.push_back(sroced_path());
  argv.push_back("--config");
  argv.push_back("/dev/null");
  argv.push_back("--socket");
  argv.push_back(socket_);
  for (auto& a : args) argv.push_back(a);
  pid_ = fork();
  if (pid_ == 0) {
    std::vector<char*> v;
    for (auto& a : argv) v.push_back(a.data());
    v.push_back(nullptr);
    execv(v[0], v.data());
    _exit(127);
  }
  for (int i = 0; i < 500; ++i) {  // up to 10 s (ASan start-up is slow)
    // Ready when it answers (a stale socket file of a dead daemon does not).
    int fd = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    snprintf(a.sun_path, sizeof a.sun_path, "%s", socket_.c_str());
    bool up = connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    close(fd);
    if (up) {
      ok_ = true;
      return;
    }
    int status;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return;
    }
    usleep(20000);
  }
}

DaemonProcess::~DaemonProcess() {
  if (pid_ > 0) stop(SIGKILL, 5000);
  unlink(socket_.c_str());
}

int DaemonProcess::stop(int sig, int timeout_ms) {
  if (pid_ <= 0) return -1;
  kill(pid_, sig);
  for (int waited = 0; waited < timeout_ms; waited += 10) {
    int status;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      if (WIFEXITED(status)) return WEXITSTATUS(status);
      return 128 + WTERMSIG(status);
    }
    usleep(10000);
  }
  kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
  pid_ = -1;
  return -1;
}

}  // namespace sroce::test
