// The attacker of the hostile-client test (hostile.cc): an unprivileged uid that
// sends sroced malformed control messages and ring contents. Each attack must be
// answered with a clear error (or an error completion), never succeed, never
// reach the victim and never stop the daemon from serving.
#include <infiniband/verbs.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "hostile.h"

using namespace sroce::test;

namespace sroce::hostile {

namespace {

const char* err_name(int rc) { return rc == 0 ? "success" : strerror(-rc); }

// A completion's status as ibv_wc_status_str would print it (without linking libibverbs).
std::string wc_status(int s) {
  static const char* names[] = {"success",
                                "local length error",
                                "local QP operation error",
                                "local EE context operation error",
                                "local protection error",
                                "Work Request Flushed Error",
                                "memory management operation error",
                                "bad response error",
                                "local access error",
                                "remote invalid request error",
                                "remote access error",
                                "remote operation error",
                                "transport retry counter exceeded",
                                "RNR retry counter exceeded"};
  if (s >= 0 && s < static_cast<int>(sizeof names / sizeof names[0]))
    return std::string(names[s]) + " (" + std::to_string(s) + ")";
  return "status " + std::to_string(s);
}

// A reply came (not a local timeout or a hang-up) and it is an error.
bool refused(int rc) { return rc < 0 && rc != -ETIMEDOUT && rc != -EIO; }

// The daemon still answers this connection.
bool serves(AbiClient& c) {
  sroce_device_attr a{};
  return c.call(SROCE_OP_QUERY_DEVICE, nullptr, 0, &a, sizeof a) == 0 && a.max_qp > 0;
}

void garbage(const std::string& socket) {
  AbiClient g;
  if (!expect(g.connect(socket) == 0, "connect as a second uid")) return;
  std::vector<unsigned char> big(SROCE_MAX_MSG + 64 + 512, 0xAB);
  sroce_msg_hdr h{SROCE_ABI_MAGIC, SROCE_OP_ALLOC_PD, 0, 1, 0, 0};
  int sent = 0;
  auto raw = [&](const void* p, size_t n) { sent += g.send_raw(p, n) ? 1 : 0; };
  raw("\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a", 10);  // shorter than a header
  raw(&h, sizeof h - 1);                                // one byte short
  h.len = 50;
  raw(&h, sizeof h);  // says 50 body bytes, has none
  h.len = 0xffff;
  std::vector<unsigned char> m(sizeof h + 100, 0);
  memcpy(m.data(), &h, sizeof h);
  raw(m.data(), m.size());  // says 65535, has 100
  memcpy(big.data(), &h, sizeof h);
  raw(big.data(), big.size());  // larger than any message (truncated on receive)
  h.len = 0;
  for (uint16_t op : {uint16_t{0}, uint16_t{SROCE_OP_COUNT}, uint16_t{0xffff}}) {
    h.op = op;
    raw(&h, sizeof h);  // no such op
  }
  h.op = SROCE_OP_ALLOC_PD;
  h.magic = 0x12345678;
  raw(&h, sizeof h);  // wrong magic
  expect(sent == kGarbageSent,
         "%d malformed messages sent (truncated, oversized, bad op codes, bad magic)", sent);
  // Before HELLO only HELLO and STATS are served: the same connection gets a clear error.
  uint32_t pd = 0;
  int rc = g.alloc_pd(&pd);
  expect(rc == -EPROTO, "after the garbage, ALLOC_PD before HELLO: %s (EPROTO expected)",
         err_name(rc));
}

void hello_faults(AbiClient& c) {
  int rc = c.call(SROCE_OP_HELLO, nullptr, 0);
  expect(rc == -EINVAL, "HELLO without a body: %s", err_name(rc));
  sroce_hello wrong{SROCE_ABI_VERSION + 7, 0};
  rc = c.call(SROCE_OP_HELLO, &wrong, sizeof wrong);
  expect(rc == -EPROTONOSUPPORT, "HELLO of another ABI version: %s", err_name(rc));
  rc = c.hello();
  expect(rc == 0, "HELLO as the allowed second uid: %s", err_name(rc));
}

// Every op that takes a body, with bodies of every wrong size and of garbage.
void bodies(AbiClient& c) {
  static const uint16_t ops[] = {
      SROCE_OP_QUERY_PORT, SROCE_OP_QUERY_GID,  SROCE_OP_DEALLOC_PD,
      SROCE_OP_REG_MR,     SROCE_OP_DEREG_MR,   SROCE_OP_CREATE_CQ,
      SROCE_OP_DESTROY_CQ, SROCE_OP_CREATE_QP,  SROCE_OP_MODIFY_QP,
      SROCE_OP_QUERY_QP,   SROCE_OP_DESTROY_QP, SROCE_OP_CREATE_SRQ,
      SROCE_OP_MODIFY_SRQ, SROCE_OP_QUERY_SRQ,  SROCE_OP_DESTROY_SRQ,
      SROCE_OP_CREATE_AH,  SROCE_OP_DESTROY_AH, SROCE_OP_DESTROY_COMP_CHANNEL,
      SROCE_OP_REREG_MR,   SROCE_OP_RESIZE_CQ,  SROCE_OP_ALLOC_MW,
      SROCE_OP_DEALLOC_MW,
  };
  std::vector<unsigned char> junk(SROCE_MAX_MSG - sizeof(sroce_msg_hdr), 0xff);
  int wrong = 0, total = 0;
  for (uint16_t op : ops) {
    for (size_t len : {size_t{0}, size_t{3}, junk.size()}) {
      int rc = c.call(op, junk.data(), len);
      ++total;
      if (!refused(rc)) {
        ++wrong;
        printf("    op %u with %zu body bytes: %s\n", op, len, err_name(rc));
      }
    }
  }
  expect(
      wrong == 0,
      "%d requests with empty, short and 0xff-filled bodies: each refused with an errno (%d not)",
      total, wrong);
  expect(serves(c), "the daemon still answers this connection");
}

// The victim's numbers, before this context has objects of its own (handles
// are per context, so later the same numbers would name the attacker's own).
void foreign(AbiClient& c, const Victim& v) {
  sroce_handle_req h{v.pd, 0};
  int rc;
  rc = c.call(SROCE_OP_DEALLOC_PD, &h, sizeof h);
  expect(refused(rc), "DEALLOC_PD of the victim's PD: %s", err_name(rc));
  h.handle = v.lkey;
  rc = c.call(SROCE_OP_DEREG_MR, &h, sizeof h);
  expect(refused(rc), "DEREG_MR of the victim's lkey: %s", err_name(rc));
  h.handle = v.cq;
  rc = c.call(SROCE_OP_DESTROY_CQ, &h, sizeof h);
  expect(refused(rc), "DESTROY_CQ of the victim's CQ: %s", err_name(rc));
  sroce_resize_cq rz{v.cq, 16};
  rc = c.call(SROCE_OP_RESIZE_CQ, &rz, sizeof rz);
  expect(refused(rc), "RESIZE_CQ of the victim's CQ: %s", err_name(rc));
  h.handle = v.qpn;
  sroce_qp_attr qa{};
  rc = c.call(SROCE_OP_QUERY_QP, &h, sizeof h, &qa, sizeof qa);
  expect(refused(rc), "QUERY_QP of the victim's QP: %s", err_name(rc));
  sroce_qp_attr err{};
  err.qp_state = IBV_QPS_ERR;
  rc = c.modify_qp(v.qpn, err, IBV_QP_STATE);
  expect(refused(rc), "MODIFY_QP of the victim's QP to ERR: %s", err_name(rc));
  rc = c.destroy_qp(v.qpn);
  expect(refused(rc), "DESTROY_QP of the victim's QP: %s", err_name(rc));
  std::vector<char> mine(4096);
  sroce_reg_mr_resp mr{};
  rc = c.reg_mr(v.pd, mine.data(), mine.size(), IBV_ACCESS_LOCAL_WRITE, &mr);
  expect(refused(rc), "REG_MR on the victim's PD: %s", err_name(rc));
  sroce_rereg_mr rr{};
  rr.lkey = v.lkey;
  rr.flags = IBV_REREG_MR_CHANGE_ACCESS;
  rr.access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
  rc = c.call(SROCE_OP_REREG_MR, &rr, sizeof rr, &mr, sizeof mr);
  expect(refused(rc), "REREG_MR of the victim's MR: %s", err_name(rc));
  sroce_alloc_mw mw{v.pd, IBV_MW_TYPE_2};
  rc = c.call(SROCE_OP_ALLOC_MW, &mw, sizeof mw);
  expect(refused(rc), "ALLOC_MW on the victim's PD: %s", err_name(rc));
  ClientQp q;
  rc = c.create_qp(v.pd, v.cq, v.cq, IBV_QPT_RC, 8, &q);
  expect(refused(rc), "CREATE_QP on the victim's PD and CQ: %s", err_name(rc));
}

void sizes(Peer& a) {
  AbiClient& c = a.c;
  sroce_reg_mr_resp mr{};
  int rc = c.reg_mr(a.pd, reinterpret_cast<void*>(0xfffffffffffff000ull), 0x2000,
                    IBV_ACCESS_LOCAL_WRITE, &mr);
  expect(refused(rc), "REG_MR whose end wraps uint64: %s", err_name(rc));
  rc = c.reg_mr(a.pd, a.buf.data(), 0, IBV_ACCESS_LOCAL_WRITE, &mr);
  expect(refused(rc), "REG_MR of length 0: %s", err_name(rc));
  rc = c.reg_mr(a.pd, a.buf.data(), 1ull << 62, IBV_ACCESS_LOCAL_WRITE, &mr);
  expect(refused(rc), "REG_MR of 2^62 bytes: %s", err_name(rc));
  rc = c.reg_mr(a.pd, reinterpret_cast<void*>(0x1000), 4096, IBV_ACCESS_LOCAL_WRITE, &mr);
  expect(refused(rc), "REG_MR of memory the process does not have: %s", err_name(rc));
  sroce_create_cq cq{};
  for (uint32_t n : {0u, 0x7fffffffu, 0xffffffffu}) {
    cq.cqe = n;
    rc = c.call(SROCE_OP_CREATE_CQ, &cq, sizeof cq);
    expect(refused(rc), "CREATE_CQ of %u entries: %s", n, err_name(rc));
  }
  sroce_create_qp q{};
  q.pd = a.pd;
  q.send_cq = q.recv_cq = a.cq.handle;
  q.qp_type = IBV_QPT_RC;
  const sroce_qp_cap caps[] = {{0xffffffff, 8, 1, 1, 0, 0},
                               {8, 8, 0xffffffff, 1, 0, 0},
                               {8, 8, 1, 1, 0xffffffff, 0},
                               {0x10000000, 0x10000000, 0x10000, 0x10000, 0x100000, 0}};
  for (const auto& cap : caps) {
    q.cap = cap;
    rc = c.call(SROCE_OP_CREATE_QP, &q, sizeof q);
    expect(refused(rc), "CREATE_QP with cap {%u, %u, %u, %u, inline %u}: %s", cap.max_send_wr,
           cap.max_recv_wr, cap.max_send_sge, cap.max_recv_sge, cap.max_inline_data, err_name(rc));
  }
}

// The completion of `wr_id` on the attacker's CQ (others, e.g. flushes, skipped).
bool completion(Peer& a, uint64_t wr_id, sroce_cqe& out) {
  for (int i = 0; i < 50; ++i) {
    for (const auto& e : a.c.wait_cqes(a.cq, 1, 200)) {
      if (e.wr_id == wr_id) {
        out = e;
        return true;
      }
    }
  }
  return false;
}

sroce_send_wqe wqe(uint64_t id, uint8_t opcode, uint16_t num_sge) {
  sroce_send_wqe w{};
  w.wr_id = id;
  w.opcode = opcode;
  w.send_flags = IBV_SEND_SIGNALED;
  w.num_sge = num_sge;
  return w;
}

// One malformed send WQE from `req` to `resp` on a fresh connected pair: an error
// completion on the requester.
void send_attack(Peer& req, Peer& resp, const char* what, sroce_send_wqe w, const void* tail,
                 size_t tail_len, int want = -1) {
  ClientQp qa, qb;
  if (pair(req, qa, resp, qb) != 0) {
    expect(false, "a fresh connected QP pair for: %s", what);
    return;
  }
  req.post_raw(qa, w, tail, tail_len);
  sroce_cqe e{};
  bool got = completion(req, w.wr_id, e);
  bool ok = got && e.status != IBV_WC_SUCCESS && (want < 0 || e.status == want);
  expect(ok, "%s: %s", what, got ? wc_status(e.status).c_str() : "no completion in 10 s");
  req.c.destroy_qp(qa.qpn);
  resp.c.destroy_qp(qb.qpn);
}

// `a` is the attacker on A (the victim's daemon), `b` on B. Local attacks are made on
// A, where the victim's lkey lives; remote ones from B at A's responder, where the
// victim's rkey lives.
void rings(Peer& a, Peer& b, const Victim& v) {
  uint64_t own = reinterpret_cast<uintptr_t>(a.buf.data());
  uint64_t bown = reinterpret_cast<uintptr_t>(b.buf.data());
  std::vector<sroce_sge> many(64, sroce_sge{own, 16, a.mr.lkey});
  send_attack(a, b, "SEND with num_sge 65535", wqe(101, IBV_WR_SEND, 0xffff), many.data(),
              many.size() * sizeof(sroce_sge), IBV_WC_LOC_QP_OP_ERR);
  sroce_sge s{v.addr, 256, v.lkey};
  send_attack(a, b, "SEND from the victim's memory with the victim's lkey",
              wqe(102, IBV_WR_SEND, 1), &s, sizeof s);
  s = sroce_sge{bown, 256, b.mr.lkey};
  auto w = wqe(103, IBV_WR_RDMA_WRITE, 1);
  w.remote_addr = v.addr;
  w.rkey = v.rkey;
  send_attack(b, a, "RDMA WRITE into the victim's memory with the victim's rkey", w, &s, sizeof s,
              IBV_WC_REM_ACCESS_ERR);
  w = wqe(104, IBV_WR_RDMA_READ, 1);
  w.remote_addr = v.addr;
  w.rkey = v.rkey;
  send_attack(b, a, "RDMA READ of the victim's memory with the victim's rkey", w, &s, sizeof s,
              IBV_WC_REM_ACCESS_ERR);
  w = wqe(105, IBV_WR_ATOMIC_FETCH_AND_ADD, 1);
  w.remote_addr = v.addr;
  w.rkey = v.rkey;
  w.compare_add = 1;
  sroce_sge s8{bown, 8, b.mr.lkey};
  send_attack(b, a, "FETCH_AND_ADD on the victim's memory with the victim's rkey", w, &s8,
              sizeof s8, IBV_WC_REM_ACCESS_ERR);
  s = sroce_sge{0xffffffffffffff00ull, 0x1000, a.mr.lkey};
  send_attack(a, b, "SEND of an SGE whose end wraps uint64", wqe(106, IBV_WR_SEND, 1), &s,
              sizeof s);
  s = sroce_sge{own, 0xffffffffu, a.mr.lkey};
  send_attack(a, b, "SEND of an SGE of 4 GiB - 1 over a 64 KiB MR", wqe(107, IBV_WR_SEND, 1), &s,
              sizeof s);
  s = sroce_sge{bown, 4096, b.mr.lkey};
  w = wqe(108, IBV_WR_RDMA_WRITE, 1);
  w.remote_addr = own + 0xffffffffffff8000ull;  // remote_addr + length wraps uint64
  w.rkey = a.mr.rkey;
  send_attack(b, a, "RDMA WRITE whose remote end wraps uint64", w, &s, sizeof s,
              IBV_WC_REM_ACCESS_ERR);
  w = wqe(109, IBV_WR_RDMA_WRITE, 1);
  w.remote_addr = own + a.buf.size() - 100;  // runs 3996 bytes past the MR
  w.rkey = a.mr.rkey;
  send_attack(b, a, "RDMA WRITE past the end of the target MR", w, &s, sizeof s,
              IBV_WC_REM_ACCESS_ERR);
  w = wqe(110, IBV_WR_SEND, 0);
  w.send_flags |= IBV_SEND_INLINE;
  w.inline_len = 0xffffffffu;
  send_attack(a, b, "SEND of 4 GiB - 1 inline bytes", w, nullptr, 0, IBV_WC_LOC_QP_OP_ERR);
  s = sroce_sge{own, 64, a.mr.lkey};
  w = wqe(111, 0xee, 1);
  send_attack(a, b, "a WQE of opcode 0xee", w, &s, sizeof s);

  // A receive WQE with a huge SGE count: an error completion on the receive side.
  {
    ClientQp qa, qb;
    if (!expect(pair(a, qa, b, qb) == 0, "QP pair for the receive attack")) return;
    uint32_t p = qa.rq.prod();
    sroce_recv_wqe r{112, 0xffffffffu, 0};
    memcpy(qa.rq.slot(p), &r, sizeof r);
    qa.rq.set_prod(p + 1);
    a.doorbell();
    sroce_cqe e{};
    bool got = completion(a, 112, e);
    expect(got && e.status != IBV_WC_SUCCESS, "receive WQE with num_sge 2^32 - 1: %s",
           got ? wc_status(e.status).c_str() : "no completion");
    a.c.destroy_qp(qa.qpn);
    b.c.destroy_qp(qb.qpn);
  }
  // Garbage producer indices: a send ring whose producer is 2^31 ahead, full
  // of 0xA5 bytes, and a CQ ring whose indices are garbage.
  {
    ClientQp qa, qb;
    if (!expect(pair(a, qa, b, qb) == 0, "QP pair for the ring index attack")) return;
    for (uint32_t i = 0; i < qa.sq.size(); ++i) memset(qa.sq.slot(i), 0xA5, qa.sq.entry_size());
    a.cq.ring.set_cons(0xdeadbeef);
    qa.sq.set_prod(qa.sq.cons() + 0x80000001u);
    a.doorbell();
    bool resync = false;
    for (int i = 0; i < 200 && !resync; ++i) {
      usleep(10000);
      resync = qa.sq.cons() == qa.sq.prod();
    }
    expect(resync && serves(a.c),
           "send ring producer 2^31 ahead over garbage entries, CQ indices garbage: nothing "
           "taken (consumer index set to the producer's: %d), still served",
           resync);
    a.cq.cons = a.cq.ring.prod();
    a.cq.ring.set_cons(a.cq.cons);
    a.c.destroy_qp(qa.qpn);
    b.c.destroy_qp(qb.qpn);
  }
}

}  // namespace

int attack(const Victim& v) {
  printf("attacker: uid %u gid %u against %s (A) and %s (B)\n", getuid(), getgid(),
         v.sock_a.c_str(), v.sock_b.c_str());
  garbage(v.sock_a);
  AbiClient c;
  if (!expect(c.connect(v.sock_a) == 0, "second connection")) return 1;
  hello_faults(c);
  foreign(c, v);
  bodies(c);
  Peer a, b;
  if (!expect(a.open(v.sock_a, v.ip_a, 1 << 16, 0x33) == 0 &&
                  b.open(v.sock_b, v.ip_b, 1 << 16, 0x44) == 0,
              "own contexts on A and B with PD, MR, CQ"))
    return 1;
  sizes(a);
  rings(a, b, v);
  size_t victims = std::count(a.buf.begin(), a.buf.end(), static_cast<char>(0x5A)) +
                   std::count(b.buf.begin(), b.buf.end(), static_cast<char>(0x5A));
  expect(victims == 0,
         "none of the victim's bytes reached the attacker's memory (%zu bytes of 0x5A)", victims);
  expect(serves(c), "the daemon still serves the attacker's first connection");
  printf("RESULT attacker: %d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}

}  // namespace sroce::hostile
