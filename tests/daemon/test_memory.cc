// ProcessMemory: a context's own /proc/<pid>/mem, limited to registered ranges.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstring>
#include <vector>

#include "memory.h"

using sroce::daemon::ProcessMemory;

namespace {
int self_mem() { return open("/proc/self/mem", O_RDWR | O_CLOEXEC); }
}  // namespace

TEST_CASE("tagged access stays inside the tag's registered ranges", "[memory]") {
  ProcessMemory m(8);
  std::array<char, 256> buf{};
  std::array<char, 64> other{};
  memcpy(buf.data(), "hello sroce", 11);
  auto va = reinterpret_cast<uint64_t>(buf.data());
  m.attach(1, self_mem());
  m.add_range(1, va, 128);  // only the first half is registered

  std::array<std::byte, 11> out{};
  REQUIRE(m.read(ProcessMemory::tagged(1, va), out));
  CHECK(memcmp(out.data(), "hello sroce", 11) == 0);

  // Past the end of the range, even by one byte: refused, nothing read.
  std::array<std::byte, 16> big{};
  CHECK_FALSE(m.read(ProcessMemory::tagged(1, va + 120), big));
  // Memory the process has but did not register.
  CHECK_FALSE(m.read(ProcessMemory::tagged(1, reinterpret_cast<uint64_t>(other.data())), big));
  // Another tag (another process's context) never reaches this range.
  m.attach(2, self_mem());
  CHECK_FALSE(m.read(ProcessMemory::tagged(2, va), out));
  // Unknown tag.
  CHECK_FALSE(m.read(ProcessMemory::tagged(5, va), out));
  CHECK(m.stats().refused == 4);

  const char w[] = "WRITE";
  REQUIRE(m.write(ProcessMemory::tagged(1, va + 6), std::as_bytes(std::span(w, 5))));
  m.flush_writes();  // writes are staged until the loop flushes them (memory.h)
  CHECK(memcmp(buf.data(), "hello WRITE", 11) == 0);
  CHECK_FALSE(m.write(ProcessMemory::tagged(1, va + 126), std::as_bytes(std::span(w, 5))));
  CHECK(memcmp(buf.data() + 126, "\0\0\0\0\0", 5) == 0);

  m.remove_range(1, va, 128);
  CHECK_FALSE(m.read(ProcessMemory::tagged(1, va), out));
  m.add_range(1, va, 128);
  m.detach(1);
  CHECK_FALSE(m.read(ProcessMemory::tagged(1, va), out));
}

TEST_CASE("untagged addresses name nobody", "[memory]") {
  ProcessMemory m(8);
  std::array<char, 64> a{};
  memcpy(a.data(), "AAAA", 4);
  auto va = reinterpret_cast<uint64_t>(a.data());
  m.attach(1, self_mem());
  m.add_range(1, va, 64);
  std::array<std::byte, 4> out{};
  REQUIRE(m.read(ProcessMemory::tagged(1, va), out));
  CHECK_FALSE(m.read(va, out));  // tag 0: never resolved by range (docs/security.md)
  CHECK_FALSE(m.write(va, std::as_bytes(std::span(out))));
  CHECK(m.stats().refused == 2);
}

// The mem file is bound to the address space it was opened on: once the process is gone
// (here: exited; exec is the same, a new mm) every access fails, the owner is reported dead
// once, and nothing is read or written again, not even through a new process at that pid.
TEST_CASE("a gone address space fails every access and is reported once", "[memory]") {
  ProcessMemory m(2);
  std::array<char, 16> a{};
  auto va = reinterpret_cast<uint64_t>(a.data());
  int go[2], ready[2];
  REQUIRE(pipe(go) == 0);
  REQUIRE(pipe(ready) == 0);
  pid_t child = fork();
  if (child == 0) {
    int fd = open("/proc/self/mem", O_RDWR | O_CLOEXEC);
    char c = 0;
    // Hand the fd to the parent through /proc (the parent may open our fd table: same uid).
    if (write(ready[1], &fd, sizeof fd) != sizeof fd || read(go[0], &c, 1) != 1) _exit(1);
    _exit(0);
  }
  REQUIRE(child > 0);
  int child_fd = -1;
  REQUIRE(read(ready[0], &child_fd, sizeof child_fd) == sizeof child_fd);
  const std::string path = "/proc/" + std::to_string(child) + "/fd/" + std::to_string(child_fd);
  int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);  // the same mm (opening a mem file re-checks)
  REQUIRE(fd >= 0);
  m.attach(1, fd);
  m.add_range(1, va, 16);
  std::array<std::byte, 4> out{};
  CHECK(m.read(ProcessMemory::tagged(1, va), out));  // the child's copy of `a`
  CHECK(m.alive(1));
  REQUIRE(write(go[1], "x", 1) == 1);
  int st;
  waitpid(child, &st, 0);
  CHECK_FALSE(m.read(ProcessMemory::tagged(1, va), out));
  CHECK(m.dead(1));
  CHECK(m.stats().gone == 1);
  CHECK_FALSE(m.alive(1));
  CHECK(m.probe(1, va) == -ESRCH);
  CHECK_FALSE(m.write(ProcessMemory::tagged(1, va), std::as_bytes(std::span(out))));
  std::array<uint16_t, 4> dead{};
  CHECK(m.take_dead(dead) == 1);
  CHECK(dead[0] == 1);
  CHECK(m.take_dead(dead) == 0);  // reported once
  for (int f : {go[0], go[1], ready[0], ready[1]}) close(f);
}

TEST_CASE("local windows serve inline data only while open", "[memory]") {
  ProcessMemory m(2);
  const char data[] = "inline!";
  uint64_t addr = m.allow_local(data, 7);
  std::array<std::byte, 7> out{};
  REQUIRE(m.read(addr, out));
  CHECK(memcmp(out.data(), "inline!", 7) == 0);
  std::array<std::byte, 8> too_big{};
  CHECK_FALSE(m.read(addr, too_big));
  m.clear_local();
  CHECK_FALSE(m.read(addr, out));
}

// The kernel path (docs/kmod.md): a context of rdma_sroce.ko has no pid to read from; its MRs
// are the module's pinned pages mapped into the daemon, and accesses are copies through that
// mapping. The application's addresses below are deliberately not mapped in this process, so
// a fallback to process_vm_readv could not succeed.
TEST_CASE("a mapped (kernel-path) context is read and written through its mapping", "[memory]") {
  ProcessMemory m(8);
  std::array<std::byte, 256> pages{};   // stands for the daemon's mapping of the pinned pages
  std::array<std::byte, 64> ro_pages{};
  memcpy(pages.data() + 16, "pinned bytes", 12);
  const uint64_t app_va = 0x100000000ull;  // the MR's address in the application
  const uint64_t ro_va = 0x200000000ull;
  const uint32_t lk = 0x1234, ro_lk = 0x5678;  // the two MRs' L_Keys
  m.attach_mapped(3);
  // Byte app_va of the MR is at pages + 16 (the map's first_byte).
  m.add_mapped_range(3, lk, app_va, 128, pages.data() + 16, true);
  m.add_mapped_range(3, ro_lk, ro_va, 64, ro_pages.data(), false);
  CHECK(m.range_count(3) == 2);

  std::array<std::byte, 12> out{};
  REQUIRE(m.read_mr(lk, ProcessMemory::tagged(3, app_va), out));
  CHECK(memcmp(out.data(), "pinned bytes", 12) == 0);
  // Untagged addresses name nobody, mapped contexts included.
  CHECK_FALSE(m.read_mr(lk, app_va, out));
  // Through another MR, or through none: that MR's mapping does not hold the address.
  CHECK_FALSE(m.read_mr(ro_lk, ProcessMemory::tagged(3, app_va), out));
  CHECK_FALSE(m.read(ProcessMemory::tagged(3, app_va), out));

  const char w[] = "XYZ";
  REQUIRE(m.write_mr(lk, ProcessMemory::tagged(3, app_va + 100), std::as_bytes(std::span(w, 3))));
  CHECK(memcmp(pages.data() + 16 + 100, "XYZ", 3) == 0);
  CHECK(m.stats().bytes_written == 3);

  // Outside the range: refused, the mapping untouched.
  CHECK_FALSE(
      m.write_mr(lk, ProcessMemory::tagged(3, app_va + 126), std::as_bytes(std::span(w, 3))));
  CHECK(pages[16 + 126] == std::byte{0});
  // A read-only MR (mapped PROT_READ by the daemon) is readable, never written.
  std::array<std::byte, 8> ro{};
  CHECK(m.read_mr(ro_lk, ProcessMemory::tagged(3, ro_va), ro));
  CHECK_FALSE(m.write_mr(ro_lk, ProcessMemory::tagged(3, ro_va), std::as_bytes(std::span(w, 3))));
  CHECK(ro_pages[0] == std::byte{0});
  // A process-backed context never maps ranges (no pid confusion between the two kinds).
  m.attach(4, self_mem());
  m.add_mapped_range(4, lk, app_va, 128, pages.data(), true);
  CHECK(m.range_count(4) == 0);

  // Deregistration: the range and its mapping go.
  m.remove_mr_map(3, lk);
  m.remove_range(3, app_va, 128);
  CHECK_FALSE(m.read_mr(lk, ProcessMemory::tagged(3, app_va), out));
  CHECK(m.read_mr(ro_lk, ProcessMemory::tagged(3, ro_va), ro));
  m.detach(3);
  CHECK_FALSE(m.read_mr(ro_lk, ProcessMemory::tagged(3, ro_va), ro));
}

// Two MRs on one address with different memory behind them (a shared MR's range unmapped and
// mapped again, a second MR registered there; docs/security.md "Shared MRs"): an access uses
// the mapping of the MR it goes through, never another MR's found by address. Kernel path: each
// MR's pinned pages; socket path: the shared MR's memfd pages, and the process's memory for
// an MR that is not shared.
TEST_CASE("two MRs on one address: an access reaches only its own MR's memory", "[memory]") {
  ProcessMemory m(8);
  std::array<char, 64> fresh{};           // the process's memory at va now
  std::array<std::byte, 64> old_pages{};  // the first MR's pages, still mapped by the daemon
  std::array<std::byte, 64> new_pages{};  // kernel path: the second MR's pinned pages
  memcpy(fresh.data(), "fresh memory", 12);
  memcpy(old_pages.data(), "old pages!!!", 12);
  memcpy(new_pages.data(), "new pinned!!", 12);
  const auto va = reinterpret_cast<uint64_t>(fresh.data());
  const uint32_t old_lk = 0x100, new_lk = 0x200;
  std::array<std::byte, 12> out{};
  const char w[] = "written!";

  m.attach(1, self_mem());  // socket path
  m.add_range(1, va, 64);
  m.add_shared_range(1, old_lk, va, 64, old_pages.data(), true);
  m.add_range(1, va, 64);  // the second MR, not shared
  REQUIRE(m.read_mr(new_lk, ProcessMemory::tagged(1, va), out));
  CHECK(memcmp(out.data(), "fresh memory", 12) == 0);
  REQUIRE(m.write_mr(new_lk, ProcessMemory::tagged(1, va + 32), std::as_bytes(std::span(w, 8))));
  m.flush_writes();
  CHECK(memcmp(fresh.data() + 32, "written!", 8) == 0);
  CHECK(old_pages[32] == std::byte{0});
  REQUIRE(m.read_mr(old_lk, ProcessMemory::tagged(1, va), out));  // the old MR: its own pages
  CHECK(memcmp(out.data(), "old pages!!!", 12) == 0);
  REQUIRE(m.read(ProcessMemory::tagged(1, va), out));  // through no MR: the process's memory
  CHECK(memcmp(out.data(), "fresh memory", 12) == 0);

  m.attach_mapped(2);  // kernel path
  const uint64_t app_va = 0x100000000ull;
  m.add_mapped_range(2, old_lk, app_va, 64, old_pages.data(), true);
  m.add_mapped_range(2, new_lk, app_va, 64, new_pages.data(), true);
  REQUIRE(m.read_mr(new_lk, ProcessMemory::tagged(2, app_va), out));
  CHECK(memcmp(out.data(), "new pinned!!", 12) == 0);
  REQUIRE(
      m.write_mr(new_lk, ProcessMemory::tagged(2, app_va + 40), std::as_bytes(std::span(w, 8))));
  CHECK(memcmp(new_pages.data() + 40, "written!", 8) == 0);
  CHECK(old_pages[40] == std::byte{0});
  // REREG_MR of the kernel path: a new mapping for the same MR replaces its old one.
  m.add_mapped_range(2, new_lk, app_va, 64, old_pages.data(), true);
  REQUIRE(m.read_mr(new_lk, ProcessMemory::tagged(2, app_va), out));
  CHECK(memcmp(out.data(), "old pages!!!", 12) == 0);
}

TEST_CASE("read-ahead: a stream of packet reads costs few calls and never serves stale or "
          "unregistered bytes", "[memory]") {
  ProcessMemory m(8);
  std::vector<uint8_t> buf(256 * 1024);
  for (size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<uint8_t>(i * 7 + (i >> 12));
  auto va = reinterpret_cast<uint64_t>(buf.data());
  m.attach(1, self_mem());
  m.add_range(1, va, 128 * 1024);  // the second half is not registered
  std::array<std::byte, 4096> out{};

  // 32 packets of 4 KiB in order (two 64 KiB messages): the first read is direct, the second
  // continues it and fills a window; later ones mostly come from windows.
  for (size_t k = 0; k < 32; ++k) {
    REQUIRE(m.read(ProcessMemory::tagged(1, va + k * 4096), out));
    REQUIRE(memcmp(out.data(), buf.data() + k * 4096, 4096) == 0);
  }
  CHECK(m.stats().window_fills >= 1);
  CHECK(m.stats().window_fills <= 4);
  CHECK(m.stats().window_hits >= 26);

  // A window read past the registered range holds those bytes, but they are never handed out.
  REQUIRE(m.read(ProcessMemory::tagged(1, va + 124 * 1024), out));
  CHECK_FALSE(m.read(ProcessMemory::tagged(1, va + 128 * 1024 - 2048), out));

  // The application writes its memory: after forget_windows() (what the loop does each pass
  // and after taking work requests) the new bytes are read.
  const auto hits = m.stats().window_hits;
  REQUIRE(m.read(ProcessMemory::tagged(1, va + 8 * 4096), out));  // from a window
  CHECK(m.stats().window_hits == hits + 1);
  buf[8 * 4096] ^= 0xff;
  m.forget_windows();
  REQUIRE(m.read(ProcessMemory::tagged(1, va + 8 * 4096), out));
  CHECK(static_cast<uint8_t>(out[0]) == buf[8 * 4096]);

  // The daemon's own write drops the windows it overlaps, without forget_windows().
  for (size_t k = 0; k < 4; ++k) REQUIRE(m.read(ProcessMemory::tagged(1, va + k * 4096), out));
  const uint8_t w[3] = {1, 2, 3};
  REQUIRE(m.write(ProcessMemory::tagged(1, va + 2 * 4096 + 10), std::as_bytes(std::span(w))));
  REQUIRE(m.read(ProcessMemory::tagged(1, va + 2 * 4096), out));
  CHECK(memcmp(out.data() + 10, w, 3) == 0);
  m.detach(1);
}

TEST_CASE("staged writes: one call for a run of packets, in place at flush or before a read",
          "[memory]") {
  ProcessMemory m(8);
  std::vector<uint8_t> buf(128 * 1024, 0);
  std::vector<uint8_t> src(4096);
  auto va = reinterpret_cast<uint64_t>(buf.data());
  m.attach(1, self_mem());
  m.add_range(1, va, 64 * 1024);
  // 16 packets of 4 KiB, in order, as a 64 KiB RDMA WRITE arrives.
  for (size_t k = 0; k < 16; ++k) {
    for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(k * 31 + i);
    REQUIRE(m.write(ProcessMemory::tagged(1, va + k * 4096), std::as_bytes(std::span(src))));
  }
  // Refused at once, not at flush: the engine must learn of a bad range immediately.
  CHECK_FALSE(m.write(ProcessMemory::tagged(1, va + 64 * 1024 - 8), std::as_bytes(std::span(src))));
  CHECK(buf[5 * 4096 + 1] == 0);  // staged, not yet written
  CHECK(m.stats().write_flushes == 0);
  CHECK(m.flush_writes());
  CHECK(m.stats().write_flushes == 1);
  CHECK_FALSE(m.flush_writes());  // nothing left
  for (size_t k = 0; k < 16; ++k) REQUIRE(buf[k * 4096 + 7] == static_cast<uint8_t>(k * 31 + 7));
  CHECK(m.stats().failed == 0);

  // Scattered writes, then a read of one of them: the read flushes first and sees it.
  const uint8_t w[4] = {9, 8, 7, 6};
  REQUIRE(m.write(ProcessMemory::tagged(1, va + 100), std::as_bytes(std::span(w))));
  REQUIRE(m.write(ProcessMemory::tagged(1, va + 40000), std::as_bytes(std::span(w))));
  std::array<std::byte, 4> out{};
  REQUIRE(m.read(ProcessMemory::tagged(1, va + 40000), out));
  CHECK(memcmp(out.data(), w, 4) == 0);
  CHECK(memcmp(buf.data() + 100, w, 4) == 0);
  CHECK(m.stats().write_flushes == 3);  // one pwrite per run: 1, then 2
  m.detach(1);
}
