#!/bin/bash
# run_with_sroced.sh BIN_DIR -- COMMAND...
# Starts a private sroced (in its own network namespace, on its loopback, so it never
# collides with another daemon on UDP 4791), runs COMMAND under sroce-run against it with
# SROCE_TEST_DAEMON_PID set, stops the daemon and removes everything. Exit status: COMMAND's.
set -u
bindir=$1
shift 2
dir=$(mktemp -d /tmp/sroce-ptest.XXXXXX)
sock=$dir/sroce0.sock
cleanup() {
  if [ -n "${pid:-}" ] && kill -0 "$pid" 2>/dev/null; then
    kill "$pid" 2>/dev/null
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null
  fi
  rm -rf "$dir"
}
trap cleanup EXIT
unshare -n /bin/sh -c "ip link set lo up && exec '$bindir/sroced' -c /dev/null --netdev lo \
    --socket '$sock' --log-level warn" >"$dir/sroced.log" 2>&1 &
pid=$!
disown "$pid"  # no "Killed" job report when the death test or cleanup kills it
for _ in $(seq 200); do [ -S "$sock" ] && break; sleep 0.05; done
if [ ! -S "$sock" ]; then
  echo "run_with_sroced: sroced did not come up:" >&2
  cat "$dir/sroced.log" >&2
  exit 1
fi
export SROCE_TEST_DAEMON_PID=$pid
# The test binaries are sanitized: the preloaded shim comes before the ASan runtime.
export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0
timeout 300 "$bindir/sroce-run" --socket "$sock" -- "$@"
rc=$?
if [ $rc -ne 0 ]; then
  echo "--- sroced log" >&2
  tail -20 "$dir/sroced.log" >&2
fi
exit $rc
