#!/bin/bash
# Two hosts for the end-to-end tests: network namespaces h1 and h2 joined by a veth pair
# (10.77.0.1/24 and 10.77.0.2/24, and fd77::1/64 and fd77::2/64, MTU 9000), each with its own
# sroced: GID 0 is the IPv4 address, GID 1 the IPv6 one.
#
#   hosts.sh up STATE_DIR BIN_DIR       create both hosts, start both daemons
#   hosts.sh down STATE_DIR             stop the daemons, delete the namespaces
#   hosts.sh run STATE_DIR HOST -- CMD  run CMD under sroce-run on HOST (h1 or h2)
#   hosts.sh daemon STATE_DIR HOST start|stop|kill|pid
#
# Names carry a hash of STATE_DIR, so two build trees can test at the same time.
set -u
cmd=$1
state=$2
shift 2
tag=$(echo -n "$state" | md5sum | cut -c1-6)
ns() { echo "sre2e-$tag-$1"; }
addr() { [ "$1" = h1 ] && echo 10.77.0.1 || echo 10.77.0.2; }
addr6() { [ "$1" = h1 ] && echo fd77::1 || echo fd77::2; }
dev() { [ "$1" = h1 ] && echo "se${tag}a" || echo "se${tag}b"; }

start_daemon() {  # HOST
  local h=$1 bin
  bin=$(cat "$state/bindir")
  rm -f "$state/$h.sock"
  ip netns exec "$(ns "$h")" "$bin/sroced" -c /dev/null --netdev "$(dev "$h")" \
    --socket "$state/$h.sock" --log-level info >>"$state/$h.log" 2>&1 &
  echo $! >"$state/$h.pid"
  disown
  for _ in $(seq 200); do [ -S "$state/$h.sock" ] && return 0; sleep 0.05; done
  echo "hosts.sh: sroced on $h did not come up" >&2
  tail -5 "$state/$h.log" >&2
  return 1
}

# stop_daemon HOST SIGNAL, down
. "$(dirname "$(readlink -f "$0")")/../lib/netns_hosts.sh"

case $cmd in
  up)
    bindir=$1
    down
    mkdir -p "$state"
    echo "$bindir" >"$state/bindir"
    : >"$state/h1.log"
    : >"$state/h2.log"
    ip netns add "$(ns h1)" && ip netns add "$(ns h2)" || exit 1
    ip link add "$(dev h1)" type veth peer name "$(dev h2)" || { down; exit 1; }
    for h in h1 h2; do
      ip link set "$(dev "$h")" netns "$(ns "$h")"
      ip -n "$(ns "$h")" link set lo up
      ip -n "$(ns "$h")" link set "$(dev "$h")" mtu 9000 up
      ip -n "$(ns "$h")" addr add "$(addr "$h")/24" dev "$(dev "$h")"
      # nodad: usable at once (a tentative address cannot be bound by the daemon's lanes)
      ip -n "$(ns "$h")" addr add "$(addr6 "$h")/64" dev "$(dev "$h")" nodad
    done
    start_daemon h1 && start_daemon h2 || { down; exit 1; }
    ;;
  down)
    down
    ;;
  run)
    h=$1
    shift 2
    bin=$(cat "$state/bindir")
    exec ip netns exec "$(ns "$h")" "$bin/sroce-run" --socket "$state/$h.sock" -- "$@"
    ;;
  daemon)
    h=$1
    case $2 in
      start) start_daemon "$h" ;;
      stop) stop_daemon "$h" TERM ;;
      kill) stop_daemon "$h" KILL ;;
      pid) cat "$state/$h.pid" ;;
    esac
    ;;
  *)
    echo "usage: hosts.sh up|down|run|daemon STATE_DIR ..." >&2
    exit 2
    ;;
esac
