// Unit tests of the provider's pieces that need no daemon: the control channel against a
// scripted peer, the ring view, and the sysfs view sroce-run generates (read back the way
// libibverbs 44 parses it).
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "control.h"
#include "ring.h"
#include "sroce_abi.h"
#include "sysfs_view.h"

using sroce::provider::ControlChannel;
using sroce::provider::ReplyFds;
using sroce::provider::RingView;

namespace {

struct Peer {
  int fd[2] = {-1, -1};
  Peer() { REQUIRE(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fd) == 0); }
  ~Peer() {
    for (int f : fd)
      if (f >= 0) close(f);
  }
  // Reads one request on the daemon side.
  sroce_msg_hdr read_request() {
    uint8_t buf[SROCE_MAX_MSG];
    ssize_t n = recv(fd[1], buf, sizeof(buf), MSG_DONTWAIT);
    REQUIRE(n >= static_cast<ssize_t>(sizeof(sroce_msg_hdr)));
    sroce_msg_hdr h;
    memcpy(&h, buf, sizeof(h));
    return h;
  }
  void reply(uint16_t op, uint64_t seq, int32_t status, const void* body, size_t len,
             const std::vector<int>& fds = {}, uint32_t magic = SROCE_ABI_MAGIC) {
    uint8_t buf[SROCE_MAX_MSG];
    sroce_msg_hdr h{magic, op, static_cast<uint16_t>(len), seq, status, 0};
    memcpy(buf, &h, sizeof(h));
    if (len) memcpy(buf + sizeof(h), body, len);
    iovec iov{buf, sizeof(h) + len};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    alignas(cmsghdr) char cbuf[CMSG_SPACE(sizeof(int) * 4)];
    if (!fds.empty()) {
      msg.msg_control = cbuf;
      msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
      cmsghdr* c = CMSG_FIRSTHDR(&msg);
      c->cmsg_level = SOL_SOCKET;
      c->cmsg_type = SCM_RIGHTS;
      c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
      memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
    }
    REQUIRE(sendmsg(fd[1], &msg, 0) == static_cast<ssize_t>(sizeof(h) + len));
  }
};

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace

// The reply must be queued before call() so a single thread can script the peer: the
// channel's first request gets sequence number 1, the next 2, and so on.
TEST_CASE("control channel maps the daemon's status to errno", "[control]") {
  Peer p;
  ControlChannel ch;
  ch.adopt(dup(p.fd[0]));
  sroce_handle_resp body{42, 0};
  p.reply(SROCE_OP_ALLOC_PD, 1, 0, &body, sizeof(body));
  sroce_handle_resp got{};
  REQUIRE(ch.call(SROCE_OP_ALLOC_PD, nullptr, 0, &got, sizeof(got)) == 0);
  CHECK(got.handle == 42);
  CHECK(p.read_request().op == SROCE_OP_ALLOC_PD);

  p.reply(SROCE_OP_DEALLOC_PD, 2, -EBUSY, nullptr, 0);
  sroce_handle_req req{42, 0};
  CHECK(ch.call(SROCE_OP_DEALLOC_PD, &req, sizeof(req), nullptr, 0) == EBUSY);
  sroce_msg_hdr h = p.read_request();
  CHECK(h.magic == SROCE_ABI_MAGIC);
  CHECK(h.len == sizeof(req));
  CHECK(h.seq == 2);
  CHECK_FALSE(ch.dead());
}

TEST_CASE("control channel passes fds and skips stale replies", "[control]") {
  Peer p;
  ControlChannel ch;
  ch.adopt(dup(p.fd[0]));
  int pipefd[2];
  REQUIRE(pipe(pipefd) == 0);
  // A late answer to an earlier request (seq 0) comes first and must be dropped.
  sroce_hello_resp stale{99, 99};
  p.reply(SROCE_OP_HELLO, 0, 0, &stale, sizeof(stale), {pipefd[0]});
  sroce_hello_resp good{SROCE_ABI_VERSION, 7};
  p.reply(SROCE_OP_HELLO, 1, 0, &good, sizeof(good), {pipefd[0], pipefd[1]});
  close(pipefd[0]);
  close(pipefd[1]);
  ReplyFds fds;
  sroce_hello_resp got{};
  REQUIRE(ch.call(SROCE_OP_HELLO, nullptr, 0, &got, sizeof(got), &fds) == 0);
  CHECK(got.context == 7);
  REQUIRE(fds.count == 2);
  int w = fds.take(1);
  int r = fds.take(0);
  REQUIRE(write(w, "x", 1) == 1);  // the two fds are the two ends of our pipe
  char c = 0;
  REQUIRE(read(r, &c, 1) == 1);
  CHECK(c == 'x');
  close(w);
  close(r);
}

TEST_CASE("control channel: garbage, silence and hang-up", "[control]") {
  Peer p;
  ControlChannel ch;
  ch.adopt(dup(p.fd[0]));
  ch.set_timeout_ms(100);
  p.reply(SROCE_OP_QUERY_PORT, 1, 0, nullptr, 0, {}, 0xdeadbeef);
  CHECK(ch.call(SROCE_OP_QUERY_PORT, nullptr, 0, nullptr, 0) == EPROTO);
  CHECK(ch.call(SROCE_OP_QUERY_PORT, nullptr, 0, nullptr, 0) == ETIMEDOUT);
  CHECK_FALSE(ch.dead());
  close(p.fd[1]);
  p.fd[1] = -1;
  CHECK(ch.call(SROCE_OP_QUERY_PORT, nullptr, 0, nullptr, 0) == EIO);
  CHECK(ch.dead());
  CHECK(ch.call(SROCE_OP_QUERY_PORT, nullptr, 0, nullptr, 0) == EIO);
}

TEST_CASE("ring view: geometry, wrap-around, indices", "[ring]") {
  const uint32_t size = 4, esz = 32;
  std::vector<uint64_t> mem(RingView::bytes_for(size, esz) / 8 + 1);
  auto* hdr = reinterpret_cast<sroce_ring*>(mem.data());
  hdr->size = size;
  hdr->entry_size = esz;
  RingView r(hdr);
  CHECK(r.size() == 4);
  CHECK(sroce::provider::kRingEntriesOffset % 64 == 0);
  CHECK(r.slot(0) == reinterpret_cast<uint8_t*>(hdr) + sroce::provider::kRingEntriesOffset);
  CHECK(r.slot(5) == r.slot(1));  // free-running indices wrap by the mask
  CHECK(r.slot(1) - r.slot(0) == esz);
  r.store_prod_release(0xffffffffu);
  CHECK(r.load_prod_acquire() == 0xffffffffu);
  CHECK(r.slot(0xffffffffu) == r.slot(3));
  CHECK_FALSE(r.consumer_sleeping());
  hdr->sleeping = 1;
  CHECK(r.consumer_sleeping());
  r.set_armed(2);
  CHECK(hdr->armed == 2);
}

TEST_CASE("generated sysfs view reads back as libibverbs parses it", "[sysfs]") {
  char tmpl[] = "/tmp/sroce-sysfs.XXXXXX";
  REQUIRE(mkdtemp(tmpl) != nullptr);
  const std::string root = tmpl;
  sroce::run::DeviceInfo info;
  const uint8_t guid[8] = {0x02, 0x11, 0x22, 0xff, 0xfe, 0x33, 0x44, 0x55};
  memcpy(&info.node_guid_be, guid, 8);
  info.sys_image_guid_be = info.node_guid_be;
  std::array<uint8_t, 16> g1{}, g2{};
  g1[10] = g1[11] = 0xff;
  g1[12] = 10, g1[13] = 0, g1[14] = 0, g1[15] = 1;
  info.gids = {g1, g2};
  info.gid_netdevs = {"lo", ""};
  sroce::run::SysfsNames names;
  names.ibdev = "sroce7";
  names.cdev = makedev(1, 7);
  REQUIRE(sroce::run::write_sysfs_view(root, names, info).empty());

  const std::string dev = root + "/class/infiniband/sroce7";
  CHECK(slurp(root + "/class/infiniband_verbs/abi_version") == "6\n");
  CHECK(slurp(root + "/class/infiniband_verbs/uverbs0/ibdev") == "sroce7\n");
  CHECK(slurp(root + "/class/infiniband_verbs/uverbs0/dev") == "1:7\n");
  CHECK(slurp(dev + "/node_type").rfind("1:", 0) == 0);  // decimal RDMA_NODE_IB_CA first
  // node_guid: four %hx groups, the GUID's bytes in order.
  unsigned short parts[4];
  REQUIRE(sscanf(slurp(dev + "/node_guid").c_str(), "%hx:%hx:%hx:%hx", &parts[0], &parts[1],
                 &parts[2], &parts[3]) == 4);
  for (int i = 0; i < 4; ++i) {
    CHECK(parts[i] >> 8 == guid[2 * i]);
    CHECK((parts[i] & 0xff) == guid[2 * i + 1]);
  }
  // gids/N: eight %hx groups at 5-character strides.
  std::string gid0 = slurp(dev + "/ports/1/gids/0");
  uint8_t raw[16];
  for (int i = 0; i < 8; ++i) {
    unsigned short v;
    REQUIRE(sscanf(gid0.c_str() + i * 5, "%hx", &v) == 1);
    raw[2 * i] = static_cast<uint8_t>(v >> 8);
    raw[2 * i + 1] = static_cast<uint8_t>(v);
  }
  CHECK(memcmp(raw, g1.data(), 16) == 0);
  CHECK(slurp(dev + "/ports/1/gids/1") == "0000:0000:0000:0000:0000:0000:0000:0000\n");
  CHECK(slurp(dev + "/ports/1/gid_attrs/types/0") == "RoCE v2\n");
  CHECK(slurp(dev + "/ports/1/gid_attrs/ndevs/0") == "lo\n");
  struct stat st {};
  CHECK(stat((dev + "/ports/1/gid_attrs/ndevs/1").c_str(), &st) != 0);  // unknown: no file
  CHECK(slurp(dev + "/ports/1/pkeys/0") == "0xffff\n");
  CHECK(slurp(dev + "/ports/1/link_layer") == "Ethernet\n");
  CHECK(slurp(dev + "/ports/1/state") == "4: ACTIVE\n");
  std::string cmd = "rm -rf '" + root + "'";
  CHECK(system(cmd.c_str()) == 0);
}
