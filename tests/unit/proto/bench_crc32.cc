// bench_crc32: CRC-32 throughput of the table, PCLMULQDQ, 512- and 256-bit VPCLMULQDQ paths
// beside memcpy, and the copy-and-CRC of one pass (sroce_crc32_copy) beside a memcpy
// followed by a CRC (two passes), measured in the same run so that the ratios mean
// something on a shared, noisy machine. Prints one JSON line:
//
//   {"bench":"crc32","pclmul":true,"vpclmul":true,"vpclmul256":true,"sizes":[40,64,1024,4096,65536],
//    "table_gbps":[...],"pclmul_gbps":[...],"vpclmul_gbps":[...],"vpclmul256_gbps":[...],
//    "memcpy_gbps":[...],
//    "copy_crc_gbps":[...],"memcpy_then_crc_gbps":[...],
//    "pclmul_over_table":[...],"pclmul_over_memcpy":[...],"fused_over_two_pass":[...]}
//
// vpclmul_gbps and vpclmul256_gbps are 0 where the CPU lacks the path (below 256 bytes each
// is the PCLMULQDQ path);
// copy_crc and memcpy_then_crc use the dispatching entry points (sroce_crc32_copy,
// memcpy + sroce_crc32_update), the ones the engine calls.
// GB/s is 1e9 bytes of input per second (for memcpy, bytes copied). Each
// figure is the best of 60 trials of ~2 ms, which filters out the time
// the other tenants take. Build it in a release tree (not ASan):
//   cmake -S . -B build/rel -G Ninja -DCMAKE_BUILD_TYPE=Release
//   cmake --build build/rel --target bench_crc32 && build/rel/bin/bench_crc32
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "proto/crc32_fast.h"
#include "proto/icrc.h"

namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kSizes[] = {40, 64, 1024, 4096, 65536};  // 40: the IPv4 ICRC pseudo header
constexpr int kTrials = 60;
constexpr double kTrialSeconds = 0.002;

// Keeps the compiler from dropping or hoisting work whose result is unused.
inline void clobber(const void* p) { asm volatile("" : : "r"(p) : "memory"); }

// Best GB/s of `op` over `bytes` per call.
template <class Op>
double best_gbps(size_t bytes, Op op) {
  // Calibrate the number of calls per trial.
  size_t iters = 1;
  for (;;) {
    const auto t0 = Clock::now();
    for (size_t i = 0; i < iters; i++) op();
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    if (s >= kTrialSeconds / 4) {
      iters = (size_t)((double)iters * kTrialSeconds / s) + 1;
      break;
    }
    iters *= 2;
  }
  double best = 0;
  for (int t = 0; t < kTrials; t++) {
    const auto t0 = Clock::now();
    for (size_t i = 0; i < iters; i++) op();
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    const double gbps = (double)bytes * (double)iters / s / 1e9;
    if (gbps > best) best = gbps;
  }
  return best;
}

std::string json_list(const std::vector<double>& v) {
  std::string s = "[";
  char b[32];
  for (size_t i = 0; i < v.size(); i++) {
    std::snprintf(b, sizeof b, "%s%.2f", i ? "," : "", v[i]);
    s += b;
  }
  return s + "]";
}

}  // namespace

int main() {
  const bool fast = sroce_crc32_pclmul_supported() != 0;
  const bool wide = sroce_crc32_vpclmul_supported() != 0;
  const bool ymm = sroce_crc32_vpclmul256_supported() != 0;
  std::vector<uint8_t> src(65536), dst(65536);
  for (size_t i = 0; i < src.size(); i++) src[i] = (uint8_t)(i * 131 + 7);

  std::vector<double> table, pclmul, vpclmul, vpclmul256, copy, copy_crc, two_pass, over_table, over_copy,
      fused_over;
  uint32_t sink = 0;
  for (size_t n : kSizes) {
    table.push_back(best_gbps(n, [&] {
      clobber(src.data());
      sink ^= sroce_crc32_update_table(sink, src.data(), n);
    }));
    pclmul.push_back(fast ? best_gbps(n, [&] {
      clobber(src.data());
      sink ^= sroce_crc32_update_pclmul(sink, src.data(), n);
    })
                          : 0.0);
    vpclmul.push_back(wide ? best_gbps(n, [&] {
      clobber(src.data());
      sink ^= sroce_crc32_update_vpclmul(sink, src.data(), n);
    })
                           : 0.0);
    vpclmul256.push_back(ymm ? best_gbps(n, [&] {
      clobber(src.data());
      sink ^= sroce_crc32_update_vpclmul256(sink, src.data(), n);
    })
                             : 0.0);
    copy.push_back(best_gbps(n, [&] {
      std::memcpy(dst.data(), src.data(), n);
      clobber(dst.data());
    }));
    copy_crc.push_back(best_gbps(n, [&] {
      clobber(src.data());
      sink ^= sroce_crc32_copy(sink, dst.data(), src.data(), n);
      clobber(dst.data());
    }));
    two_pass.push_back(best_gbps(n, [&] {
      std::memcpy(dst.data(), src.data(), n);
      clobber(dst.data());
      sink ^= sroce_crc32_update(sink, dst.data(), n);
    }));
    over_table.push_back(pclmul.back() / table.back());
    over_copy.push_back(pclmul.back() / copy.back());
    fused_over.push_back(copy_crc.back() / two_pass.back());
  }

  std::string sizes = "[";
  for (size_t i = 0; i < std::size(kSizes); i++) {
    if (i) sizes += ',';
    sizes += std::to_string(kSizes[i]);
  }
  sizes += ']';
  std::printf(
      "{\"bench\":\"crc32\",\"pclmul\":%s,\"vpclmul\":%s,\"vpclmul256\":%s,\"sizes\":%s,"
      "\"table_gbps\":%s,\"pclmul_gbps\":%s,\"vpclmul_gbps\":%s,\"vpclmul256_gbps\":%s,\"memcpy_gbps\":%s,\"copy_crc_gbps\":%s,"
      "\"memcpy_then_crc_gbps\":%s,\"pclmul_over_table\":%s,\"pclmul_over_memcpy\":%s,"
      "\"fused_over_two_pass\":%s,\"sink\":%u}\n",
      fast ? "true" : "false", wide ? "true" : "false", ymm ? "true" : "false", sizes.c_str(),
      json_list(table).c_str(), json_list(pclmul).c_str(), json_list(vpclmul).c_str(),
      json_list(vpclmul256).c_str(), json_list(copy).c_str(),
      json_list(copy_crc).c_str(), json_list(two_pass).c_str(), json_list(over_table).c_str(),
      json_list(over_copy).c_str(), json_list(fused_over).c_str(), (unsigned)sink);
  return 0;
}
