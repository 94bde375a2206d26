// The one Catch2 main of every test binary. Exit status: Catch's (non-zero on a failure),
// else 77 when a test case called SROCE_SKIP (tests/skip.h), which ctest reports as skipped.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "skip.h"

namespace {
bool g_skipped = false;
}  // namespace

void sroce::test::mark_skipped() { g_skipped = true; }

int main(int argc, char** argv) {
  const int rc = Catch::Session().run(argc, argv);
  if (rc == 0 && g_skipped) return 77;
  return rc;
}
