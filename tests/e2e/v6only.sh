#!/bin/bash
# v6only.sh STATE_DIR BIN_DIR PORT
# Hosts with IPv6 addresses only: a pair of hosts.sh hosts of their own (STATE_DIR), whose
# IPv4 addresses are removed before their daemons start. Checks that sroced starts, serves
# fd77::N as GID 0 (RoCE v2) with a node GUID that is the EUI-64 of the interface's MAC
# (as rxe and RoCE NICs derive theirs), and that unchanged ibv_rc_pingpong -g 0 runs across
# (its TCP exchange over IPv6 as well).
set -u
here=$(dirname "$(readlink -f "$0")")
state=$1
bin=$2
port=$3
tag=$(echo -n "$state" | md5sum | cut -c1-6)
fail() { echo "v6only: $*" >&2; exit 1; }
"$here/hosts.sh" up "$state" "$bin" || fail "hosts did not come up"
trap '"$here/hosts.sh" down "$state"' EXIT
for h in h1 h2; do
  ns="sre2e-$tag-$h"
  dev=$([ "$h" = h1 ] && echo "se${tag}a" || echo "se${tag}b")
  "$here/hosts.sh" daemon "$state" "$h" stop
  ip -n "$ns" -4 addr flush dev "$dev"
  ip -n "$ns" -4 addr flush dev lo
  [ -z "$(ip -n "$ns" -4 addr show)" ] || fail "$h still has IPv4 addresses"
  : >"$state/$h.log"
  "$here/hosts.sh" daemon "$state" "$h" start || { cat "$state/$h.log"; fail "sroced did not start on IPv6-only $h"; }
  want=$([ "$h" = h1 ] && echo fd77::1 || echo fd77::2)
  info=$(timeout 20 "$here/hosts.sh" run "$state" "$h" -- ibv_devinfo -v) || fail "ibv_devinfo on $h failed"
  echo "$info" | grep -E "node_guid|GID\[" | sed "s/^/$h: /"
  echo "$info" | grep -qE "GID\[ *0\]:[[:space:]]+$want, RoCE v2" || fail "$h: GID 0 is not $want, RoCE v2"
  mac=$(ip -n "$ns" -o link show dev "$dev" | grep -oE "link/ether [0-9a-f:]+" | cut -d' ' -f2)
  IFS=: read -r m0 m1 m2 m3 m4 m5 <<<"$mac"
  eui=$(printf "%02x%s:%sff:fe%s:%s%s" $((0x$m0 ^ 2)) "$m1" "$m2" "$m3" "$m4" "$m5")
  guid=$(echo "$info" | awk '/node_guid:/ {print $2}')
  echo "$h: MAC $mac, EUI-64 $eui, node_guid $guid"
  [ "$guid" = "$eui" ] || fail "$h: node_guid $guid is not the EUI-64 of $mac ($eui)"
done
"$here/pair.sh" "$state" "$port" 90 ibv_rc_pingpong -g 0 -p "$port" -n 200 -s 4096 -- \
  ibv_rc_pingpong -g 0 -p "$port" -n 200 -s 4096 fd77::1 || fail "ibv_rc_pingpong failed"
echo "v6only: ok"
