// The hostile client's parts (hostile.cc: the test; hostile_attacks.cc: the attacker).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "abi_client.h"

namespace sroce::hostile {

extern int passed, failed;
// Prints "PASS ..." or "FAIL ..." and counts it; returns ok.
bool expect(bool ok, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

// Connects an RC QP to `dest` on the same daemon (127.0.0.1) and takes it to RTS.
int connect_qp(test::AbiClient& c, uint32_t qpn, uint32_t dest);

// A context with a PD, an MR over `buf` and a CQ.
struct Peer {
  test::AbiClient c;
  uint32_t pd = 0;
  sroce_reg_mr_resp mr{};
  test::ClientCq cq;
  std::vector<char> buf;
  int open(const std::string& socket, size_t bytes, uint8_t fill);
  // Two RC QPs on the CQ, connected to each other.
  int pair(test::ClientQp& a, test::ClientQp& b);
  // Writes a send WQE and `tail` (SGEs or inline bytes, cut to the slot) as is.
  void post_raw(test::ClientQp& qp, const sroce_send_wqe& w, const void* tail, size_t tail_len);
  void doorbell();
};

// What the attacker knows of the victim (its numbers are not secret: a guess).
struct Victim {
  uint32_t pd, lkey, rkey, qpn, cq, len;
  uint64_t addr;
};

// Malformed messages the attacker sends that the daemon drops (counted in
// ctl_garbage): the test checks at least this many were counted.
constexpr int kGarbageSent = 9;

// The attacker (hostile_attacks.cc): 0 when every attack failed as it must.
int attack(const std::string& socket, const Victim& v);

}  // namespace sroce::hostile
