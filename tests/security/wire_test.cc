// Security suite, the wire part (docs/security.md, "The wire", "Keys"):
// what one local user learns of another through `sroce qps` / STATS, the
// privileged Q_Key, and whether keys can be predicted. Each test is an
// attack by a second uid (attack.h) against a live sroced, with the victim's
// objects checked untouched and the daemon still serving.
#include <arpa/inet.h>
#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <signal.h>

#include <catch2/catch.hpp>
#include <set>

#include "attack.h"
#include "cmd_daemon.h"
#include "proto/icrc.h"
#include "proto/roce.h"
#include "sroce/engine/types.h"

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

namespace {

// One side of an RC connection over a live daemon (as tests/daemon does).
struct RcSide {
  AbiClient c;
  uint32_t pd = 0;
  sroce_reg_mr_resp mr{};
  ClientCq cq;
  ClientQp qp;
  std::vector<char> buf = std::vector<char>(1 << 16);
  int open(const std::string& socket) {
    if (int rc = c.connect(socket)) return rc;
    if (int rc = c.hello()) return rc;
    if (int rc = c.alloc_pd(&pd)) return rc;
    if (int rc = c.reg_mr(pd, buf.data(), buf.size(),
                          IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ, &mr))
      return rc;
    if (int rc = c.create_cq(64, 0, &cq)) return rc;
    return c.create_qp(pd, cq.handle, cq.handle, IBV_QPT_RC, 16, &qp);
  }
  // timeout 19: 4.096 us * 2^19 = 2.1 s per try, 7 tries: the WRITE stays
  // outstanding long enough for the forgeries while the peer is stopped.
  int connect_to(uint32_t peer_qpn, const std::string& peer_ip) {
    sroce_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.port_num = 1;
    a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
    if (int rc = c.modify_qp(qp.qpn, a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
      return rc;
    sroce_qp_attr r{};
    r.qp_state = IBV_QPS_RTR;
    r.path_mtu = IBV_MTU_4096;
    r.dest_qp_num = peer_qpn;
    r.rq_psn = 100;
    r.max_dest_rd_atomic = 1;
    r.min_rnr_timer = 1;
    in_addr ip{};
    inet_pton(AF_INET, peer_ip.c_str(), &ip);
    r.ah_attr.dgid[10] = 0xff;
    r.ah_attr.dgid[11] = 0xff;
    memcpy(&r.ah_attr.dgid[12], &ip, 4);
    r.ah_attr.hop_limit = 64;
    r.ah_attr.is_global = 1;
    r.ah_attr.port_num = 1;
    if (int rc = c.modify_qp(qp.qpn, r,
                             IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                 IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
      return rc;
    sroce_qp_attr t{};
    t.qp_state = IBV_QPS_RTS;
    t.sq_psn = 100;
    t.timeout = 19;
    t.retry_cnt = 7;
    t.rnr_retry = 7;
    t.max_rd_atomic = 1;
    return c.modify_qp(qp.qpn, t,
                       IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                           IBV_QP_MAX_QP_RD_ATOMIC);
  }
  uint32_t state() {
    sroce_handle_req h{qp.qpn, 0};
    sroce_qp_attr q{};
    return c.call(SROCE_OP_QUERY_QP, &h, sizeof h, &q, sizeof q) == 0 ? q.qp_state : 99;
  }
};

sroce::Gid gid_of(const std::string& ip) {
  in_addr a{};
  inet_pton(AF_INET, ip.c_str(), &a);
  return sroce::Gid::from_ipv4(ntohl(a.s_addr));
}

// An RC ACK/NAK (BTH + AETH + ICRC) from `src`:`sport` to `dst`, sent from a
// UDP socket of namespace `ns` bound to `src`. The ICRC is right for those
// addresses: the packet is exactly what a third host would put on the wire.
bool send_forged_aeth(const std::string& ns, const std::string& src, uint16_t sport, const std::string& dst,
                      uint32_t dqpn, uint32_t psn, uint8_t syndrome, uint32_t msn) {
  uint8_t pkt[SROCE_BTH_LEN + SROCE_AETH_LEN + SROCE_ICRC_LEN] = {};
  sroce_bth bth{};
  bth.opcode = static_cast<uint8_t>(SROCE_TRANSPORT_RC) | SROCE_OP_ACK;
  bth.pkey = 0xffff;
  bth.dqpn = dqpn;
  bth.psn = psn;
  sroce_bth_write(pkt, &bth);
  sroce_aeth aeth{syndrome, msn};
  sroce_aeth_write(pkt + SROCE_BTH_LEN, &aeth);
  sroce_icrc_addr a{};
  const sroce::Gid s = gid_of(src), d = gid_of(dst);
  memcpy(a.src_gid, s.raw, 16);
  memcpy(a.dst_gid, d.raw, 16);
  a.src_port = sport;
  a.dst_port = 4791;
  const size_t n = SROCE_BTH_LEN + SROCE_AETH_LEN;
  const uint32_t crc = sroce_icrc_payload(&a, pkt, n);
  for (int i = 0; i < 4; ++i) pkt[n + i] = static_cast<uint8_t>(crc >> (8 * i));
  int fd = NetnsPair::udp_socket_in(ns);
  if (fd < 0) return false;
  int pmtu = IP_PMTUDISC_DO;  // DF, IPv4 id 0: the header the ICRC assumes (proto/icrc.h)
  setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof pmtu);
  sockaddr_in from{};
  from.sin_family = AF_INET;
  from.sin_port = htons(sport);
  inet_pton(AF_INET, src.c_str(), &from.sin_addr);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(4791);
  inet_pton(AF_INET, dst.c_str(), &to.sin_addr);
  bool ok = bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof from) == 0 &&
            sendto(fd, pkt, sizeof pkt, 0, reinterpret_cast<sockaddr*>(&to), sizeof to) == sizeof pkt;
  close(fd);
  return ok;
}

uint64_t drops_of(const std::string& socket, const char* reason) {
  json s = stats_of(socket);
  if (!s.is_object()) return 0;
  return s["engine"]["rx_drop_reason"].value(reason, uint64_t{0});
}

bool wait_drops(const std::string& socket, const char* reason, uint64_t n) {
  for (int i = 0; i < 250; ++i) {  // up to 10 s: ASan daemons under load
    if (drops_of(socket, reason) >= n) return true;
    usleep(40000);
  }
  return false;
}

}  // namespace

TEST_CASE("live: a forged ACK and NAK from a third address neither complete nor kill the victim's WRITE",
          "[security][wire][netns]") {
  SEC_REQUIRE_ROOT();
  NetnsPair ns;
  REQUIRE(ns.ok());
  // The forger: a third address on b's side of the link (b's own stack is
  // what sends its packets, so nothing but the address tells them apart).
  const std::string third = ns.addr_b.substr(0, ns.addr_b.rfind('.')) + ".3";
  REQUIRE(run("ip -n " + ns.ns_b + " addr add " + third + "/32 dev $(ip -n " + ns.ns_b +
              " -o link show type veth | cut -d: -f2 | cut -d@ -f1 | tr -d ' ')") == 0);
  DaemonProcess da({"--address", ns.addr_a}, ns.ns_a);
  DaemonProcess db({"--address", ns.addr_b}, ns.ns_b);
  REQUIRE(da.ok());
  REQUIRE(db.ok());
  RcSide a, b;
  REQUIRE(a.open(da.socket()) == 0);
  REQUIRE(b.open(db.socket()) == 0);
  REQUIRE(a.connect_to(b.qp.qpn, ns.addr_b) == 0);
  REQUIRE(b.connect_to(a.qp.qpn, ns.addr_a) == 0);

  // b stops answering: a's WRITE (PSNs 100, 101) stays outstanding.
  REQUIRE(kill(db.pid(), SIGSTOP) == 0);
  for (size_t i = 0; i < 8192; ++i) a.buf[i] = static_cast<char>(i * 13 + 5);
  sroce_send_wqe w{};
  w.wr_id = 7;
  w.opcode = IBV_WR_RDMA_WRITE;
  w.send_flags = IBV_SEND_SIGNALED;
  w.num_sge = 1;
  w.remote_addr = reinterpret_cast<uint64_t>(b.buf.data()) + 4096;
  w.rkey = b.mr.rkey;
  sroce_sge sge{reinterpret_cast<uint64_t>(a.buf.data()), 8192, a.mr.lkey};
  a.c.post_send(a.qp, w, &sge);

  // A forged ACK of the WRITE's last PSN with MSN 1 would complete it.
  REQUIRE(send_forged_aeth(ns.ns_b, third, 0xc777, ns.addr_a, a.qp.qpn, 101,
                           sroce_aeth_syndrome(SROCE_AETH_ACK, SROCE_AETH_CREDIT_INVALID), 1));
  CHECK(wait_drops(da.socket(), "wrong_peer", 1));
  CHECK(a.c.wait_cqes(a.cq, 1, 200).empty());
  // A forged NAK (remote access error) would put the QP in ERR with an error completion.
  REQUIRE(send_forged_aeth(ns.ns_b, third, 0xc777, ns.addr_a, a.qp.qpn, 100,
                           sroce_aeth_syndrome(SROCE_AETH_NAK, SROCE_NAK_REMOTE_ACCESS), 0));
  CHECK(wait_drops(da.socket(), "wrong_peer", 2));
  CHECK(a.c.wait_cqes(a.cq, 1, 200).empty());
  CHECK(a.state() == IBV_QPS_RTS);

  // b comes back: the WRITE completes on a retransmission, the data is b's.
  REQUIRE(kill(db.pid(), SIGCONT) == 0);
  auto cqes = a.c.wait_cqes(a.cq, 1, 30000);
  REQUIRE(cqes.size() == 1);
  CHECK(cqes[0].wr_id == 7);
  CHECK(cqes[0].status == IBV_WC_SUCCESS);
  CHECK(memcmp(b.buf.data() + 4096, a.buf.data(), 8192) == 0);
  CHECK(drops_of(da.socket(), "bad_icrc") == 0);  // the forgeries were well-formed: only the address gave them away
}
