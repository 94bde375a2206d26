#!/bin/bash
# pair.sh STATE_DIR PORT SECONDS SERVER_CMD... -- CLIENT_CMD...
# Runs an unchanged server/client RDMA program pair across the two hosts of hosts.sh: the
# server under sroce-run on h1, then (once it listens on TCP PORT) the client on h2, whose
# command should name the server as 10.77.0.1. Both are bounded by SECONDS. Passes only if
# both exit 0 and neither printed "invalid data" (ibv_*_pingpong -c reports a bad byte so and
# still exits 0). Prints both outputs. Data are checked in full by sroce-datacheck
# (tests/lib/datacheck), which pair.sh runs like any other program.
set -u
here=$(dirname "$(readlink -f "$0")")
state=$1
port=$2
secs=$3
shift 3
server=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do server+=("$1"); shift; done
shift
tag=$(echo -n "$state" | md5sum | cut -c1-6)

out=$(mktemp -d /tmp/sroce-e2e.XXXXXX)
trap 'rm -rf "$out"' EXIT
timeout -k 5 "$secs" "$here/hosts.sh" run "$state" h1 -- "${server[@]}" >"$out/server" 2>&1 &
spid=$!
for _ in $(seq 200); do
  ip netns exec "sre2e-$tag-h1" ss -Hltn "sport = :$port" 2>/dev/null | grep -q . && break
  sleep 0.05
done
timeout -k 5 "$secs" "$here/hosts.sh" run "$state" h2 -- "$@" >"$out/client" 2>&1
crc=$?
wait "$spid"
src=$?
echo "=== server (h1): ${server[*]} -> $src"
cat "$out/server"
echo "=== client (h2): $* -> $crc"
cat "$out/client"
if grep -q "invalid data" "$out/server" "$out/client"; then
  echo "pair.sh: FAIL: a program reported invalid data" >&2
  exit 1
fi
[ "$src" -eq 0 ] && [ "$crc" -eq 0 ]
