// bench_icrc_id: what verifying a peer's own IPv4 identification costs a receiver that
// sees only the UDP payload (proto/icrc_id.c). Per packet, best of 40 trials of ~2 ms:
//   plain_ns      sroce_icrc_check on an id-0 packet (what sroce peers send: one CRC)
//   recovered_ns  the same on a packet with a non-zero id, solver cached (one CRC + a
//                 32-step reduction)
//   corrupt_ns    a corrupted packet with a non-zero id (rejected)
//   build_us      building one solver (a cache miss: a new payload length)
//   gso_fix_ns    the sender's side: sroce_icrc_set_ip_id on a packet (the UDP datapath's
//                 GSO segment i gets the ICRC of id i), solver cached
// One JSON line. Build it in a release tree (not ASan):
//   cmake --build build --target bench_icrc_id && build/bin/bench_icrc_id
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "proto/icrc.h"
#include "proto/packet.h"

namespace {

using Clock = std::chrono::steady_clock;
constexpr int kTrials = 40;
constexpr double kTrialSeconds = 0.002;

inline void clobber(const void* p) { asm volatile("" : : "r"(p) : "memory"); }

template <class Op>
double best_ns(Op op) {
  size_t iters = 1;
  for (;;) {
    const auto t0 = Clock::now();
    for (size_t i = 0; i < iters; i++) op();
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    if (s >= kTrialSeconds / 4) {
      iters = static_cast<size_t>(static_cast<double>(iters) * kTrialSeconds / s) + 1;
      break;
    }
    iters *= 2;
  }
  double best = 1e30;
  for (int t = 0; t < kTrials; t++) {
    const auto t0 = Clock::now();
    for (size_t i = 0; i < iters; i++) op();
    const double ns = std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / static_cast<double>(iters);
    if (ns < best) best = ns;
  }
  return best;
}

}  // namespace

int main() {
  const size_t sizes[] = {64, 1024, 4096};
  sroce_icrc_addr a{};
  a.src_gid[10] = a.src_gid[11] = a.dst_gid[10] = a.dst_gid[11] = 0xff;
  a.src_gid[12] = 10;
  a.src_gid[15] = 1;
  a.dst_gid[12] = 10;
  a.dst_gid[15] = 2;
  a.src_port = 0xc001;
  a.dst_port = SROCE_UDP_PORT;
  sroce_icrc_id_cache cache{};
  std::printf("{\"bench\":\"icrc_id\",\"sizes\":[64,1024,4096]");
  std::vector<double> plain, rec, bad, build, fix;
  for (size_t n : sizes) {
    std::vector<uint8_t> p(SROCE_BTH_LEN + n);
    for (size_t i = 0; i < p.size(); i++) p[i] = static_cast<uint8_t>(i * 13 + 5);
    const uint32_t c0 = sroce_icrc_payload(&a, p.data(), p.size());
    const uint32_t c1 = sroce_icrc_payload_id(&a, 0x1234, p.data(), p.size());
    volatile int sink = 0;
    plain.push_back(best_ns([&] {
      clobber(p.data());
      sink = sink + sroce_icrc_check(&a, -1, p.data(), p.size(), c0, &cache, nullptr);
    }));
    rec.push_back(best_ns([&] {
      clobber(p.data());
      sink = sink + sroce_icrc_check(&a, -1, p.data(), p.size(), c1, &cache, nullptr);
    }));
    bad.push_back(best_ns([&] {
      clobber(p.data());
      sink = sink + sroce_icrc_check(&a, -1, p.data(), p.size(), c1 ^ 0x80000001u, &cache, nullptr);
    }));
    std::vector<uint8_t> seg(p);
    seg.resize(p.size() + SROCE_ICRC_LEN);
    sroce_icrc_put(seg.data() + p.size(), c0);
    uint16_t id = 0;
    fix.push_back(best_ns([&] {
      clobber(seg.data());
      sink = sink + sroce_icrc_set_ip_id(seg.data(), seg.size(), static_cast<uint16_t>(++id & 63), &cache);
    }));
    sroce_icrc_id_solver s;
    build.push_back(best_ns([&] {
      clobber(&s);
      sroce_icrc_id_solver_init(&s, p.size());
    }) / 1000.0);
  }
  auto list = [](const char* k, const std::vector<double>& v) {
    std::printf(",\"%s\":[", k);
    for (size_t i = 0; i < v.size(); i++) std::printf("%s%.1f", i ? "," : "", v[i]);
    std::printf("]");
  };
  list("plain_ns", plain);
  list("recovered_ns", rec);
  list("corrupt_ns", bad);
  list("build_us", build);
  list("gso_fix_ns", fix);
  std::printf("}\n");
  return 0;
}
