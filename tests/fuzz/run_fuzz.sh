#!/bin/sh
# Run one libFuzzer target for $SROCE_FUZZ_SECONDS seconds (default 20) from its
# committed seed corpus; new inputs go to a scratch corpus in the build tree,
# crashes to the build tree's artifacts/ directory.
#   run_fuzz.sh FUZZER SEED_DIR WORK_DIR
set -eu
fuzzer=$1 seeds=$2 work=$3
secs=${SROCE_FUZZ_SECONDS:-20}
mkdir -p "$work/corpus" "$work/artifacts"
exec "$fuzzer" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
	-artifact_prefix="$work/artifacts/" "$work/corpus" "$seeds"
