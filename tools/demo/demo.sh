#!/bin/bash
# `make demo`: unchanged RDMA programs across sroce, over a multipath fabric on this machine.
#
#   tools/demo/demo.sh [BUILD_DIR]        (root; BUILD_DIR defaults to build)
#
# 1. sroce-fabric up --sroced: hosts h1 and h2 (network namespaces) on two leaves joined by four
#    spines, Linux multipath routes hashing the UDP 5-tuple, one sroced per host;
# 2. Debian's own ibv_rc_pingpong (with -c: the server checks the data it received), then
#    ib_write_bw (4 QPs, 64 KiB messages, MTU 4096) and ib_write_lat, each server on h2 and
#    client on h1, through `sroce-fabric exec HOST -- sroce-run -- PROGRAM` (nothing else: the
#    fabric exports SROCE_SOCKET for the host's daemon); then raw UDP between the same two
#    hosts (sroce-udp-bench), the baseline the report divides by;
# 3. a report (tools/demo/report.py) on one screen: throughput, latency, throughput per QP
#    (the daemon's counters, sampled during ib_write_bw), RoCE packets per spine (multipath),
#    the daemons' counters; the full per-QP and per-lane tables and an HTML report with PNG
#    charts (report_html.py) go to OUT_DIR ($SROCE_DEMO_OUT, default BUILD_DIR/demo), whose
#    paths it prints (SROCE_DEMO_FULL=1 prints the full tables too);
# 4. sroce-fabric down: always, also on failure, Ctrl-C or SIGTERM (trap).
# Every command runs under `timeout`. Exit status 0 only if every program passed.
set -u

here=$(dirname "$(readlink -f "$0")")
build=$(readlink -f "${1:-build}")
bin=$build/bin
name=${SROCE_DEMO_NAME:-srdemo}   # the fabric's name: namespaces srdemo-h1, ...
run_dir=${SROCE_FABRIC_RUN_DIR:-/run/sroce-fabric}/$name   # its state, daemon sockets and logs
port_base=${SROCE_DEMO_PORT:-18700}
out_dir=${SROCE_DEMO_OUT:-$build/demo}
py=/usr/bin/python3
# The daemons run the latency set-up of docs/sroced.md (a SCHED_FIFO loop that does not spin):
# on two cores shared by two daemons and two perftest processes spinning on their CQs, a
# normal-priority daemon waits for a time slice at every wake-up. SROCE_FABRIC_SROCED_ARGS
# set (even empty) replaces it.
export SROCE_FABRIC_SROCED_ARGS=${SROCE_FABRIC_SROCED_ARGS-"--set datapath.realtime_priority=50 --set datapath.busy_poll_us=0"}

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
die() { printf 'demo: %s\n' "$*" >&2; exit 1; }

# Runs "$@" under timeout SECS, in the background, and waits for it: a trapped signal
# interrupts `wait` at once, whereas bash runs a trap only after a foreground command ends (and
# not at all if that command handled the SIGINT itself). Nothing long runs in the foreground.
run_for() {
  local secs=$1
  shift
  timeout -k 5 "$secs" "$@" &
  wait $!
}
pause() {  # sleep, interruptible by a trapped signal likewise
  sleep "$1" &
  wait $!
}

[ "$(id -u)" -eq 0 ] || die "needs root (network namespaces): sudo make demo"
for f in sroce-fabric sroced sroce-run sroce; do
  [ -x "$bin/$f" ] || die "$bin/$f is missing: run 'make build' first"
done
for p in ibv_rc_pingpong ib_write_bw ib_write_lat; do
  command -v "$p" >/dev/null || die "$p is missing: run 'make deps' (ibverbs-utils, perftest)"
done

work=$(mktemp -d /tmp/sroce-demo.XXXXXX)
sampler=
# The script's own stdout and stderr: a trap may run while a command's output is redirected
# into $work, and the cleanup's messages must still reach the user.
exec 3>&1 4>&2
cleanup() {
  local rc=$?
  # Ignored, not reset: a second Ctrl-C (or make passing one on) must not cut the teardown short.
  trap '' INT TERM HUP
  trap - EXIT
  exec 1>&3 2>&4
  [ -n "$sampler" ] && kill "$sampler" 2>/dev/null
  # The timeouts of background programs forward the TERM to them.
  local j
  for j in $(jobs -p); do kill "$j" 2>/dev/null; done
  if [ -d "$run_dir" ] || ip netns list | grep -q "^$name-"; then
    [ "$rc" -ne 0 ] && cp "$run_dir"/sroced-*.log "$work/" 2>/dev/null
    echo
    echo "demo: removing the fabric"
    timeout -k 5 120 "$bin/sroce-fabric" down --name "$name" >/dev/null 2>&1 ||
      echo "demo: 'sroce-fabric down --name $name' failed; run it by hand" >&2
  fi
  if [ "$rc" -ne 0 ] && [ -d "$work" ]; then
    case $rc in
      129 | 130 | 143) echo "demo: interrupted; what it had so far is in $work" >&2 ;;
      *) echo "demo: FAILED (exit $rc); the programs' outputs and daemon logs are in $work" >&2 ;;
    esac
  else
    rm -rf "$work"
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

# snapshot TAG: the fabric's counters (per spine) into $work/spines-TAG.json
snapshot() {
  run_for 60 "$bin/sroce-fabric" status --name "$name" --json >"$work/spines-$1.json" ||
    die "sroce-fabric status failed"
}

# wait_listen HOST PORT: until a server listens on TCP PORT in HOST (perftest and the
# pingpong examples exchange their QP numbers over TCP before any RDMA).
wait_listen() {
  local i
  for i in $(seq 100); do
    run_for 20 "$bin/sroce-fabric" exec --name "$name" "$1" -- ss -Hltn "sport = :$2" \
      >"$work/listen" 2>/dev/null
    [ -s "$work/listen" ] && return 0
    pause 0.2
  done
  return 1
}

# pair TAG SECS PORT PROGRAM ARGS...: PROGRAM ARGS on h2 (server), then PROGRAM ARGS ADDR(h2)
# on h1 (client); outputs in $work/TAG.server and $work/TAG.client. Fails unless both exit 0.
pair() {
  local tag=$1 secs=$2 port=$3
  shift 3
  snapshot "$tag-before"
  timeout -k 5 "$secs" "$bin/sroce-fabric" exec --name "$name" h2 -- "$bin/sroce-run" -- "$@" \
    >"$work/$tag.server" 2>&1 &
  local server=$!
  if ! wait_listen h2 "$port"; then
    kill "$server" 2>/dev/null
    cat "$work/$tag.server"
    die "$1: the server on h2 did not start"
  fi
  run_for "$secs" "$bin/sroce-fabric" exec --name "$name" h1 -- "$bin/sroce-run" -- "$@" "$h2" \
    >"$work/$tag.client" 2>&1
  local crc=$?
  wait "$server"
  local src=$?
  snapshot "$tag-after"
  if [ "$crc" -ne 0 ] || [ "$src" -ne 0 ]; then
    echo "--- server (h2), exit $src:"
    cat "$work/$tag.server"
    echo "--- client (h1), exit $crc:"
    cat "$work/$tag.client"
    die "$1 failed"
  fi
  echo "$1: ok"
}

# sample_qps: `sroce status --json` of both daemons (every QP with its counters and lanes)
# every 0.25 s into samples/HOST-TIME.json (the QPs exist only while the program runs; the
# report takes each QP's send rate from consecutive samples).
sample_qps() {
  local h t
  mkdir -p "$work/samples"
  while :; do
    for h in h1 h2; do
      t=$(date +%s.%N)
      timeout -k 2 10 "$bin/sroce-fabric" exec --name "$name" "$h" -- "$bin/sroce" status --json \
        >"$work/samples/.$h" 2>/dev/null && mv "$work/samples/.$h" "$work/samples/$h-$t.json"
    done
    sleep 0.25
  done
}

say "1/4  fabric: h1 and h2 over 4 spines, sroced on each host"
run_for 180 "$bin/sroce-fabric" up --name "$name" --hosts 2 --spines 4 --sroced >"$work/up.txt" 2>&1
up_rc=$?
cat "$work/up.txt"
[ "$up_rc" -eq 0 ] || die "sroce-fabric up failed"
grep -qE "sroced (\([a-z:_]+ datapath\) )?running on 2 hosts" "$work/up.txt" || die "sroced did not start on both hosts"
for h in h1 h2; do
  run_for 30 "$bin/sroce-fabric" addr --name "$name" "$h" >"$work/addr-$h" ||
    die "no address for $h"
done
h1=$(<"$work/addr-h1")
h2=$(<"$work/addr-h2")
echo "$h1 $h2" >"$work/addrs"

say "2/4  ibv_rc_pingpong (RC SEND/RECV, 64 KiB, -c: the server checks the data it received)"
pair pingpong 120 "$port_base" ibv_rc_pingpong -g 0 -m 4096 -s 65536 -n 500 -c -p "$port_base"

say "3/4  ib_write_bw (4 QPs, 64 KiB, MTU 4096, 3 s), ib_write_lat (64 B); raw UDP beside them"
sample_qps &
sampler=$!
pair write_bw 120 $((port_base + 1)) \
  ib_write_bw -x 0 -F --report_gbits -m 4096 -s 65536 -q 4 -D 3 -p $((port_base + 1))
kill "$sampler" 2>/dev/null
wait "$sampler" 2>/dev/null
sampler=
pair write_lat 120 $((port_base + 2)) \
  ib_write_lat -x 0 -F -m 4096 -s 64 -n 2000 -H -p $((port_base + 2))
# The baseline through the same fabric: raw UDP between the two hosts' namespaces, GSO on
# send and GRO on receive (4 KiB segments, what sroce's packets are), and a 64-byte ping-pong
# (sroce-udp-bench; docs/performance.md). The daemons are idle meanwhile; they own port 4791,
# so the raw runs take another (one 5-tuple: one path through the spines, as in bench-e2e).
run_for 120 "$bin/sroce-udp-bench" --port 4800 --ns-a "$name-h1" --ns-b "$name-h2" --ip-a "$h1" --ip-b "$h2" \
  --seconds 3 --segment 4096 --iters 2000 --no-datapath >"$work/raw_udp.json" 2>"$work/raw_udp.err" ||
  echo "demo: sroce-udp-bench failed (the report shows no baseline): $(tail -n 3 "$work/raw_udp.err")"

for h in h1 h2; do
  run_for 30 "$bin/sroce-fabric" exec --name "$name" "$h" -- "$bin/sroce" status --json \
    >"$work/status-$h.json" 2>&1
done

say "4/4  results"
"$py" "$here/report.py" "$work" "$out_dir" ${SROCE_DEMO_FULL:+--full} ||
  die "the report found a problem (see above)"
# The trap removes the fabric.
