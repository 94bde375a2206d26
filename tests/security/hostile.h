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

// Connects an RC QP to `dest` at `peer_ip` (IPv4) and takes it to RTS.
int connect_qp(test::AbiClient& c, uint32_t qpn, uint32_t dest, const std::string& peer_ip);

// Memory of its own mapping (mmap picks a random address per process). Not the heap:
// ASan's allocator puts two runs of one binary at the same addresses, and the socket
// path's untagged fallback (memory.h) refuses an address two contexts registered as
// ambiguous, which would fail the attacks for the wrong reason.
class MappedBuf {
 public:
  ~MappedBuf();
  void assign(size_t n, uint8_t fill);
  char* data() const { return p_; }
  size_t size() const { return n_; }
  char& operator[](size_t i) const { return p_[i]; }
  char* begin() const { return p_; }
  char* end() const { return p_ + n_; }

 private:
  char* p_ = nullptr;
  size_t n_ = 0;
};

// A context on one daemon (its host's address `ip`) with a PD, an MR over `buf`, a CQ.
struct Peer {
  test::AbiClient c;
  std::string ip;
  uint32_t pd = 0;
  sroce_reg_mr_resp mr{};
  test::ClientCq cq;
  MappedBuf buf;
  int open(const std::string& socket, const std::string& host_ip, size_t bytes, uint8_t fill);
  // Writes a send WQE and `tail` (SGEs or inline bytes, cut to the slot) as is.
  void post_raw(test::ClientQp& qp, const sroce_send_wqe& w, const void* tail, size_t tail_len);
  void doorbell();
};

// An RC QP on `a` connected to one on `b` (the two daemons, or the same one).
int pair(Peer& a, test::ClientQp& qa, Peer& b, test::ClientQp& qb);

// What the attacker knows of the victim (its numbers are not secret: a guess),
// and where the two daemons are: A serves the victim's MR, B the other end.
struct Victim {
  uint32_t pd, lkey, rkey, qpn, cq, len;
  uint64_t addr;
  std::string sock_a, sock_b, ip_a, ip_b;
};

// Malformed messages the attacker sends that the daemon drops (counted in
// ctl_garbage): the test checks at least this many were counted.
constexpr int kGarbageSent = 9;

// The attacker (hostile_attacks.cc): 0 when every attack failed as it must.
int attack(const Victim& v);

}  // namespace sroce::hostile
