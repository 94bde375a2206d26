// What sroced's memory access costs per call (docs/security.md, "Memory"): pread / pwrite on
// a process's /proc/<pid>/mem (what ProcessMemory does) against process_vm_readv / writev on
// its pid (what it did before), for the sizes the data path uses: 64 B (atomics, small
// SENDs), 4 KiB (one packet at MTU 4096) and 64 KiB (one read-ahead window). The target is a
// child process, as for the daemon. One JSON line per size and call.
//
//   g++ -O2 -std=c++20 tools/bench/mem_file_bench.cc -o /tmp/mem_file_bench && /tmp/mem_file_bench
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {

double now_s() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

template <typename F>
void measure(const char* call, size_t size, F&& f) {
  const double budget = 0.3;  // seconds per figure
  size_t n = 0;
  const double t0 = now_s();
  double t = t0;
  while (t - t0 < budget) {
    for (int i = 0; i < 64; ++i) {
      if (!f()) {
        std::printf("{\"call\":\"%s\",\"bytes\":%zu,\"error\":\"%s\"}\n", call, size, strerror(errno));
        return;
      }
    }
    n += 64;
    t = now_s();
  }
  const double us = (t - t0) / static_cast<double>(n) * 1e6;
  std::printf("{\"call\":\"%s\",\"bytes\":%zu,\"us_per_call\":%.3f,\"gbyte_per_s\":%.2f}\n", call, size, us,
              static_cast<double>(size) / us / 1e3);
}

}  // namespace

int main() {
  constexpr size_t kMax = 64 * 1024;
  // The target's buffer lives at the same address in the child (fork), touched so it is mapped.
  auto* buf = static_cast<char*>(mmap(nullptr, kMax, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  memset(buf, 7, kMax);
  int ready[2];
  if (pipe(ready) != 0) return 1;
  pid_t child = fork();
  if (child == 0) {
    int fd = open("/proc/self/mem", O_RDWR | O_CLOEXEC);
    (void)fd;
    (void)!write(ready[1], "r", 1);
    pause();
    _exit(0);
  }
  char c;
  if (read(ready[0], &c, 1) != 1) return 1;
  const std::string path = "/proc/" + std::to_string(child) + "/mem";
  int mem = open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (mem < 0) {
    std::perror(path.c_str());
    return 1;
  }
  std::vector<char> local(kMax);
  const auto addr = reinterpret_cast<uint64_t>(buf);
  for (size_t size : {size_t{64}, size_t{4096}, kMax}) {
    measure("pread_mem", size, [&] { return pread(mem, local.data(), size, static_cast<off_t>(addr)) == (ssize_t)size; });
    measure("process_vm_readv", size, [&] {
      iovec l{local.data(), size}, r{buf, size};
      return process_vm_readv(child, &l, 1, &r, 1, 0) == (ssize_t)size;
    });
    measure("pwrite_mem", size, [&] { return pwrite(mem, local.data(), size, static_cast<off_t>(addr)) == (ssize_t)size; });
    measure("process_vm_writev", size, [&] {
      iovec l{local.data(), size}, r{buf, size};
      return process_vm_writev(child, &l, 1, &r, 1, 0) == (ssize_t)size;
    });
  }
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  return 0;
}
