#!/bin/bash
# pair.sh STATE_DIR PORT SECONDS SERVER_CMD... -- CLIENT_CMD...
# An unchanged server/client RDMA program pair across the two hosts of hosts.sh (the DPDK
# variant of tests/e2e/pair.sh): the server under sroce-run on h1, then, once it listens on TCP
# PORT, the client on h2, which should name the server as 10.78.0.1. Both are bounded by
# SECONDS. Passes only if both exit 0 and neither printed "invalid data"; prints both outputs
# and each daemon's datapath counters.
set -u
here=$(dirname "$(readlink -f "$0")")
state=$1
port=$2
secs=$3
shift 3
server=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do server+=("$1"); shift; done
shift

out=$(mktemp -d /tmp/sroce-dpdk.XXXXXX)
trap 'rm -rf "$out"' EXIT
timeout -k 5 "$secs" "$here/hosts.sh" run "$state" h1 -- "${server[@]}" >"$out/server" 2>&1 &
spid=$!
for _ in $(seq 200); do
  "$here/hosts.sh" exec "$state" h1 -- ss -Hltn "sport = :$port" 2>/dev/null | grep -q . && break
  sleep 0.05
done
timeout -k 5 "$secs" "$here/hosts.sh" run "$state" h2 -- "$@" >"$out/client" 2>&1
crc=$?
wait "$spid"
src=$?
echo "=== server (h1, $(cat "$state/h1.kind")): ${server[*]} -> $src"
cat "$out/server"
echo "=== client (h2, $(cat "$state/h2.kind")): $* -> $crc"
cat "$out/client"
# ibv_*_pingpong -c reports a bad byte as "invalid data" and still exits 0.
if grep -q "invalid data" "$out/server" "$out/client"; then
  echo "pair.sh: FAIL: a program reported invalid data" >&2
  exit 1
fi
[ "$src" -eq 0 ] && [ "$crc" -eq 0 ]
