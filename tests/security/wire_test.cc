// Security suite, the wire part (docs/security.md, "The wire", "Keys"):
// what one local user learns of another through `sroce qps` / STATS, the
// privileged Q_Key, and whether keys can be predicted. Each test is an
// attack by a second uid (attack.h) against a live sroced, with the victim's
// objects checked untouched and the daemon still serving.
#include <infiniband/verbs.h>

#include <catch2/catch.hpp>
#include <set>

#include "attack.h"
#include "cmd_daemon.h"

using namespace sroce::test;
using nlohmann::json;

namespace {

sroce_qp_attr ud_init(uint32_t qkey) {
  sroce_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qkey = qkey;
  return a;
}
constexpr uint32_t kUdInitMask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY;

// A context with a PD, a CQ and a QP of `type`.
struct Ctx {
  AbiClient c;
  uint32_t pd = 0;
  ClientCq cq;
  ClientQp qp;
  int open(const std::string& socket, uint8_t type = IBV_QPT_RC) {
    if (int rc = c.connect(socket)) return rc;
    if (int rc = c.hello()) return rc;
    if (int rc = c.alloc_pd(&pd)) return rc;
    if (int rc = c.create_cq(64, 0, &cq)) return rc;
    return c.create_qp(pd, cq.handle, cq.handle, type, 16, &qp);
  }
};

// args: socket, victim QPN, victim pid. Reads STATS as the attacker: only its
// own context and QP may be there.
RegisterAttack stats_peek("stats-peek", [](const std::vector<std::string>& a) {
  Ctx me;
  EXPECT_OR_EXIT(me.open(a[0]) == 0, 3);
  json j = json::parse(me.c.stats(), nullptr, false);
  EXPECT_OR_EXIT(j.is_object(), 4);
  const uint64_t victim_qpn = std::stoull(a[1]);
  const uint64_t victim_pid = std::stoull(a[2]);
  EXPECT_OR_EXIT(j["contexts"].size() == 1, 5);
  for (const auto& c : j["contexts"]) {
    EXPECT_OR_EXIT(c["uid"].get<uint64_t>() == getuid(), 6);
    EXPECT_OR_EXIT(c["pid"].get<uint64_t>() != victim_pid, 7);
  }
  bool mine = false;
  for (const auto& q : j["qps"]) {
    EXPECT_OR_EXIT(q["qpn"].get<uint64_t>() != victim_qpn, 8);
    EXPECT_OR_EXIT(q["pid"].get<uint64_t>() != victim_pid, 9);
    mine = mine || q["qpn"].get<uint64_t>() == me.qp.qpn;
  }
  EXPECT_OR_EXIT(mine, 10);
  EXPECT_OR_EXIT(j["qps"].size() == 1, 11);
  EXPECT_OR_EXIT(j["objects"]["qps"].get<uint64_t>() == 1, 12);
  // Nor does the text of `sroce qps` name it.
  const std::string text = sroce::cli::render_qps(j);
  EXPECT_OR_EXIT(text.find(std::to_string(victim_qpn)) == std::string::npos, 13);
  return 0;
});

// args: socket. A privileged Q_Key without CAP_NET_RAW: EPERM; a plain one works.
RegisterAttack qkey("privileged-qkey", [](const std::vector<std::string>& a) {
  Ctx me;
  EXPECT_OR_EXIT(me.open(a[0], IBV_QPT_UD) == 0, 3);
  EXPECT_OR_EXIT(me.c.modify_qp(me.qp.qpn, ud_init(0x80010000u), kUdInitMask) == -EPERM, 4);
  EXPECT_OR_EXIT(me.c.modify_qp(me.qp.qpn, ud_init(0xffffffffu), kUdInitMask) == -EPERM, 5);
  EXPECT_OR_EXIT(me.c.modify_qp(me.qp.qpn, ud_init(0x11111111u), kUdInitMask) == 0, 6);
  sroce_handle_req h{me.qp.qpn, 0};
  sroce_qp_attr q{};
  EXPECT_OR_EXIT(me.c.call(SROCE_OP_QUERY_QP, &h, sizeof h, &q, sizeof q) == 0, 7);
  EXPECT_OR_EXIT(q.qkey == 0x11111111u, 8);
  return 0;
});

std::vector<uint32_t> rkeys_of_a_run(const std::vector<std::string>& extra, std::string* keys_line,
                                     std::string* status_text) {
  DaemonProcess d(open_daemon_args(3, extra));
  REQUIRE(d.ok());
  AbiClient c;
  REQUIRE(c.connect(d.socket()) == 0);
  REQUIRE(c.hello() == 0);
  uint32_t pd = 0;
  REQUIRE(c.alloc_pd(&pd) == 0);
  static std::vector<char> buf(1 << 16);
  std::vector<uint32_t> keys;
  for (int i = 0; i < 8; ++i) {
    sroce_reg_mr_resp r{};
    REQUIRE(c.reg_mr(pd, buf.data() + 4096 * i, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, &r) == 0);
    keys.push_back(r.rkey);
    keys.push_back(r.lkey);
  }
  json s = stats_of(d.socket());
  *keys_line = s.value("keys", "");
  *status_text = sroce::cli::render_status(s);
  CHECK(d.stop() == 0);
  return keys;
}

}  // namespace

TEST_CASE("a second uid sees only its own contexts and QPs in STATS / sroce qps", "[security][wire]") {
  SEC_REQUIRE_ROOT();
  DaemonProcess d(open_daemon_args(1));
  REQUIRE(d.ok());
  Ctx victim;
  REQUIRE(victim.open(d.socket()) == 0);
  CHECK(run_attack("stats-peek", {d.socket(), std::to_string(victim.qp.qpn), std::to_string(getpid())}) == 0);
  // Root still sees both contexts; the victim's QP is untouched and usable.
  json s = stats_of(d.socket());
  REQUIRE(s.is_object());
  bool found = false;
  for (const auto& q : s["qps"]) found = found || q["qpn"].get<uint32_t>() == victim.qp.qpn;
  CHECK(found);
  sroce_handle_req h{victim.qp.qpn, 0};
  sroce_qp_attr q{};
  CHECK(victim.c.call(SROCE_OP_QUERY_QP, &h, sizeof h, &q, sizeof q) == 0);
  CHECK(q.qp_state == IBV_QPS_RESET);
}

TEST_CASE("a privileged Q_Key needs CAP_NET_RAW (EPERM otherwise), as Linux uverbs", "[security][wire]") {
  SEC_REQUIRE_ROOT();
  DaemonProcess d(open_daemon_args(2));
  REQUIRE(d.ok());
  CHECK(run_attack("privileged-qkey", {d.socket()}) == 0);
  json s = stats_of(d.socket());
  REQUIRE(s.is_object());
  CHECK(s["limits"]["qkey_eperm"].get<int>() == 2);
  // Root (CAP_NET_RAW) may set one; the daemon keeps serving.
  Ctx root;
  REQUIRE(root.open(d.socket(), IBV_QPT_UD) == 0);
  CHECK(root.c.modify_qp(root.qp.qpn, ud_init(0x80010000u), kUdInitMask) == 0);
}

TEST_CASE("keys are random per daemon run unless engine.seed asks for the test mode", "[security][wire]") {
  SEC_REQUIRE_ROOT();
  std::string mode1, mode2, text1, text2;
  auto a = rkeys_of_a_run({}, &mode1, &text1);
  auto b = rkeys_of_a_run({}, &mode2, &text2);
  CHECK(mode1 == "random (getrandom)");
  CHECK(text1.find("keys: random (getrandom)") != std::string::npos);
  // 16 keys: their random bytes cannot all repeat (2^-128), and within one run
  // the key bytes are not one value either.
  CHECK(a != b);
  std::set<uint32_t> bytes;
  for (uint32_t k : a) bytes.insert(k & 0xff);
  CHECK(bytes.size() > 1);
  auto s1 = rkeys_of_a_run({"--set", "engine.seed=42"}, &mode1, &text1);
  auto s2 = rkeys_of_a_run({"--set", "engine.seed=42"}, &mode2, &text2);
  CHECK(s1 == s2);  // the test mode: reproducible ...
  CHECK(mode1 == "predictable (test mode engine.seed)");
  CHECK(text1.find("keys: predictable (test mode engine.seed)") != std::string::npos);  // ... and says so
}
