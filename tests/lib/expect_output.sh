#!/bin/bash
# expect_output.sh REGEX [REGEX...] -- COMMAND [ARGS...]
# Runs COMMAND, prints its output (stdout and stderr), and passes only if COMMAND exits 0
# AND its output matches every REGEX (bash extended regex over the whole output, so `.`
# also matches a newline). ctest's PASS_REGULAR_EXPRESSION would replace the exit status
# with the pattern; this checks the pattern in addition. Exit 77 (a skip) passes through.
set -u
patterns=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do patterns+=("$1"); shift; done
if [ $# -lt 2 ] || [ ${#patterns[@]} -eq 0 ]; then
  echo "usage: expect_output.sh REGEX [REGEX...] -- COMMAND [ARGS...]" >&2
  exit 2
fi
shift
out=$("$@" 2>&1)
rc=$?
printf '%s\n' "$out"
if [ "$rc" -eq 77 ]; then
  echo "expect_output: $1 skipped (exit 77)"
  exit 77
fi
if [ "$rc" -ne 0 ]; then
  echo "expect_output: FAIL: $1 exited $rc" >&2
  exit 1
fi
for re in "${patterns[@]}"; do
  if ! [[ $out =~ $re ]]; then
    echo "expect_output: FAIL: the output of $1 does not match /$re/" >&2
    exit 1
  fi
done
exit 0
