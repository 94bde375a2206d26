#!/bin/bash
# ucx.sh STATE_DIR PORT TLS TEST [ARGS...]
# UCX's own benchmark (Debian's ucx-utils: ucx_perftest) across the two hosts of hosts.sh,
# unchanged, through sroce-run: the server on h1, the client on h2 naming 10.77.0.1. TLS is
# UCX_TLS (rc_verbs, ud_verbs, ...); UCX may use sroce0:1 only. TEST is a ucx_perftest test
# (tag_bw, tag_lat, ucp_put_bw, ...; a UCT test such as put_bw also needs "-d sroce0:1 -x TL"
# in ARGS). Passes only if both ends exit 0 and the client printed its final figures; prints
# one JSON line {"test","tls","args","result","pass"} with the client's final line (also
# appended to STATE_DIR/ucx.jsonl).
# SROCE_HOSTS=dpdk: STATE_DIR holds the hosts of tests/dpdk/hosts.sh (sroced on the DPDK
# datapath, 10.78.0.0/24) instead of tests/e2e/hosts.sh's (the UDP datapath, 10.77.0.0/24).
set -u
here=$(dirname "$(readlink -f "$0")")
case ${SROCE_HOSTS:-e2e} in
  e2e) pair=$here/pair.sh server=10.77.0.1 ;;
  dpdk) pair=$here/../dpdk/pair.sh server=10.78.0.1 ;;
  *) echo "ucx.sh: SROCE_HOSTS is e2e or dpdk, not $SROCE_HOSTS" >&2; exit 2 ;;
esac
state=$1
port=$2
tls=$3
test=$4
shift 4
env=(env UCX_TLS="$tls" UCX_NET_DEVICES=sroce0:1 UCX_WARN_UNUSED_ENV_VARS=n)
out=$(mktemp /tmp/sroce-ucx.XXXXXX)
trap 'rm -f "$out"' EXIT
"$pair" "$state" "$port" 180 \
  "${env[@]}" ucx_perftest -p "$port" -t "$test" "$@" -- \
  "${env[@]}" ucx_perftest "$server" -p "$port" -t "$test" -f "$@" >"$out" 2>&1
rc=$?
cat "$out"
# The client's summary (-f: only the final figures): the last row of numbers in its table.
# UCX prints "-nan" or "inf" in the "average" columns when the last interval had no samples
# (or took no time); the "overall" columns are what the row must have.
final=$(sed -n '/^=== client/,$p' "$out" |
  grep -E '^[ |]*[0-9]+([ |]+(-?nan|-?inf|[0-9.]+)){7}[ |]*$' | tail -1 | tr -s ' |' ' ')
if [ "$rc" -eq 0 ] && [ -z "$final" ]; then
  echo "ucx.sh: the client printed no final figures"
  rc=1
fi
line=$(printf '{"test": "%s", "tls": "%s", "hosts": "%s", "args": "%s", "result": "%s", "pass": %s}' \
  "$test" "$tls" "${SROCE_HOSTS:-e2e}" "$*" "${final# }" "$([ "$rc" -eq 0 ] && echo true || echo false)")
echo "$line"
echo "$line" >>"$state/ucx.jsonl"   # every run's line, for docs/clients.md
exit "$rc"
