// Shared by the wire and limits parts of the security suite: the attacker
// is this same test binary run again as a second, unprivileged uid with
// `setpriv --reuid=N --regid=N --clear-groups` (no account needed), running
// the hidden test case [.secwire-attack] with the attack's name and
// arguments in SROCE_SECWIRE_ATTACK (attack.cc); its exit status is the
// verdict (0: every attempt failed as it must; else the number of the check
// that went wrong).
#pragma once

#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "abi_client.h"
#include "harness.h"

namespace sroce::test {

// A uid of nobody's (no account), unique per test process so that parallel
// runs of the suite do not see each other's contexts.
inline uid_t attacker_uid() { return static_cast<uid_t>(60000 + getpid() % 5000); }

using Attack = std::function<int(const std::vector<std::string>& args)>;
// Attacks by name, filled by each test file (static registration).
std::map<std::string, Attack>& attacks();
struct RegisterAttack {
  RegisterAttack(const char* name, Attack a) { attacks()[name] = std::move(a); }
};

// Runs attack `name` as uid `uid` (default attacker_uid()) with `args`;
// returns its exit status (-1 if it did not exit normally).
int run_attack(const std::string& name, const std::vector<std::string>& args, uid_t uid = 0);

// sroced options for a daemon the attacker's uid may use, plus `extra`.
std::vector<std::string> open_daemon_args(int port_salt, std::vector<std::string> extra = {});

inline nlohmann::json stats_of(const std::string& socket) {
  AbiClient c;
  if (c.connect(socket) != 0) return nlohmann::json{};
  std::string s = c.stats();
  return s.empty() ? nlohmann::json{} : nlohmann::json::parse(s, nullptr, false);
}

}  // namespace sroce::test

#define SEC_REQUIRE_ROOT()                                       \
  do {                                                           \
    if (!::sroce::test::have_root()) {                           \
      WARN("needs root (a second uid, namespaces): skipped");    \
      std::exit(77);                                             \
    }                                                            \
  } while (0)

// In an attack: exit with `n` unless `cond`.
#define EXPECT_OR_EXIT(cond, n)                                                   \
  do {                                                                            \
    if (!(cond)) {                                                                \
      fprintf(stderr, "attack check %d failed: %s (line %d)\n", n, #cond, __LINE__); \
      return n;                                                                   \
    }                                                                             \
  } while (0)
