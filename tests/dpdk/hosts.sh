#!/bin/bash
# Two hosts for the DPDK datapath tests: network namespaces h1 and h2 joined by a veth pair
# (10.78.0.1/24 and 10.78.0.2/24, fd78::1/64 and fd78::2/64, MTU 3000: the af_xdp PMD's mbufs hold one page, so frames
# stay under ~3.4 KB and both ends agree on a RoCE MTU of 2048), each with its own sroced.
#
#   hosts.sh up STATE_DIR BIN_DIR KIND1 KIND2   create both hosts, start both daemons; KIND is
#                                              af_xdp, af_packet (DPDK vdevs on the host's veth)
#                                              or udp (the kernel-socket datapath)
#   hosts.sh down STATE_DIR                     stop the daemons, delete the namespaces
#   hosts.sh run STATE_DIR HOST -- CMD          run CMD under sroce-run on HOST (h1 or h2)
#   hosts.sh exec STATE_DIR HOST -- CMD         run CMD in HOST's namespace (no sroce-run)
#   hosts.sh daemon STATE_DIR HOST start|stop|kill|pid|fg|wait-socket
#                                              (fg: exec sroced in the foreground, for exit codes)
#   hosts.sh dev STATE_DIR HOST                 the host's interface name
#
# Names carry a hash of STATE_DIR, so two build trees can test at the same time. Daemons use
# one lcore, --no-huge and sleep_poll_us=1000 (two cores are shared by everything on this machine).
set -u
cmd=$1
state=$2
shift 2
tag=$(echo -n "$state" | md5sum | cut -c1-6)
ns() { echo "srdp-$tag-$1"; }
addr() { [ "$1" = h1 ] && echo 10.78.0.1 || echo 10.78.0.2; }
addr6() { [ "$1" = h1 ] && echo fd78::1 || echo fd78::2; }
dev() { [ "$1" = h1 ] && echo "sd${tag}a" || echo "sd${tag}b"; }

daemon_argv() {  # HOST: the sroced command line for HOST, one word a line
  local h=$1 bin kind
  bin=$(cat "$state/bindir")
  kind=$(cat "$state/$h.kind")
  case $kind in
    udp | af_xdp | af_packet) ;;
    *)
      echo "hosts.sh: unknown kind $kind" >&2
      return 1
      ;;
  esac
  printf '%s\n' ip netns exec "$(ns "$h")" "$bin/sroced" -c /dev/null --netdev "$(dev "$h")" \
    --socket "$state/$h.sock" --log-level info
  case $kind in
    af_xdp | af_packet)
      printf '%s\n' --set 'datapath.kind="dpdk"' --set "dpdk.vdev=\"$kind\"" \
        --set "dpdk.sleep_poll_us=${SROCE_DPDK_SLEEP_US:-1000}" --set 'dpdk.memory_mb=128' \
        --set 'dpdk.mbufs=8191'
      ;;
  esac
  for x in ${SROCED_EXTRA:-}; do printf '%s\n' "$x"; done
}

wait_socket() {  # HOST
  for _ in $(seq 300); do [ -S "$state/$1.sock" ] && return 0; sleep 0.05; done
  echo "hosts.sh: sroced ($(cat "$state/$1.kind")) on $1 did not come up" >&2
  tail -20 "$state/$1.log" >&2
  return 1
}

start_daemon() {  # HOST
  local h=$1 argv
  mapfile -t argv < <(daemon_argv "$h")
  [ ${#argv[@]} -gt 0 ] || return 1
  rm -f "$state/$h.sock"
  "${argv[@]}" >>"$state/$h.log" 2>&1 &
  echo $! >"$state/$h.pid"
  disown
  wait_socket "$h"
}

# stop_daemon HOST SIGNAL, down
. "$(dirname "$(readlink -f "$0")")/../lib/netns_hosts.sh"

case $cmd in
  up)
    bindir=$1
    down
    mkdir -p "$state"
    echo "$bindir" >"$state/bindir"
    echo "$2" >"$state/h1.kind"
    echo "$3" >"$state/h2.kind"
    : >"$state/h1.log"
    : >"$state/h2.log"
    ip netns add "$(ns h1)" && ip netns add "$(ns h2)" || exit 1
    # One queue each way: an AF_XDP socket serves one queue (docs/dpdk.md).
    ip link add "$(dev h1)" numtxqueues 1 numrxqueues 1 type veth peer name "$(dev h2)" \
      numtxqueues 1 numrxqueues 1 || { down; exit 1; }
    for h in h1 h2; do
      ip link set "$(dev "$h")" netns "$(ns "$h")"
      ip -n "$(ns "$h")" link set lo up
      ip -n "$(ns "$h")" link set "$(dev "$h")" mtu 3000 up
      ip -n "$(ns "$h")" addr add "$(addr "$h")/24" dev "$(dev "$h")"
      # GID 1: RoCEv2 over IPv6 (nodad: usable at once, and it answers neighbour solicitations).
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
  exec)
    h=$1
    shift 2
    exec ip netns exec "$(ns "$h")" "$@"
    ;;
  daemon)
    h=$1
    case $2 in
      start) start_daemon "$h" ;;
      stop) stop_daemon "$h" TERM ;;
      kill) stop_daemon "$h" KILL ;;
      pid) cat "$state/$h.pid" ;;
      # In the foreground, as this process (exec): the caller can wait for
      # its exit status. Output goes to the host's log.
      fg)
        mapfile -t argv < <(daemon_argv "$h")
        [ ${#argv[@]} -gt 0 ] || exit 1
        rm -f "$state/$h.sock"
        exec "${argv[@]}" >>"$state/$h.log" 2>&1
        ;;
      wait-socket) wait_socket "$h" ;;
    esac
    ;;
  dev)
    dev "$1"
    ;;
  *)
    echo "usage: hosts.sh up|down|run|exec|daemon|dev STATE_DIR ..." >&2
    exit 2
    ;;
esac
