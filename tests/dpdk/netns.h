// Test helpers: a pair of network namespaces joined by one veth pair (one
// queue each way), entering a namespace, shell commands. Root only.
#pragma once

#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <tuple>

namespace sroce::dpdk::test {

inline int sh(const std::string& cmd) {
  int rc = std::system(cmd.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

inline std::string sh_out(const std::string& cmd) {
  std::string out;
  if (FILE* f = popen(cmd.c_str(), "r")) {
    char buf[512];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
    pclose(f);
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}

inline bool have_root() { return geteuid() == 0; }

// Namespaces "<base>a" / "<base>b" with interfaces "<base>a" / "<base>b",
// addresses 10.<n>.0.1/24 and 10.<n>.0.2/24, MTU 3000; removed on destruction.
struct NetnsPair {
  std::string ns_a, ns_b, dev_a, dev_b, addr_a, addr_b;
  bool ok = false;

  explicit NetnsPair(int n) {
    std::string base = "sdt" + std::to_string(getpid() % 100000) + "x";
    ns_a = dev_a = base + "a";
    ns_b = dev_b = base + "b";
    addr_a = "10." + std::to_string(n) + ".0.1";
    addr_b = "10." + std::to_string(n) + ".0.2";
    ok = sh("ip netns add " + ns_a) == 0 && sh("ip netns add " + ns_b) == 0 &&
         sh("ip link add " + dev_a + " numtxqueues 1 numrxqueues 1 type veth peer name " + dev_b +
            " numtxqueues 1 numrxqueues 1") == 0 &&
         sh("ip link set " + dev_a + " netns " + ns_a) == 0 && sh("ip link set " + dev_b + " netns " + ns_b) == 0;
    for (auto [ns, dev, addr] : {std::tuple{ns_a, dev_a, addr_a}, std::tuple{ns_b, dev_b, addr_b}}) {
      ok = ok && sh("ip -n " + ns + " link set lo up") == 0 && sh("ip -n " + ns + " link set " + dev + " mtu 3000 up") == 0 &&
           sh("ip -n " + ns + " addr add " + addr + "/24 dev " + dev) == 0;
    }
  }
  ~NetnsPair() {
    sh("ip netns del " + ns_a + " 2>/dev/null");
    sh("ip netns del " + ns_b + " 2>/dev/null");
  }
  std::string in_a(const std::string& cmd) const { return "ip netns exec " + ns_a + " " + cmd; }
  std::string in_b(const std::string& cmd) const { return "ip netns exec " + ns_b + " " + cmd; }
  std::string mac_b() const { return sh_out(in_b("cat /sys/class/net/" + dev_b + "/address")); }
  std::string mac_a() const { return sh_out(in_a("cat /sys/class/net/" + dev_a + "/address")); }
};

// Moves the calling thread into a namespace until destruction. Threads it
// starts meanwhile (EAL's, the resolver) are born in that namespace.
class InNetns {
 public:
  explicit InNetns(const std::string& ns) {
    self_ = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    int fd = open(("/var/run/netns/" + ns).c_str(), O_RDONLY | O_CLOEXEC);
    ok_ = self_ >= 0 && fd >= 0 && setns(fd, CLONE_NEWNET) == 0;
    if (fd >= 0) close(fd);
  }
  ~InNetns() {
    if (self_ >= 0) {
      if (setns(self_, CLONE_NEWNET) != 0) perror("setns back");
      close(self_);
    }
  }
  bool ok() const { return ok_; }

 private:
  int self_ = -1;
  bool ok_ = false;
};

}  // namespace sroce::dpdk::test
