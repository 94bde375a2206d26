#include "netns.h"

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <stdexcept>

extern char** environ;

namespace sroce::tmtest {

namespace {

std::atomic<int> g_counter{0};
constexpr const char* kPrefix = "srtm";

void must(const std::vector<std::string>& argv) {
  std::string out;
  if (run(argv, &out) != 0) {
    std::string cmd;
    for (const auto& a : argv) cmd += a + " ";
    throw std::runtime_error("failed: " + cmd + ": " + out);
  }
}

// Namespaces named srtm<pid>_<n>[ab] whose process is gone: a crashed run.
void sweep_stale() {
  DIR* d = opendir("/run/netns");
  if (!d) return;
  std::vector<std::string> stale;
  while (dirent* e = readdir(d)) {
    const std::string n = e->d_name;
    if (n.rfind(kPrefix, 0) != 0) continue;
    const long pid = std::strtol(n.c_str() + std::strlen(kPrefix), nullptr, 10);
    if (pid > 0 && kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) stale.push_back(n);
  }
  closedir(d);
  for (const auto& n : stale) run({"ip", "netns", "del", n});
}

}  // namespace

int run(const std::vector<std::string>& argv, std::string* out) {
  int pipefd[2];
  if (pipe2(pipefd, O_CLOEXEC) != 0) return -1;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, pipefd[1], 1);
  posix_spawn_file_actions_adddup2(&fa, pipefd[1], 2);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid;
  const int rc = posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  close(pipefd[1]);
  std::string text;
  char buf[4096];
  ssize_t n;
  while ((n = read(pipefd[0], buf, sizeof(buf))) > 0 || (n < 0 && errno == EINTR)) {
    if (n > 0) text.append(buf, static_cast<size_t>(n));
  }
  close(pipefd[0]);
  if (out) *out = text;
  if (rc != 0) return -1;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

void in_netns(const std::string& ns, const std::function<void()>& fn) {
  const int self = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
  const int target = open(("/run/netns/" + ns).c_str(), O_RDONLY | O_CLOEXEC);
  if (self < 0 || target < 0 || setns(target, CLONE_NEWNET) != 0) {
    if (self >= 0) close(self);
    if (target >= 0) close(target);
    throw std::runtime_error("cannot enter netns " + ns + ": " + std::strerror(errno));
  }
  close(target);
  try {
    fn();
  } catch (...) {
    setns(self, CLONE_NEWNET);
    close(self);
    throw;
  }
  setns(self, CLONE_NEWNET);
  close(self);
}

NetnsPair::NetnsPair() {
  sweep_stale();
  const std::string id = std::to_string(getpid()) + "_" + std::to_string(g_counter++);
  ns_a = std::string(kPrefix) + id + "a";
  ns_b = std::string(kPrefix) + id + "b";
  if_a = "st" + id + "a";
  if_b = "st" + id + "b";
  if (if_a.size() > 15) {  // IFNAMSIZ - 1
    if_a = "st" + id.substr(id.size() - 12) + "a";
    if_b = "st" + id.substr(id.size() - 12) + "b";
  }
  try {
    must({"ip", "netns", "add", ns_a});
    must({"ip", "netns", "add", ns_b});
    must({"ip", "link", "add", if_a, "netns", ns_a, "type", "veth", "peer", "name", if_b, "netns",
          ns_b});
    for (const auto& [ns, ifc, a4, a6] :
         {std::tuple{ns_a, if_a, a4s, a6s}, std::tuple{ns_b, if_b, b4s, b6s}}) {
      must({"ip", "-n", ns, "addr", "add", std::string(a4) + "/24", "dev", ifc});
      must({"ip", "-n", ns, "addr", "add", std::string(a6) + "/64", "dev", ifc, "nodad"});
      must({"ip", "-n", ns, "link", "set", ifc, "up"});
      must({"ip", "-n", ns, "link", "set", "lo", "up"});
    }
  } catch (...) {
    run({"ip", "netns", "del", ns_a});
    run({"ip", "netns", "del", ns_b});
    throw;
  }
}

NetnsPair::~NetnsPair() {
  // Deleting a namespace deletes its veth end, which deletes the pair.
  run({"ip", "netns", "del", ns_a});
  run({"ip", "netns", "del", ns_b});
}

std::string unique_pin_dir() {
  return "/sys/fs/bpf/sroce-test-" + std::to_string(getpid()) + "-" + std::to_string(g_counter++);
}

}  // namespace sroce::tmtest
