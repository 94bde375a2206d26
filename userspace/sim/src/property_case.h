// Private to the property harness: the generated case (hosts, regions,
// QP ends, expectations) shared by its generator (property_gen.cc) and its
// oracle (property_check.cc).
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "sroce/sim/network.h"
#include "sroce/sim/property.h"
#include "sroce/sim/verbs_setup.h"

namespace sroce::sim::prop {

constexpr uint64_t kRegionBytes = 256u << 10;
constexpr uint64_t kSmallRegion = 8192;
constexpr uint64_t kGuard = 64;    // unregistered bytes around every region
constexpr int kDataRegions = 4;
constexpr uint64_t kRecvFlag = 1ull << 63;  // wr_id namespace of receive WRs
constexpr uint32_t kMaxSge = 4;

struct Region {
  uint64_t addr = 0;
  uint64_t len = 0;
  MrKeys keys;
  uint64_t used = 0;
};

struct Side {
  Host* host = nullptr;
  Handle pd = kNoHandle;
  std::vector<Region> data;   // full access
  Region ro;                  // remote read only
  Region wo;                  // remote write only
  Region noatomic;            // remote read + write, no atomic
  MrKeys dead;                // registered, then deregistered
  uint64_t base = 0;          // arena base
  uint64_t used = 0;          // arena prefix in use (checked against the shadow)
  std::vector<std::byte> shadow;
  std::vector<uint8_t> dont_care;
};

struct Expected {
  uint64_t wr_id = 0;
  WcStatus status = WcStatus::kSuccess;
  WcOpcode opcode = WcOpcode::kSend;
  bool check_len = false;
  uint32_t byte_len = 0;
  bool imm = false;
  uint32_t imm_data = 0;
  std::string what;
};

struct End {
  QpEnd q;
  int side = 0;
  int peer = 0;  // index of the other end in Case::ends_
  std::deque<Expected> sq, rq;
  uint64_t next_wr = 1;
  Time last_recv_post;  // receives of one queue are posted in send order
};


const char* op_name(WrOpcode op);
WcOpcode wc_opcode_of(WrOpcode op);
const Region* region_of(const Side& s, uint64_t addr);

class Case {
 public:
  Case(uint64_t seed, const PropertyConfig& cfg, PropertyResult& res)
      : seed_(seed), cfg_(cfg), res_(res), rng_(Rng::mix(seed ^ 0x70726f7065727479ull)),
        lrng_(Rng::mix(seed ^ 0x6c6f7373796d6f64ull)), sim_(seed), net_(sim_) {}

  void run();

 private:
  // --- generation ---
  bool build();
  bool setup_side(Side& s, Host& h);
  void build_impairments(Impairments& imp, std::string& desc);
  uint32_t pick_len();
  uint64_t take(Side& s, uint64_t len, uint64_t align);
  std::vector<Sge> take_sgl(Side& s, uint64_t len);
  void generate_op(Time t);
  void schedule_recv(End& rx, const std::vector<Sge>& sgl, Expected e, Time t);
  void schedule_send(End& tx, const SendWr& wr, const std::vector<Sge>& sgl, Expected e, Time t);
  bool fault_phase();

  // --- shadow model ---
  std::vector<std::byte> gather(const Side& s, const std::vector<Sge>& sgl) const;
  void scatter(Side& s, const std::vector<Sge>& sgl, const std::vector<std::byte>& bytes);
  std::byte* sh(Side& s, uint64_t addr) { return s.shadow.data() + (addr - s.base); }
  void dont_care(Side& s, const std::vector<Sge>& sgl);

  // --- oracle ---
  void on_wc(int side, const Wc& wc);
  void check_wc(int side, const Wc& wc);
  void on_async(int side, const AsyncEvent& ev);
  bool fault_posted_ = false;
  bool drained() const;
  bool run_until_drained(Time limit, const char* phase);
  void check_memory(int side);
  void check_lossy();
  void fail(std::string what);
  void trace(std::string what) {
    if (cfg_.verbose) res_.trace.push_back(fmt_time() + " " + what);
  }
  std::string fmt_time() const { return std::to_string(sim_.now().ps / 1000) + "ns"; }

  uint64_t seed_;
  const PropertyConfig& cfg_;
  PropertyResult& res_;
  Rng rng_;
  Rng lrng_;  // lossy-mode choices: a stream of their own (docs/lossy.md)
  Simulator sim_;
  Network net_;
  Side sides_[2];
  std::vector<End> ends_;
  Mtu mtu_ = Mtu::k1024;
  uint64_t pending_posts_ = 0;
};

}  // namespace sroce::sim::prop
