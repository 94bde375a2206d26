#!/bin/bash
# expect_output.sh [--fail] REGEX [REGEX...] -- COMMAND [ARGS...]
# Runs COMMAND, prints its output (stdout and stderr), and passes only if COMMAND exits 0
# AND its output matches every REGEX (bash extended regex over the whole output, so `.`
# also matches a newline). ctest's PASS_REGULAR_EXPRESSION would replace the exit status
# with the pattern; this checks the pattern in addition. Exit 77 (a skip) passes through.
# --fail: the opposite expectation, for tests that show a checker catches a fault: passes
# only if COMMAND exits non-zero (not 77) AND its output matches every REGEX.
set -u
want_fail=0
if [ "${1:-}" = --fail ]; then want_fail=1; shift; fi
patterns=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do patterns+=("$1"); shift; done
if [ $# -lt 2 ] || [ ${#patterns[@]} -eq 0 ]; then
  echo "usage: expect_output.sh [--fail] REGEX [REGEX...] -- COMMAND [ARGS...]" >&2
  exit 2
fi
shift
name=$(basename "$1")
out=$("$@" 2>&1)
rc=$?
printf '%s\n' "$out"
if [ "$rc" -eq 77 ]; then
  echo "expect_output: $name skipped (exit 77)"
  exit 77
fi
if [ "$want_fail" -eq 0 ] && [ "$rc" -ne 0 ]; then
  echo "expect_output: FAIL: $name exited $rc" >&2
  exit 1
fi
if [ "$want_fail" -eq 1 ] && [ "$rc" -eq 0 ]; then
  echo "expect_output: FAIL: $name exited 0, but it had to fail" >&2
  exit 1
fi
for re in "${patterns[@]}"; do
  if ! [[ $out =~ $re ]]; then
    echo "expect_output: FAIL: the output of $name does not match /$re/" >&2
    exit 1
  fi
done
exit 0
