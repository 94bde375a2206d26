// The victim of the exec attack (memory_attack.cc, docs/security.md "Memory"): a small program
// the test installs setuid to another uid in a temporary directory. The attacker execs it in
// the process that connected to sroced; it maps a secret at the address where the attacker's
// MR was, says so, waits until the attack is over and checks the secret is untouched.
//
//   sroce_secmem_victim ADDR_HEX LEN READY_FD GO_FD
//
// Writes "<euid>\n" to READY_FD once the secret is in place, waits for a byte on GO_FD, exits
// 0 if every byte of the secret is as written, 3 if any changed, 2 on a setup error. Built
// without sanitizers (it runs setuid).
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace {
uint8_t secret_byte(size_t i) { return static_cast<uint8_t>((i * 37 + 0xa5) ^ (i >> 9)); }
}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) return 2;
  const uint64_t addr = std::strtoull(argv[1], nullptr, 16);
  const size_t len = std::strtoull(argv[2], nullptr, 10);
  const int ready = std::atoi(argv[3]);
  const int go = std::atoi(argv[4]);
  void* p = mmap(reinterpret_cast<void*>(addr), len, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
  if (p != reinterpret_cast<void*>(addr)) return 2;
  auto* s = static_cast<volatile uint8_t*>(p);
  for (size_t i = 0; i < len; ++i) s[i] = secret_byte(i);
  const std::string msg = std::to_string(geteuid()) + "\n";
  if (write(ready, msg.data(), msg.size()) != static_cast<ssize_t>(msg.size())) return 2;
  char c;
  if (read(go, &c, 1) < 0) return 2;  // EOF (the attacker died) ends the wait as well
  for (size_t i = 0; i < len; ++i)
    if (s[i] != secret_byte(i)) {
      std::fprintf(stderr, "victim: byte %zu of the secret changed\n", i);
      return 3;
    }
  return 0;
}
