#!/bin/bash
# stop.sh STATE_DIR BIN_DIR: sroced on the DPDK datapath stops cleanly and restarts.
#  1. SIGTERM: exit status 0, "stopped" in its log, the XDP program detached from the
#     interface (the kernel has it whole again), no EAL runtime directory, no hugepage file;
#  2. SIGKILL leaves the XDP program attached and EAL's empty runtime directory; the next
#     sroced replaces the program (it is ours, by name), removes the directory, and serves:
#     a ping-pong across it passes; then SIGTERM, status 0 again.
set -u
here=$(dirname "$(readlink -f "$0")")
state=$1
bin=$2
hs() { "$here/hosts.sh" "$@"; }
pid=
fail() {
  echo "stop.sh: FAIL: $*"
  tail -20 "$state/h1.log"
  # Our own sroced (started here, not known to hosts.sh) goes first.
  [ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  hs down "$state"
  exit 1
}
dev1=$(hs dev "$state" h1)
xdp_prog() { hs exec "$state" h1 -- ip -d link show "$dev1" | sed -n 's/.*prog\/xdp id [0-9]* name \([a-z_]*\).*/\1/p'; }
leftovers() {  # PID: EAL runtime directory, hugepage files of that sroced
  ls -d /var/run/dpdk/sroced-sroce0-"$1" 2>/dev/null
  for d in /dev/hugepages /mnt/huge /run/hugepages; do
    [ -d "$d" ] && find "$d" -name "sroced-sroce0-$1*" 2>/dev/null
  done
}
start_fg() {  # starts sroced on h1 in the background of this shell; sets $pid (sroced's own)
  rm -f "$state/h1.sock"  # a killed sroced leaves its socket file: do not mistake it for the new one
  "$here/hosts.sh" daemon "$state" h1 fg &
  pid=$!
  hs daemon "$state" h1 wait-socket || fail "sroced did not start"
}
term_and_check() {
  [ "$(xdp_prog)" = sroce_xdp_steer ] || fail "no sroce XDP program while sroced runs"
  [ -n "$(leftovers "$pid")" ] || fail "no EAL runtime directory while sroced runs (test would prove nothing)"
  local rc stopped
  stopped=$(grep -c "sroced: stopped" "$state/h1.log")
  kill -TERM "$pid"
  wait "$pid"
  rc=$?
  [ "$rc" -eq 0 ] || fail "sroced exited with $rc after SIGTERM"
  [ "$(grep -c "sroced: stopped" "$state/h1.log")" -gt "$stopped" ] || fail "no 'stopped' in the log"
  [ -z "$(xdp_prog)" ] || fail "XDP program $(xdp_prog) left on $dev1"
  [ -z "$(leftovers "$pid")" ] || fail "left behind: $(leftovers "$pid")"
  echo "stop.sh: SIGTERM: exit 0, XDP program detached, nothing left behind"
}
pingpong() {
  "$here/pair.sh" "$state" "$1" 60 ibv_rc_pingpong -g 0 -p "$1" -n 20 -s 2048 -c -e -- \
    ibv_rc_pingpong -g 0 -p "$1" -n 20 -s 2048 -c -e 10.78.0.1 >"$state/pingpong.log" 2>&1 ||
    { cat "$state/pingpong.log"; fail "ping-pong"; }
}

hs up "$state" "$bin" af_xdp af_xdp || exit 1
hs daemon "$state" h1 stop  # the fixture's daemon; this script runs its own
[ -z "$(xdp_prog)" ] || fail "XDP program left after the first SIGTERM"

start_fg
pingpong 18770
term_and_check

start_fg
kill -KILL "$pid"
wait "$pid" 2>/dev/null
[ "$(xdp_prog)" = sroce_xdp_steer ] || fail "expected the killed sroced's XDP program to stay"
killed=$pid
[ -n "$(leftovers "$killed")" ] || fail "expected the killed sroced's EAL directory to stay"
start_fg
grep -q "removed a stale sroce XDP program" "$state/h1.log" || fail "the stale XDP program was not replaced"
[ -z "$(leftovers "$killed")" ] || fail "the killed sroced's EAL directory was not cleaned up"
pingpong 18771
echo "stop.sh: after SIGKILL, a new sroced replaced the stale XDP program and serves"
term_and_check
hs down "$state"
echo "stop.sh: ok"
