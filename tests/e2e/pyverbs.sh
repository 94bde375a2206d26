#!/bin/bash
# pyverbs.sh STATE_DIR OUT_DIR [TEST ...]
# rdma-core's own test suite (python3-pyverbs, /usr/share/doc/rdma-core/tests) against sroce0
# on host h1. Writes OUT_DIR/summary.json and prints
#   pyverbs: RAN run, PASSED passed, SKIPPED skipped, FAILED failed, ERRORS errors
# Passes when nothing failed and nothing errored (skips must carry their true reason: see
# docs/provider.md for the list). TEST ...: unittest names (tests.test_mr.MWTest) instead of
# the whole suite; then a skipped test fails the run too (the selection must run).
set -u
here=$(dirname "$(readlink -f "$0")")
state=$1
out=$2
shift 2
selection=("$@")
rm -rf "$out"
mkdir -p "$out"
cp -r /usr/share/doc/rdma-core/tests "$out/tests"
gunzip -f "$out"/tests/*.gz
timeout -k 10 800 "$here/hosts.sh" run "$state" h1 -- \
  /usr/bin/python3 "$out/tests/run_tests.py" --dev sroce0 -v "${selection[@]}" >"$out/log" 2>&1
rc=$?
ran=$(sed -n 's/^Ran \([0-9]*\) tests.*/\1/p' "$out/log" | tail -1)
last=$(grep -E "^(OK|FAILED)" "$out/log" | tail -1)
num() { echo "$last" | grep -oE "$1=[0-9]+" | cut -d= -f2; }
failed=$(num failures); errors=$(num errors); skipped=$(num skipped)
ran=${ran:-0}; failed=${failed:-0}; errors=${errors:-0}; skipped=${skipped:-0}
passed=$((ran - failed - errors - skipped))
grep -E "\.\.\. (FAIL|ERROR)" "$out/log"
grep -oE "skipped '[^']*'" "$out/log" | sort | uniq -c | sort -rn > "$out/skips.txt"
printf '{"ran": %d, "passed": %d, "skipped": %d, "failed": %d, "errors": %d}\n' \
  "$ran" "$passed" "$skipped" "$failed" "$errors" > "$out/summary.json"
echo "pyverbs: $ran run, $passed passed, $skipped skipped, $failed failed, $errors errors"
echo "skip reasons (count):"; cat "$out/skips.txt"
if [ "$ran" -eq 0 ]; then echo "pyverbs: the suite did not run (rc $rc)"; tail -20 "$out/log"; exit 1; fi
if [ ${#selection[@]} -gt 0 ] && [ "$skipped" -ne 0 ]; then echo "pyverbs: the selection skipped tests"; exit 1; fi
[ "$failed" -eq 0 ] && [ "$errors" -eq 0 ] || { grep -E "^(FAIL|ERROR):" -A12 "$out/log" | head -80; exit 1; }
