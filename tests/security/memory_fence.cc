// The DEREG_MR / REREG_MR fence (docs/security.md, "Memory"): once deregistration returns, no
// WQE or responder touches that MR's memory again; in-flight work ends in error completions.
// Deterministic, on two engines back to back (tests/unit/engine/harness.h): a message is
// stopped after three of its packets, the MR goes away, its memory gets new contents (as if
// reused), and the rest of the message must carry or place none of it. In every case the
// memory stays reachable through another MR of the same owner (the harness's MR over all of
// it), so only the fence, not a missing range, can stop the access.
#include "harness.h"

using namespace sroce;
using namespace sroce::test;

namespace {

constexpr uint32_t kMsg = 256 * 1024;  // 256 packets at MTU 1024
constexpr uint32_t kSent = 3 * 1024;   // what left before the MR went away

// One packet of host `from` onto the wire (the wire pumps nothing else).
bool step(Pair& p, int from) {
  std::vector<std::byte> buf(Engine::kMaxPacket);
  Host& h = from == 0 ? p.a : p.b;
  auto tx = h->poll_transmit(buf, p.w.now);
  if (!tx) return false;
  p.w.deliver(Wire::make(from, std::span(buf.data(), tx->len), tx->meta));
  return true;
}

bool all_zero(VecMemory& m, uint64_t addr, size_t n) {
  const uint8_t* p = m.at(addr);
  for (size_t i = 0; i < n; ++i)
    if (p[i] != 0) return false;
  return true;
}

}  // namespace

TEST_CASE("fence: a started RDMA WRITE stops reading a deregistered MR (LOC_PROT_ERR)", "[security][fence]") {
  Pair p;
  auto k = p.a->reg_mr(p.a.pd, p.a.addr(0x100000), kMsg, kAccessLocalWrite);
  REQUIRE(k.ok());
  p.a.mem.fill(p.a.addr(0x100000), kMsg, 1);
  REQUIRE(post(p.a, p.qa, WrOpcode::kRdmaWrite, {Sge{p.a.addr(0x100000), kMsg, k->lkey}}, 7, kSendSignaled,
               p.b.addr(0x200000), p.b.mr.rkey) == 0);
  for (int i = 0; i < 3; ++i) REQUIRE(step(p, 0));
  CHECK(p.b.mem.same(p.b.addr(0x200000), p.a.mem, p.a.addr(0x100000), kSent));
  REQUIRE(p.a->dereg_mr(k->lkey).ok());
  p.a.mem.fill(p.a.addr(0x100000), kMsg, 2);  // the memory has a new use
  auto wc = wait_wc(p.w, p.a, 1);
  REQUIRE(wc.size() == 1);
  CHECK(wc[0].wr_id == 7);
  CHECK(wc[0].status == WcStatus::kLocProtErr);
  CHECK(all_zero(p.b.mem, p.b.addr(0x200000) + kSent, kMsg - kSent));  // not one byte more left
}

TEST_CASE("fence: a SEND's later SGEs are not read after their MR is deregistered", "[security][fence]") {
  Pair p;
  auto k = p.a->reg_mr(p.a.pd, p.a.addr(0x100000), kMsg, kAccessLocalWrite);
  REQUIRE(k.ok());
  p.a.mem.fill(p.a.addr(0x100000), kMsg, 3);
  REQUIRE(post_recv(p.b, p.qb, {sge(p.b, 0x200000, kMsg)}, 1) == 0);
  REQUIRE(post(p.a, p.qa, WrOpcode::kSend, {Sge{p.a.addr(0x100000), kMsg, k->lkey}}, 8) == 0);
  for (int i = 0; i < 3; ++i) REQUIRE(step(p, 0));
  REQUIRE(p.a->dereg_mr(k->lkey).ok());
  auto wc = wait_wc(p.w, p.a, 1);
  REQUIRE(wc.size() == 1);
  CHECK(wc[0].status == WcStatus::kLocProtErr);
  CHECK(all_zero(p.b.mem, p.b.addr(0x200000) + kSent, kMsg - kSent));
}

TEST_CASE("fence: the responder places no more of a WRITE into a deregistered MR", "[security][fence]") {
  Pair p;
  auto k = p.b->reg_mr(p.b.pd, p.b.addr(0x200000), kMsg, kAccessLocalWrite | kAccessRemoteWrite);
  REQUIRE(k.ok());
  p.a.mem.fill(p.a.addr(0x100000), kMsg, 4);
  REQUIRE(post(p.a, p.qa, WrOpcode::kRdmaWrite, {sge(p.a, 0x100000, kMsg)}, 9, kSendSignaled,
               p.b.addr(0x200000), k->rkey) == 0);
  for (int i = 0; i < 3; ++i) REQUIRE(step(p, 0));
  CHECK(p.b.mem.same(p.b.addr(0x200000), p.a.mem, p.a.addr(0x100000), kSent));
  REQUIRE(p.b->dereg_mr(k->lkey).ok());
  auto wc = wait_wc(p.w, p.a, 1);
  REQUIRE(wc.size() == 1);
  CHECK(wc[0].status == WcStatus::kRemAccessErr);
  CHECK(all_zero(p.b.mem, p.b.addr(0x200000) + kSent, kMsg - kSent));
}

TEST_CASE("fence: READ responses stop reading a deregistered MR", "[security][fence]") {
  Pair p;
  auto k = p.b->reg_mr(p.b.pd, p.b.addr(0x200000), kMsg, kAccessRemoteRead);
  REQUIRE(k.ok());
  p.b.mem.fill(p.b.addr(0x200000), kMsg, 5);
  REQUIRE(post(p.a, p.qa, WrOpcode::kRdmaRead, {sge(p.a, 0x100000, kMsg)}, 10, kSendSignaled,
               p.b.addr(0x200000), k->rkey) == 0);
  REQUIRE(step(p, 0));                              // the READ request
  for (int i = 0; i < 3; ++i) REQUIRE(step(p, 1));  // three responses
  CHECK(p.a.mem.same(p.a.addr(0x100000), p.b.mem, p.b.addr(0x200000), kSent));
  REQUIRE(p.b->dereg_mr(k->lkey).ok());
  p.b.mem.fill(p.b.addr(0x200000), kMsg, 6);  // what the memory holds now must never leave
  auto wc = wait_wc(p.w, p.a, 1);
  REQUIRE(wc.size() == 1);
  CHECK(wc[0].status != WcStatus::kSuccess);
  CHECK(all_zero(p.a.mem, p.a.addr(0x100000) + kSent, kMsg - kSent));
}

TEST_CASE("fence: REREG_MR with a new range ends a WRITE in flight; neither range gets more",
          "[security][fence]") {
  Pair p;
  const uint32_t rw = kAccessLocalWrite | kAccessRemoteWrite;
  auto k = p.b->reg_mr(p.b.pd, p.b.addr(0x200000), kMsg, rw);
  REQUIRE(k.ok());
  p.a.mem.fill(p.a.addr(0x100000), kMsg, 7);
  REQUIRE(post(p.a, p.qa, WrOpcode::kRdmaWrite, {sge(p.a, 0x100000, kMsg)}, 11, kSendSignaled,
               p.b.addr(0x200000), k->rkey) == 0);
  for (int i = 0; i < 3; ++i) REQUIRE(step(p, 0));
  REQUIRE(p.b->rereg_mr(k->lkey, kReregTranslation, kNoHandle, p.b.addr(0x600000), kMsg, 0).ok());
  auto wc = wait_wc(p.w, p.a, 1);
  REQUIRE(wc.size() == 1);
  CHECK(wc[0].status == WcStatus::kRemAccessErr);
  CHECK(all_zero(p.b.mem, p.b.addr(0x200000) + kSent, kMsg - kSent));
  CHECK(all_zero(p.b.mem, p.b.addr(0x600000), kMsg));
}

TEST_CASE("fence: work that starts after DEREG_MR is refused by its key, as before", "[security][fence]") {
  Pair p;
  auto k = p.a->reg_mr(p.a.pd, p.a.addr(0x100000), 4096, kAccessLocalWrite);
  REQUIRE(k.ok());
  REQUIRE(p.a->dereg_mr(k->lkey).ok());
  REQUIRE(post(p.a, p.qa, WrOpcode::kRdmaWrite, {Sge{p.a.addr(0x100000), 4096, k->lkey}}, 12, kSendSignaled,
               p.b.addr(0x200000), p.b.mr.rkey) == 0);
  auto wc = wait_wc(p.w, p.a, 1);
  REQUIRE(wc.size() == 1);
  CHECK(wc[0].status == WcStatus::kLocProtErr);
  CHECK(all_zero(p.b.mem, p.b.addr(0x200000), 4096));
}
