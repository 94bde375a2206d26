#!/bin/bash
# ipv6.sh STATE_DIR PORT SECONDS SERVER_CMD... -- CLIENT_CMD...
# RoCEv2 over UDP/IPv6 (Annex A17.4.5.1) between the two hosts of hosts.sh, which also carry
# fd77::1/64 and fd77::2/64: checks that each daemon lists its IPv6 address as GID 1, typed
# RoCE v2, in the device view programs see; runs the pair through pair.sh (the commands pick
# GID 1); and checks that the traffic really went over IPv6: each host's kernel counted at least
# 100 more UDP/IPv6 datagrams in and out together, and at least 10 each way (the ACK-only
# direction is small: one ACK covers many packets; /proc/net/snmp6 of each namespace).
set -u
here=$(dirname "$(readlink -f "$0")")
state=$1
tag=$(echo -n "$state" | md5sum | cut -c1-6)
fail() { echo "ipv6: $*" >&2; exit 1; }
counter() {  # HOST NAME
  ip netns exec "sre2e-$tag-$1" cat /proc/net/snmp6 | awk -v n="$2" '$1 == n {print $2}'
}
for h in h1 h2; do
  want=$([ "$h" = h1 ] && echo fd77::1 || echo fd77::2)
  info=$(timeout 20 "$here/hosts.sh" run "$state" "$h" -- ibv_devinfo -v) || fail "ibv_devinfo on $h failed"
  echo "$info" | grep -E "GID\[" | sed "s/^/$h: /"
  echo "$info" | grep -qE "GID\[ *1\]:[[:space:]]+$want, RoCE v2" || fail "$h: GID 1 is not $want, RoCE v2"
done
declare -A before
for h in h1 h2; do
  for c in Udp6InDatagrams Udp6OutDatagrams; do before[$h.$c]=$(counter "$h" "$c"); done
done
"$here/pair.sh" "$@" || fail "the pair failed"
for h in h1 h2; do
  total=0
  for c in Udp6InDatagrams Udp6OutDatagrams; do
    now=$(counter "$h" "$c")
    d=$((now - ${before[$h.$c]}))
    echo "ipv6: $h $c +$d"
    # The direction that carries only ACKs can be small: sroced coalesces them per pass.
    [ "$d" -ge 10 ] || fail "$h: only $d more $c: the RDMA traffic did not go over IPv6"
    total=$((total + d))
  done
  [ "$total" -ge 100 ] || fail "$h: only $total more UDP/IPv6 datagrams: the RDMA traffic did not go over IPv6"
done
echo "ipv6: ok"
