// The attacker's side of the security tests (attack.h): the test binary is
// started again as a second uid and runs one attack, named in the
// environment, from a hidden Catch2 test case, exiting with its verdict.
#include "attack.h"

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>

namespace sroce::test {

namespace {
constexpr const char* kAttackEnv = "SROCE_SECWIRE_ATTACK";  // name \x1f arg \x1f arg ...
}

std::map<std::string, Attack>& attacks() {
  static std::map<std::string, Attack> m;
  return m;
}

int run_attack(const std::string& name, const std::vector<std::string>& args, uid_t uid) {
  if (uid == 0) uid = attacker_uid();
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return -1;
  self[n] = '\0';
  std::string spec = name;
  for (const auto& a : args) spec += '\x1f' + a;
  const std::string u = std::to_string(uid);
  std::vector<std::string> argv = {"/usr/bin/setpriv", "--reuid=" + u, "--regid=" + u, "--clear-groups",
                                   "--", self, "[.secwire-attack]"};
  pid_t pid = fork();
  if (pid == 0) {
    setenv(kAttackEnv, spec.c_str(), 1);
    // The attacker leaves with std::exit from inside a test case: its own
    // objects are not what the suite checks (LSan would also need ptrace).
    setenv("ASAN_OPTIONS", "detect_leaks=0", 1);
    std::vector<char*> v;
    for (auto& a : argv) v.push_back(a.data());
    v.push_back(nullptr);
    execv(v[0], v.data());
    _exit(126);
  }
  int st = 0;
  if (pid < 0 || waitpid(pid, &st, 0) != pid) return -1;
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

std::vector<std::string> open_daemon_args(int port_salt, std::vector<std::string> extra) {
  std::vector<std::string> a = {"--address", "127.0.0.1", "--port",
                                std::to_string(20000 + (getpid() * 7 + port_salt) % 12000),
                                "--set", "control.socket_mode=0o666",
                                "--set", "control.allow_uids=[" + std::to_string(attacker_uid()) + "]"};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

}  // namespace sroce::test

// Hidden: runs only when named, as the attacker (run_attack).
TEST_CASE("secwire attacker", "[.secwire-attack]") {
  const char* spec = getenv("SROCE_SECWIRE_ATTACK");
  if (!spec) std::exit(2);
  std::vector<std::string> parts;
  std::string cur;
  for (const char* p = spec; *p; ++p) {
    if (*p == '\x1f') {
      parts.push_back(cur);
      cur.clear();
    } else {
      cur += *p;
    }
  }
  parts.push_back(cur);
  auto& m = sroce::test::attacks();
  auto it = m.find(parts[0]);
  if (it == m.end()) {
    fprintf(stderr, "no attack named %s\n", parts[0].c_str());
    std::exit(2);
  }
  std::exit(it->second(std::vector<std::string>(parts.begin() + 1, parts.end())));
}
