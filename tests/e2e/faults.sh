#!/bin/bash
# faults.sh kill_app|kill_peer|kill_daemon STATE_DIR   (hosts from hosts.sh, already up)
#  kill_app:    ib_write_bw runs h2 -> h1; the client is SIGKILLed mid-transfer. Its daemon
#               must notice and clean up, and both daemons must go on serving new programs.
#  kill_peer:   the same, but the *target* (the server on h1) is killed: the writer on h2 must
#               get error completions (its writes reach a QP that no longer exists) and exit.
#  kill_daemon: ib_write_bw runs h2 -> h1; h2's sroced is SIGKILLed mid-transfer. The client
#               must get error completions and exit within seconds (not hang); a restarted
#               daemon must serve new programs.
set -u
here=$(dirname "$(readlink -f "$0")")
fault=$1
state=$2
hosts="$here/hosts.sh"
out=$(mktemp -d /tmp/sroce-fault.XXXXXX)
port=18690
fail() { echo "faults($fault): $*"; echo "--- server"; cat "$out/server"; echo "--- client"; cat "$out/client"; exit 1; }
cleanup() {
  for p in ${spid:-} ${cpid:-}; do kill -9 "$p" 2>/dev/null; done
  rm -rf "$out"
}
trap cleanup EXIT

wait_gone() {  # PID SECONDS: true if PID exited within SECONDS
  for _ in $(seq $(($2 * 20))); do kill -0 "$1" 2>/dev/null || return 0; sleep 0.05; done
  return 1
}

# A long transfer (-D: seconds) that is still running when the fault hits.
"$hosts" run "$state" h1 -- ib_write_bw -x 0 -F -p $port -D 60 -s 65536 >"$out/server" 2>&1 &
spid=$!
tag=$(echo -n "$state" | md5sum | cut -c1-6)
for _ in $(seq 200); do
  ip netns exec "sre2e-$tag-h1" ss -Hltn "sport = :$port" | grep -q . && break
  sleep 0.05
done
"$hosts" run "$state" h2 -- ib_write_bw -x 0 -F -p $port -D 60 -s 65536 10.77.0.1 >"$out/client" 2>&1 &
cpid=$!
sleep 4
kill -0 "$cpid" 2>/dev/null || fail "the client ended before the fault"

case $fault in
  kill_app)
    kill -9 "$cpid"
    wait_gone "$cpid" 5 || fail "client did not die"
    # h2's daemon tears the dead process's objects down.
    for _ in $(seq 100); do grep -q "closed: destroying" "$state/h2.log" && break; sleep 0.05; done
    grep -q "closed: destroying" "$state/h2.log" || fail "h2's sroced did not clean up"
    wait_gone "$spid" 30 || fail "the server hangs after its peer died"
    ;;
  kill_peer)
    kill -9 "$spid"
    wait_gone "$spid" 5 || fail "server did not die"
    for _ in $(seq 100); do grep -q "closed: destroying" "$state/h1.log" && break; sleep 0.05; done
    grep -q "closed: destroying" "$state/h1.log" || fail "h1's sroced did not clean up"
    wait_gone "$cpid" 30 || fail "the writer hangs after its peer died"
    wait "$cpid"
    [ $? -ne 0 ] || fail "the writer exited 0 although its peer died"
    grep -qiE "completion with error|fail" "$out/client" || fail "the writer reported no error"
    ;;
  kill_daemon)
    "$hosts" daemon "$state" h2 kill
    wait_gone "$cpid" 15 || fail "the client hangs after its daemon died"
    wait "$cpid"
    crc=$?
    [ "$crc" -ne 0 ] || fail "the client exited 0 although its daemon died"
    grep -qiE "error|fail" "$out/client" || fail "the client reported no error"
    wait_gone "$spid" 30 || fail "the server hangs after the client died"
    "$hosts" daemon "$state" h2 start || fail "h2's sroced does not restart"
    ;;
esac
kill -0 "$(cat "$state/h1.pid")" 2>/dev/null || fail "h1's sroced died"
kill -0 "$(cat "$state/h2.pid")" 2>/dev/null || fail "h2's sroced died"
# Both daemons serve new programs.
"$here/pair.sh" "$state" 18691 60 ibv_rc_pingpong -g 0 -p 18691 -n 20 -- \
  ibv_rc_pingpong -g 0 -p 18691 -n 20 10.77.0.1 >"$out/after" 2>&1 ||
  { cat "$out/after"; fail "a new program pair fails after the fault"; }
echo "faults($fault): ok"
