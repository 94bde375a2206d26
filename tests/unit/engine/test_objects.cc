// PD, MR, CQ, SRQ, AH verbs: the IBA access rules, limits and errnos, and
// the identifiers (handles, QPNs, keys): deterministic per seed, not
// guessable, never reused for a different object.
#include <algorithm>
#include <set>

#include "harness.h"

using namespace sroce;
using namespace sroce::test;

TEST_CASE("MR access rules (IBA 10.6): remote write/atomic need local write", "[mr]") {
  Host h(0x0a000001);
  const uint64_t a = h.addr(0);
  CHECK(h->reg_mr(h.pd, a, 4096, kAccessRemoteWrite).error().code == EINVAL);
  CHECK(h->reg_mr(h.pd, a, 4096, kAccessRemoteAtomic).error().code == EINVAL);
  CHECK(h->reg_mr(h.pd, a, 4096, kAccessRemoteAtomic | kAccessRemoteRead).error().code == EINVAL);
  CHECK(h->reg_mr(h.pd, a, 4096, kAccessRemoteRead).ok());
  CHECK(h->reg_mr(h.pd, a, 4096, 0).ok());
  CHECK(h->reg_mr(h.pd, a, 4096, kAccessLocalWrite | kAccessRemoteWrite).ok());
  CHECK(h->reg_mr(h.pd, a, 4096, kAccessLocalWrite | kAccessRemoteAtomic).ok());
  CHECK(h->reg_mr(h.pd, a, 4096, 1u << 12).error().code == EINVAL);  // unknown flag
  CHECK(h->reg_mr(0x77, a, 4096, 0).error().code == EINVAL);         // no such PD
  CHECK(h->reg_mr(h.pd, UINT64_MAX - 10, 100, 0).error().code == EINVAL);
  CHECK(h->dereg_mr(0x12345).error().code == EINVAL);
}

TEST_CASE("MR table full is ENOMEM - a deregistered key is dead", "[mr]") {
  EngineConfig cfg;
  cfg.max_mrs = 3;
  Host h(0x0a000001, 1, cfg);  // uses one MR
  auto m1 = h->reg_mr(h.pd, h.addr(0), 64, kAccessLocalWrite);
  auto m2 = h->reg_mr(h.pd, h.addr(0), 64, kAccessLocalWrite);
  REQUIRE(m1.ok());
  REQUIRE(m2.ok());
  CHECK(h->reg_mr(h.pd, h.addr(0), 64, 0).error().code == ENOMEM);
  REQUIRE(h->dereg_mr(m1->lkey).ok());
  CHECK(h->dereg_mr(m1->lkey).error().code == EINVAL);
  auto m3 = h->reg_mr(h.pd, h.addr(0), 64, kAccessLocalWrite);
  REQUIRE(m3.ok());             // the slot is reused ...
  CHECK(m3->lkey != m1->lkey);  // ... with other keys
  CHECK(m3->rkey != m1->rkey);
}

TEST_CASE("keys: low byte varies per registration / lkey != rkey / deterministic per seed",
          "[mr][keys]") {
  auto keys = [](uint64_t seed) {
    Host h(0x0a000001, seed);
    std::vector<MrKeys> v;
    for (int i = 0; i < 200; ++i) {
      auto k = h->reg_mr(h.pd, h.addr(0), 64, kAccessLocalWrite);
      REQUIRE(k.ok());
      v.push_back(*k);
      if (i % 3 == 0) REQUIRE(h->dereg_mr(k->lkey).ok());  // slots get reused
    }
    return v;
  };
  auto a = keys(7), b = keys(7), c = keys(8);
  REQUIRE(a.size() == b.size());
  std::set<uint32_t> lk, low, all;
  size_t same_as_c = 0, sequential = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    CHECK(a[i].lkey == b[i].lkey);  // reproducible
    CHECK(a[i].rkey == b[i].rkey);
    CHECK(a[i].lkey != a[i].rkey);
    same_as_c += a[i].rkey == c[i].rkey;
    lk.insert(a[i].lkey);
    low.insert(a[i].rkey & 0xff);
    all.insert(a[i].rkey);
    if (i && (a[i].rkey >> 8) == (a[i - 1].rkey >> 8) + 1) ++sequential;
  }
  CHECK(lk.size() == a.size());  // never reissued
  CHECK(all.size() == a.size());
  CHECK(low.size() > 100);  // the key byte is spread out
  CHECK(same_as_c < 3);     // another seed, other keys
  CHECK(sequential < 3);    // not a counter
}

TEST_CASE("QPNs: never 0 or 1 / unique / unpredictable without the seed", "[qp][keys]") {
  auto qpns = [](uint64_t seed) {
    Host h(0x0a000001, seed);
    std::vector<Qpn> v;
    for (int i = 0; i < 300; ++i) {
      Qpn q = make_qp(h, {.max_send_wr = 1, .max_recv_wr = 1});
      v.push_back(q);
      if (i % 2) REQUIRE(h->destroy_qp(q).ok());
    }
    return v;
  };
  auto a = qpns(1), b = qpns(1), c = qpns(2);
  CHECK(a == b);
  std::set<Qpn> uniq(a.begin(), a.end());
  CHECK(uniq.size() == a.size());
  size_t equal = 0, small = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    CHECK(a[i] > 1);
    CHECK(a[i] <= 0xffffff);
    equal += a[i] == c[i];
    small += a[i] < 0x1000;
  }
  CHECK(equal < 3);
  CHECK(small < 10);
}

TEST_CASE("PD/CQ/SRQ/AH: EBUSY while in use / stale handles EINVAL", "[objects]") {
  Host h(0x0a000001);
  const Handle pd = *h->alloc_pd();
  CHECK(pd != kNoHandle);
  auto mr = h->reg_mr(pd, h.addr(0), 64, 0);
  CHECK(h->dealloc_pd(pd).error().code == EBUSY);
  REQUIRE(h->dereg_mr(mr->lkey).ok());
  AhAttr ah_attr;
  const Handle ah = *h->create_ah(pd, ah_attr);
  CHECK(h->dealloc_pd(pd).error().code == EBUSY);
  REQUIRE(h->destroy_ah(ah).ok());
  CHECK(h->destroy_ah(ah).error().code == EINVAL);
  const Handle srq = *h->create_srq(pd, {4, 1, 0});
  CHECK(h->dealloc_pd(pd).error().code == EBUSY);
  REQUIRE(h->destroy_srq(srq).ok());
  const Handle cq = *h->create_cq(16);
  QpInitAttr qa;
  qa.send_cq = qa.recv_cq = cq;
  qa.cap = {4, 4, 1, 1, 0};
  const Qpn q = *h->create_qp(pd, qa);
  CHECK(h->dealloc_pd(pd).error().code == EBUSY);
  CHECK(h->destroy_cq(cq).error().code == EBUSY);
  REQUIRE(h->destroy_qp(q).ok());
  REQUIRE(h->destroy_cq(cq).ok());
  REQUIRE(h->dealloc_pd(pd).ok());
  CHECK(h->dealloc_pd(pd).error().code == EINVAL);
  CHECK(h->destroy_cq(cq).error().code == EINVAL);
  std::vector<Wc> wc(4);
  CHECK(h->poll_cq(cq, wc) == -EINVAL);
  CHECK(h->req_notify_cq(cq, false) == EINVAL);
  // A new PD in the freed slot does not answer to the old handle.
  const Handle pd2 = *h->alloc_pd();
  CHECK(pd2 != pd);
}

TEST_CASE("CQ / SRQ and AH limits", "[objects]") {
  EngineConfig cfg;
  cfg.max_cqe = 4096;  // the Host makes a 4096-entry CQ
  cfg.max_cqs = 2;
  cfg.max_qp_wr = 50;
  cfg.max_sge = 3;
  Host h(0x0a000001, 1, cfg);  // uses one CQ
  CHECK(h->create_cq(0).error().code == EINVAL);
  CHECK(h->create_cq(4097).error().code == EINVAL);
  CHECK(h->create_cq(100).ok());
  CHECK(h->create_cq(1).error().code == ENOMEM);
  CHECK(h->create_srq(h.pd, {0, 1, 0}).error().code == EINVAL);
  CHECK(h->create_srq(h.pd, {51, 1, 0}).error().code == EINVAL);
  CHECK(h->create_srq(h.pd, {50, 4, 0}).error().code == EINVAL);
  CHECK(h->create_srq(0x99, {50, 1, 0}).error().code == EINVAL);
  auto srq = h->create_srq(h.pd, {50, 3, 0});
  REQUIRE(srq.ok());
  RecvWr r;
  std::vector<Sge> four(4, sge(h, 0, 8));
  r.sgl = four;
  CHECK(h->post_srq_recv(*srq, r) == EINVAL);
  r.sgl = std::span(four).first(1);
  for (int i = 0; i < 50; ++i) REQUIRE(h->post_srq_recv(*srq, r) == 0);
  CHECK(h->post_srq_recv(*srq, r) == ENOMEM);
  CHECK(h->post_srq_recv(0x42, r) == EINVAL);
  AhAttr bad;
  bad.sgid_index = 1;
  CHECK(h->create_ah(h.pd, bad).error().code == EINVAL);
  bad.sgid_index = 0;
  bad.port_num = 2;
  CHECK(h->create_ah(h.pd, bad).error().code == EINVAL);
}

TEST_CASE("ZERO_BASED MR: remote addresses are offsets", "[mr]") {
  Pair p;
  auto z = p.b->reg_mr(p.b.pd, p.b.addr(0x50000), 4096,
                       kAccessLocalWrite | kAccessRemoteWrite | kAccessZeroBased);
  REQUIRE(z.ok());
  p.a.mem.fill(p.a.addr(0), 100, 3);
  REQUIRE(post(p.a, p.qa, WrOpcode::kRdmaWrite, {sge(p.a, 0, 100)}, 1, kSendSignaled, 0x10,
               z->rkey) == 0);
  auto wa = wait_wc(p.w, p.a, 1);
  REQUIRE(wa.size() == 1);
  CHECK(wa[0].status == WcStatus::kSuccess);
  CHECK(p.b.mem.same(p.b.addr(0x50010), p.a.mem, p.a.addr(0), 100));
  REQUIRE(post(p.a, p.qa, WrOpcode::kRdmaWrite, {sge(p.a, 0, 100)}, 2, kSendSignaled, 4000,
               z->rkey) == 0);
  wa = wait_wc(p.w, p.a, 1);
  REQUIRE(wa.size() == 1);
  CHECK(wa[0].status == WcStatus::kRemAccessErr);  // 4000 + 100 > 4096
}

TEST_CASE("to_string covers every status and drop reason", "[objects]") {
  for (int i = 0; i <= static_cast<int>(WcStatus::kGeneralErr); ++i)
    CHECK(std::string(to_string(static_cast<WcStatus>(i))) != "?");
  for (int i = 0; i < kRxDropCount; ++i)
    CHECK(std::string(to_string(static_cast<RxDropReason>(i))) != "?");
  CHECK(std::string(to_string(WcStatus::kRetryExcErr)) == "RETRY_EXC_ERR");
  CHECK(std::string(to_string(QpState::kSqd)) == "SQD");
}
