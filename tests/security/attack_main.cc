// main() of the security tests: Catch2, or one attack when run as
// `<test> --attack NAME ARGS...` (attack.h).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>

#include "attack.h"

namespace sroce::test {

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
  const std::string u = std::to_string(uid);
  std::vector<std::string> argv = {"/usr/bin/setpriv", "--reuid=" + u, "--regid=" + u, "--clear-groups",
                                   "--", self, "--attack", name};
  argv.insert(argv.end(), args.begin(), args.end());
  pid_t pid = fork();
  if (pid == 0) {
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

int main(int argc, char** argv) {
  if (argc >= 3 && std::string(argv[1]) == "--attack") {
    auto& m = sroce::test::attacks();
    auto it = m.find(argv[2]);
    if (it == m.end()) {
      fprintf(stderr, "no attack named %s\n", argv[2]);
      return 2;
    }
    std::vector<std::string> args(argv + 3, argv + argc);
    return it->second(args);
  }
  return Catch::Session().run(argc, argv);
}
