// Next-hop MAC addresses for the DPDK datapath, from the kernel's tables.
//
// The DPDK datapath writes its own Ethernet headers, so it needs the MAC of
// the next hop towards each destination. It does not run ARP itself: with the
// af_xdp PMD the kernel keeps the interface, answers and sends ARP (the XDP
// program passes it), and owns the neighbour table; the datapath reads it.
//
//   hot path (the loop's thread)        resolver thread (control path)
//   lookup(dst) -> MAC or miss;         every 2 ms: for each wanted dst,
//   a miss adds dst as "wanted"         route (RTM_GETROUTE) -> next hop,
//   (no lock, no syscall)               neighbour (RTM_GETNEIGH) -> MAC, set();
//                                       no entry yet: one UDP datagram to the
//                                       discard port makes the kernel ARP.
//                                       Every second: re-read every entry.
//
// The table is a fixed array, open-addressed by IPv4 address. Each field
// has a single writer: the loop thread writes keys (it inserts wanted
// destinations), the resolver writes MACs; both are single atomic words, so
// a reader sees either the old or the new MAC, never a torn one.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>

#include "frame.h"

namespace sroce::dpdk {

class NeighbourTable {
 public:
  explicit NeighbourTable(uint32_t capacity);  // rounded up to a power of two

  // Hot path. True and `mac` set when dst's next hop is known. A miss adds
  // dst (once) for the resolver; false when the table is full as well.
  bool lookup(uint32_t dst, MacAddr& mac);

  // Control path.
  // A fixed entry (dpdk.static_neighbours): inserted before the loop runs,
  // never overwritten by the resolver.
  bool add_static(uint32_t dst, const MacAddr& mac);
  // Resolver only; true when the entry changed (new, or another MAC).
  bool set(uint32_t dst, const MacAddr& mac);
  template <typename F>
  void for_each(F&& f) const {  // f(dst, resolved, is_static)
    for (uint32_t i = 0; i <= mask_; ++i) {
      uint32_t ip = slots_[i].ip.load(std::memory_order_acquire);
      if (ip == 0) continue;
      uint64_t v = slots_[i].mac.load(std::memory_order_acquire);
      f(ip, (v & kValid) != 0, (v & kStatic) != 0);
    }
  }
  uint32_t size() const { return used_.load(std::memory_order_relaxed); }
  uint32_t capacity() const { return mask_ + 1; }

  // IPv6 destinations live in the same table under a 32-bit handle from the reserved
  // 240.0.0.0/4 (never an IPv4 destination): handle6() (loop thread; hot path, no syscall)
  // gives dst's handle, writing its address into keys6_ before lookup() publishes the handle
  // (the slot's release store), so the resolver, which sees the handle in for_each, reads a
  // complete address with key6(). 0 when the handle space is full.
  static constexpr uint32_t kHandle6 = 0xf0000000u;
  static bool is_handle6(uint32_t k) { return (k & 0xf0000000u) == kHandle6; }
  uint32_t handle6(const uint8_t dst[16]);
  const uint8_t* key6(uint32_t handle) const { return keys6_[handle & ~kHandle6].data(); }

 private:
  static constexpr uint64_t kValid = 1ull << 63;
  static constexpr uint64_t kStatic = 1ull << 62;
  struct Slot {
    std::atomic<uint32_t> ip{0};   // 0 = empty (0.0.0.0 is never a destination)
    std::atomic<uint64_t> mac{0};  // kValid | kStatic | 48-bit MAC; 0 = wanted
  };
  Slot* find(uint32_t ip, bool insert);

  std::unique_ptr<Slot[]> slots_;
  uint32_t mask_;
  std::atomic<uint32_t> used_{0};
  // IPv6: addresses by handle index (written once), and the loop thread's index to them.
  std::unique_ptr<std::array<uint8_t, 16>[]> keys6_;
  std::unique_ptr<int32_t[]> index6_;  // open-addressed, -1 empty, else a keys6_ index
  uint32_t count6_ = 0;
};

// The resolver thread. Runs in the daemon's network namespace (threads share
// it), on the interface `ifindex`: routes through another interface are not
// ours and are left unresolved (counted in `unroutable`).
class NeighbourResolver {
 public:
  NeighbourResolver(NeighbourTable& table, int ifindex);
  ~NeighbourResolver();  // stops and joins
  bool start(std::string& error);
  void stop();

  struct Stats {
    std::atomic<uint64_t> lookups{0};    // route + neighbour queries
    std::atomic<uint64_t> resolved{0};   // set() calls that changed an entry
    std::atomic<uint64_t> probes{0};     // discard datagrams sent to make the kernel ARP
    std::atomic<uint64_t> unroutable{0}; // no route, or a route through another interface
  };
  const Stats& stats() const { return stats_; }

  // One query, for the thread and the tests: the next hop's MAC for `dst`
  // as the kernel knows it now. nullopt with `*need_probe` set when the
  // kernel has no valid entry (it must be made to resolve one).
  std::optional<MacAddr> query(uint32_t dst, bool* need_probe, bool* stale);
  // The same for an IPv6 destination (16 bytes, network order; neighbour discovery), and its
  // probe: the thread uses them for IPv6 handles (NeighbourTable::handle6).
  std::optional<MacAddr> query6(const uint8_t dst[16], bool* need_probe, bool* stale);
  void probe6(const uint8_t dst[16]);

 private:
  void run();
  bool route(uint32_t dst, uint32_t& next_hop, int& oif);
  bool neighbour(uint32_t ip, int oif, MacAddr& mac, uint16_t& state);
  bool route_any(int family, const uint8_t* dst, uint8_t* next_hop, int& oif);
  bool neighbour_any(int family, const uint8_t* ip, int oif, MacAddr& mac, uint16_t& state);
  void probe(uint32_t dst);
  bool request(void* msg, size_t len, void* reply, size_t cap, size_t& got);

  NeighbourTable& table_;
  int ifindex_;
  int nl_ = -1;
  int udp_ = -1;
  int udp6_ = -1;
  uint32_t seq_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  Stats stats_;
  // Resolver-private: when each destination was last probed (TSC-free: the
  // thread counts its own ticks).
  std::unordered_map<uint32_t, uint64_t> last_probe_;
  uint64_t tick_ = 0;
};

// "A.B.C.D=xx:xx:xx:xx:xx:xx" -> (host-order address, MAC); false if malformed.
bool parse_static_neighbour(const std::string& s, uint32_t& ip, MacAddr& mac);

}  // namespace sroce::dpdk
