// A small client speaking the sroce ABI (userspace/abi/sroce_abi.h) to
// sroced, the way the provider does, without libibverbs: tests drive the
// daemon with it.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "sroce_abi.h"

namespace sroce::test {

// A mapped ring of the ABI: producer/consumer helpers as the provider has.
class ClientRing {
 public:
  ClientRing() = default;
  explicit ClientRing(std::byte* at) : hdr_(reinterpret_cast<sroce_ring*>(at)), entries_(at + kEntries) {}
  static constexpr size_t kEntries = (sizeof(sroce_ring) + 63) & ~size_t{63};

  bool valid() const { return hdr_ != nullptr; }
  uint32_t size() const { return hdr_->size; }
  uint32_t entry_size() const { return hdr_->entry_size; }
  std::byte* slot(uint32_t i) const { return entries_ + size_t{i & (size() - 1)} * entry_size(); }
  uint32_t prod() const { return ref(hdr_->prod).load(std::memory_order_acquire); }
  uint32_t cons() const { return ref(hdr_->cons).load(std::memory_order_acquire); }
  void set_prod(uint32_t v) const { ref(hdr_->prod).store(v, std::memory_order_release); }
  void set_cons(uint32_t v) const { ref(hdr_->cons).store(v, std::memory_order_release); }
  bool sleeping() const {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    return ref(hdr_->sleeping).load(std::memory_order_relaxed) != 0;
  }
  void set_armed(uint32_t v) const { ref(hdr_->armed).store(v, std::memory_order_seq_cst); }
  uint32_t armed() const { return ref(hdr_->armed).load(std::memory_order_acquire); }
  uint32_t error() const { return ref(hdr_->error).load(std::memory_order_acquire); }

 private:
  static std::atomic_ref<uint32_t> ref(uint32_t& v) { return std::atomic_ref<uint32_t>(v); }
  sroce_ring* hdr_ = nullptr;
  std::byte* entries_ = nullptr;
};

struct Mapping {
  void* base = nullptr;
  size_t len = 0;
  int fd = -1;
  std::byte* at(size_t off) const { return static_cast<std::byte*>(base) + off; }
};

struct ClientCq {
  uint32_t handle = 0;
  uint32_t cqe = 0;
  Mapping map;
  ClientRing ring;
  uint32_t cons = 0;
};

struct ClientQp {
  uint32_t qpn = 0;
  sroce_qp_cap cap{};
  Mapping map;
  ClientRing sq, rq;
};

class AbiClient {
 public:
  AbiClient() = default;
  ~AbiClient();
  AbiClient(const AbiClient&) = delete;
  AbiClient& operator=(const AbiClient&) = delete;

  // 0 or -errno.
  int connect(const std::string& path);
  // Sends `op` and waits (up to 5 s) for the reply. Returns the reply
  // status (0 or -errno), or -EIO / -ETIMEDOUT locally.
  int call(uint16_t op, const void* body, size_t len, void* reply = nullptr, size_t cap = 0,
           std::vector<int>* fds = nullptr, size_t* reply_len = nullptr);
  // The same, passing `send_fd` (SCM_RIGHTS; -1: none) with the request.
  int call_fd(uint16_t op, const void* body, size_t len, int send_fd, void* reply = nullptr, size_t cap = 0,
              std::vector<int>* fds = nullptr, size_t* reply_len = nullptr);
  // Raw bytes on the socket (garbage tests).
  bool send_raw(const void* p, size_t len);

  int hello();  // as the provider: /proc/self/mem and a probe it reads back
  // HELLO with `mem_fd` (-1: none) and `flags`, and a probe that reads back or (`wrong_probe`)
  // does not. For tests of what the daemon refuses.
  int hello_with(int mem_fd, uint32_t flags, bool wrong_probe);
  std::string stats();  // SROCE_OP_STATS JSON text ("" on failure)
  int alloc_pd(uint32_t* pd);
  int reg_mr(uint32_t pd, const void* addr, size_t len, uint32_t access, sroce_reg_mr_resp* out);
  int create_cq(uint32_t cqe, uint32_t channel, ClientCq* cq);
  int create_qp(uint32_t pd, uint32_t send_cq, uint32_t recv_cq, uint8_t type, uint32_t wr, ClientQp* qp);
  int modify_qp(uint32_t qpn, const sroce_qp_attr& a, uint32_t mask);
  int destroy_qp(uint32_t qpn);
  int create_channel(uint32_t* handle, int* fd);

  // Posts through the rings and rings the doorbell when the daemon sleeps.
  void post_send(ClientQp& qp, const sroce_send_wqe& w, const sroce_sge* sge);
  void post_recv(ClientQp& qp, uint64_t wr_id, const sroce_sge* sge, uint32_t n);
  // Polls the CQ ring until `n` completions arrive or `timeout_ms` passes.
  std::vector<sroce_cqe> wait_cqes(ClientCq& cq, size_t n, int timeout_ms);

  int fd() const { return fd_; }
  int async_fd() const { return async_fd_; }
  int doorbell_fd() const { return doorbell_fd_; }
  uint32_t context_id() const { return context_; }

 private:
  static Mapping map_fd(int fd, size_t len);
  void ring_doorbell(const ClientRing& r);

  int fd_ = -1;
  int async_fd_ = -1;
  int doorbell_fd_ = -1;
  uint32_t context_ = 0;
  uint64_t seq_ = 0;
  std::vector<Mapping> maps_;
};

}  // namespace sroce::test
