// sroce-limit-bench: the per-byte cost of the passes a software RoCE must make
// over every payload byte end to end, measured on this machine (make bench-e2e,
// docs/performance.md). Prints one JSON line.
//
// A byte written with RDMA WRITE over a socket path is, at the least,
//   sender:   copied from the application into a packet buffer, and CRCed (ICRC);
//   receiver: CRCed (ICRC check) and copied from the packet buffer into the application.
// So limit_ns_per_byte = 2 * memcpy_ns_per_byte + 2 * crc_ns_per_byte, each measured
// the way sroced does it: 64 KiB messages cut into 4 KiB packets in a ring of packet
// buffers (the size of sroced's GSO slots), the CRC with sroce_crc32_update (the
// engine's ICRC, PCLMUL folding where the CPU has it).
//
// Times are CPU time of this thread (CLOCK_THREAD_CPUTIME_ID), as bench-e2e counts
// the daemons' CPU time: time the other tenants of a shared machine take is not
// counted, their cache pollution is. Each figure is the median of --trials trials.
//
// Beside the limit (not part of it): memcpy_aliased_ns_per_byte, the sender's copy with
// each packet's destination 28 bytes ahead of its source modulo 4 KiB (the first packet
// of a GSO send buffer from malloc: 16 bytes into a page, payload after a 12-byte BTH,
// from a page-aligned application buffer), and copy_bytes_aliased_ns_per_byte, the same
// through sroced's copy_bytes (copy.h), which sidesteps REP MOVSB's slow case there.
#include <time.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "copy.h"
#include "proto/crc32_fast.h"
#include "proto/icrc.h"

namespace {

constexpr size_t kMessage = 65536;
constexpr size_t kPacket = 4096;
constexpr size_t kRingBytes = 64 * kMessage;  // sroced's tx_slots x GSO slot, about

inline void clobber(const void* p) { asm volatile("" : : "r"(p) : "memory"); }

double thread_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// Median ns per byte of `op`, which handles `bytes` bytes per call.
template <class Op>
double median_ns_per_byte(size_t bytes, int trials, double trial_seconds, Op op) {
  size_t iters = 1;
  for (;;) {
    const double t0 = thread_seconds();
    for (size_t i = 0; i < iters; ++i) op();
    const double s = thread_seconds() - t0;
    if (s >= trial_seconds / 4) {
      iters = static_cast<size_t>(static_cast<double>(iters) * trial_seconds / s) + 1;
      break;
    }
    iters *= 2;
  }
  std::vector<double> v;
  for (int t = 0; t < trials; ++t) {
    const double t0 = thread_seconds();
    for (size_t i = 0; i < iters; ++i) op();
    v.push_back((thread_seconds() - t0) * 1e9 / static_cast<double>(bytes * iters));
  }
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"sroce-limit-bench: memcpy and ICRC cost per byte (one JSON line)"};
  int trials = 21;
  double trial_ms = 5;
  app.add_option("--trials", trials, "trials per figure (the median is reported)")->check(CLI::Range(1, 1000));
  app.add_option("--trial-ms", trial_ms, "CPU milliseconds per trial")->check(CLI::Range(0.1, 1000.0));
  CLI11_PARSE(app, argc, argv);

  std::unique_ptr<uint8_t[]> msg(new uint8_t[kMessage]);
  std::unique_ptr<uint8_t[]> ring(new uint8_t[kRingBytes]);
  for (size_t i = 0; i < kMessage; ++i) msg[i] = static_cast<uint8_t>(i * 131 + 7);
  std::memset(ring.get(), 0, kRingBytes);
  size_t at = 0;
  const double ts = trial_ms * 1e-3;

  // Sender's copy: a message into consecutive packet buffers of the ring.
  const double copy = median_ns_per_byte(kMessage, trials, ts, [&] {
    for (size_t off = 0; off < kMessage; off += kPacket) {
      std::memcpy(ring.get() + at, msg.get() + off, kPacket);
      at = (at + kPacket) % kRingBytes;
    }
    clobber(ring.get());
  });
  // The ICRC pass over each packet of the ring.
  uint32_t sink = 0;
  const double crc = median_ns_per_byte(kMessage, trials, ts, [&] {
    for (size_t off = 0; off < kMessage; off += kPacket) {
      sink ^= sroce_crc32_update(~0u, ring.get() + at, kPacket);
      at = (at + kPacket) % kRingBytes;
    }
    clobber(&sink);
  });
  // Receiver's copy: packet buffers into the application's message.
  const double copy_rx = median_ns_per_byte(kMessage, trials, ts, [&] {
    for (size_t off = 0; off < kMessage; off += kPacket) {
      std::memcpy(msg.get() + off, ring.get() + at, kPacket);
      at = (at + kPacket) % kRingBytes;
    }
    clobber(msg.get());
  });
  // The sender's copy again, each destination 28 bytes ahead of its source (mod 4 KiB).
  constexpr size_t kAlias = 28;
  auto aliased = [&](auto&& copy_fn) {
    return median_ns_per_byte(kMessage, trials, ts, [&] {
      for (size_t off = 0; off < kMessage; off += kPacket) {
        uint8_t* d = ring.get() + at;
        d += (reinterpret_cast<uintptr_t>(msg.get() + off) - reinterpret_cast<uintptr_t>(d) + kAlias) & 4095;
        copy_fn(d, msg.get() + off, kPacket);
        at = (at + 2 * kPacket) % kRingBytes;
      }
      clobber(ring.get());
    });
  };
  const double copy_alias = aliased([](void* d, const void* s, size_t n) { std::memcpy(d, s, n); });
  const double copy_bytes_alias = aliased(sroce::daemon::copy_bytes);
  const double limit = copy + copy_rx + 2 * crc;
  std::printf(
      "{\"bench\":\"limit\",\"pclmul\":%s,\"packet_bytes\":%zu,\"memcpy_tx_ns_per_byte\":%.4f,"
      "\"memcpy_rx_ns_per_byte\":%.4f,\"crc_ns_per_byte\":%.4f,\"limit_ns_per_byte\":%.4f,"
      "\"memcpy_aliased_ns_per_byte\":%.4f,\"copy_bytes_aliased_ns_per_byte\":%.4f,\"sink\":%u}\n",
      sroce_crc32_pclmul_supported() ? "true" : "false", kPacket, copy, copy_rx, crc, limit, copy_alias,
      copy_bytes_alias, sink & 1u);
  return 0;
}
