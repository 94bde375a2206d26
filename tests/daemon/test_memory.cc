// ProcessMemory: process_vm_readv/writev limited to registered ranges.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstring>

#include "memory.h"

using sroce::daemon::ProcessMemory;

TEST_CASE("tagged access stays inside the tag's registered ranges", "[memory]") {
  ProcessMemory m(8);
  std::array<char, 256> buf{};
  std::array<char, 64> other{};
  memcpy(buf.data(), "hello sroce", 11);
  auto va = reinterpret_cast<uint64_t>(buf.data());
  m.attach(1, getpid());
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
  m.attach(2, getpid());
  CHECK_FALSE(m.read(ProcessMemory::tagged(2, va), out));
  // Unknown tag.
  CHECK_FALSE(m.read(ProcessMemory::tagged(5, va), out));
  CHECK(m.stats().refused == 4);

  const char w[] = "WRITE";
  REQUIRE(m.write(ProcessMemory::tagged(1, va + 6), std::as_bytes(std::span(w, 5))));
  CHECK(memcmp(buf.data(), "hello WRITE", 11) == 0);
  CHECK_FALSE(m.write(ProcessMemory::tagged(1, va + 126), std::as_bytes(std::span(w, 5))));
  CHECK(memcmp(buf.data() + 126, "\0\0\0\0\0", 5) == 0);

  m.remove_range(1, va, 128);
  CHECK_FALSE(m.read(ProcessMemory::tagged(1, va), out));
  m.add_range(1, va, 128);
  m.detach(1);
  CHECK_FALSE(m.read(ProcessMemory::tagged(1, va), out));
}

TEST_CASE("untagged addresses resolve to the one owner and ambiguity is refused", "[memory]") {
  ProcessMemory m(8);
  std::array<char, 64> a{}, b{};
  memcpy(a.data(), "AAAA", 4);
  auto va = reinterpret_cast<uint64_t>(a.data());
  auto vb = reinterpret_cast<uint64_t>(b.data());
  m.attach(1, getpid());
  m.attach(2, getpid());
  m.add_range(1, va, 64);
  m.add_range(2, vb, 64);
  std::array<std::byte, 4> out{};
  REQUIRE(m.read(va, out));
  CHECK(memcmp(out.data(), "AAAA", 4) == 0);
  REQUIRE(m.read(vb, out));
  // Two contexts registered overlapping addresses: never guess.
  m.add_range(2, va, 16);
  CHECK_FALSE(m.read(va, out));
  CHECK(m.stats().ambiguous == 1);
  m.remove_range(2, va, 16);
  CHECK(m.read(va, out));
  m.detach(1);
  CHECK_FALSE(m.read(va, out));
}

TEST_CASE("a dead process reads as a failure and not a crash", "[memory]") {
  ProcessMemory m(2);
  std::array<char, 16> a{};
  auto va = reinterpret_cast<uint64_t>(a.data());
  pid_t child = fork();
  if (child == 0) _exit(0);
  REQUIRE(child > 0);
  int st;
  waitpid(child, &st, 0);
  m.attach(1, child);
  m.add_range(1, va, 16);
  std::array<std::byte, 4> out{};
  CHECK_FALSE(m.read(ProcessMemory::tagged(1, va), out));
  CHECK(m.stats().failed == 1);
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
  m.attach_mapped(3);
  // Byte app_va of the MR is at pages + 16 (the map's first_byte).
  m.add_mapped_range(3, app_va, 128, pages.data() + 16, true);
  m.add_mapped_range(3, ro_va, 64, ro_pages.data(), false);
  CHECK(m.range_count(3) == 2);

  std::array<std::byte, 12> out{};
  REQUIRE(m.read(ProcessMemory::tagged(3, app_va), out));
  CHECK(memcmp(out.data(), "pinned bytes", 12) == 0);
  // Untagged addresses (the engine without an iova of its own) find the same owner.
  out.fill(std::byte{0});
  REQUIRE(m.read(app_va, out));
  CHECK(memcmp(out.data(), "pinned bytes", 12) == 0);

  const char w[] = "XYZ";
  REQUIRE(m.write(ProcessMemory::tagged(3, app_va + 100), std::as_bytes(std::span(w, 3))));
  CHECK(memcmp(pages.data() + 16 + 100, "XYZ", 3) == 0);
  CHECK(m.stats().bytes_written == 3);

  // Outside the range: refused, the mapping untouched.
  CHECK_FALSE(m.write(ProcessMemory::tagged(3, app_va + 126), std::as_bytes(std::span(w, 3))));
  CHECK(pages[16 + 126] == std::byte{0});
  // A read-only MR (mapped PROT_READ by the daemon) is readable, never written.
  std::array<std::byte, 8> ro{};
  CHECK(m.read(ProcessMemory::tagged(3, ro_va), ro));
  CHECK_FALSE(m.write(ProcessMemory::tagged(3, ro_va), std::as_bytes(std::span(w, 3))));
  CHECK(ro_pages[0] == std::byte{0});
  // A process-backed context never maps ranges (no pid confusion between the two kinds).
  m.attach(4, getpid());
  m.add_mapped_range(4, app_va, 128, pages.data(), true);
  CHECK(m.range_count(4) == 0);

  // Deregistration: the range and its window go together.
  m.remove_range(3, app_va, 128);
  CHECK_FALSE(m.read(ProcessMemory::tagged(3, app_va), out));
  CHECK(m.read(ProcessMemory::tagged(3, ro_va), ro));
  m.detach(3);
  CHECK_FALSE(m.read(ProcessMemory::tagged(3, ro_va), ro));
}
