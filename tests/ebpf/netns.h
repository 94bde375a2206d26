// Two network namespaces joined by a veth pair, made for one test and removed
// after it (also when the test fails: RAII; and namespaces left behind by a
// crashed test run are swept by the next one). Names carry the pid and a
// counter, so tests running in parallel never collide.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "frames.h"

namespace sroce::tmtest {

// Run argv (no shell); returns the exit status, stdout+stderr in *out.
int run(const std::vector<std::string>& argv, std::string* out = nullptr);

// Run fn with this thread in network namespace ns (a name in /run/netns);
// sockets made inside stay in ns after we come back.
void in_netns(const std::string& ns, const std::function<void()>& fn);

class NetnsPair {
 public:
  NetnsPair();
  ~NetnsPair();
  NetnsPair(const NetnsPair&) = delete;
  NetnsPair& operator=(const NetnsPair&) = delete;

  std::string ns_a, ns_b;  // namespaces
  std::string if_a, if_b;  // the veth ends, if_a in ns_a
  Addr a4 = v4("10.201.0.1"), b4 = v4("10.201.0.2");
  Addr a6 = v6("fd00:5c0e::1"), b6 = v6("fd00:5c0e::2");
  const char* a4s = "10.201.0.1";
  const char* b4s = "10.201.0.2";
  const char* a6s = "fd00:5c0e::1";
  const char* b6s = "fd00:5c0e::2";
};

// A unique BPF pin directory for this test (removed by the last detach).
std::string unique_pin_dir();

}  // namespace sroce::tmtest
