#!/bin/bash
# arp.sh STATE_DIR: with sroced on h1's interface (af_xdp: its XDP program attached), the kernel
# of h1 still answers ARP and IPv6 neighbour discovery: h2 forgets h1, asks again, and learns
# h1's MAC. The XDP program's own counters show it passed those frames to the kernel, and a
# RoCE ping-pong right after shows sroced kept its traffic.
set -u
here=$(dirname "$(readlink -f "$0")")
state=$1
h() { "$here/hosts.sh" exec "$state" "$@"; }
fail() {
  echo "arp.sh: FAIL: $*"
  exit 1
}
dev1=$("$here/hosts.sh" dev "$state" h1)
dev2=$("$here/hosts.sh" dev "$state" h2)
mac1=$(h h1 -- cat "/sys/class/net/$dev1/address")
kind1=$(cat "$state/h1.kind")

prog=$(h h1 -- ip -d link show "$dev1" | sed -n 's/.*prog\/xdp id \([0-9]*\) name \([a-z_]*\).*/\1 \2/p')
if [ "$kind1" = af_xdp ]; then
  [ "${prog#* }" = sroce_xdp_steer ] || fail "no sroce XDP program on $dev1 (got '$prog')"
fi
passed() {  # the XDP program's "passed to the kernel" counter, summed over CPUs
  [ -n "$prog" ] || { echo 0; return; }
  local map
  for map in $(bpftool prog show id "${prog% *}" -j | /usr/bin/python3 -c 'import json,sys; print(*json.load(sys.stdin)["map_ids"])'); do
    bpftool map show id "$map" | grep -q sroce_xdp_stats && break
  done
  bpftool map dump id "$map" -j | /usr/bin/python3 -c '
import json, sys
for e in json.load(sys.stdin):
    if e["key"] == 1 or e.get("formatted", {}).get("key") == 1:
        vals = e.get("formatted", {}).get("values") or e.get("values")
        print(sum(v["value"] for v in vals)); break
else:
    print(0)'
}
before=$(passed)

# IPv4: h2 forgets h1 and must ARP for it.
h h2 -- ip neigh flush dev "$dev2"
[ -z "$(h h2 -- ip neigh show 10.78.0.1 | grep -v FAILED)" ] || fail "h2 still knows 10.78.0.1"
ok=
for _ in $(seq 60); do
  h h2 -- bash -c 'echo -n x > /dev/udp/10.78.0.1/9' 2>/dev/null
  if h h2 -- ip neigh show 10.78.0.1 | grep -q "$mac1"; then ok=1; break; fi
  sleep 0.05
done
[ -n "$ok" ] || fail "h1's kernel did not answer ARP: $(h h2 -- ip neigh show 10.78.0.1)"
echo "arp.sh: ARP answered by h1's kernel: $(h h2 -- ip neigh show 10.78.0.1)"

# IPv6: neighbour discovery for h1's link-local address.
ll=
for _ in $(seq 100); do  # duplicate address detection takes a moment after link up
  ll=$(h h1 -- ip -6 -o addr show dev "$dev1" scope link | grep -v tentative | sed -n 's/.*inet6 \([^/]*\).*/\1/p')
  [ -n "$ll" ] && ! h h2 -- ip -6 -o addr show dev "$dev2" scope link | grep -q tentative && break
  sleep 0.1
done
[ -n "$ll" ] || fail "h1 has no IPv6 link-local address"
h h2 -- ip -6 neigh flush dev "$dev2"
ok=
for _ in $(seq 60); do
  h h2 -- /usr/bin/python3 -c "
import socket
s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
s.sendto(b'x', ('$ll', 9, 0, socket.if_nametoindex('$dev2')))" 2>/dev/null
  if h h2 -- ip -6 neigh show "$ll" dev "$dev2" | grep -q "$mac1"; then ok=1; break; fi
  sleep 0.05
done
[ -n "$ok" ] || fail "h1's kernel did not answer neighbour discovery for $ll"
echo "arp.sh: ND answered by h1's kernel: $(h h2 -- ip -6 neigh show "$ll" dev "$dev2")"

if [ "$kind1" = af_xdp ]; then
  after=$(passed)
  [ "$after" -gt "$before" ] || fail "the XDP program's pass counter did not move ($before -> $after)"
  echo "arp.sh: XDP program passed $((after - before)) frames to the kernel meanwhile"
fi

# RoCE still goes to sroced.
"$here/pair.sh" "$state" 18760 60 ibv_rc_pingpong -g 0 -p 18760 -n 20 -s 1024 -c -e -- \
  ibv_rc_pingpong -g 0 -p 18760 -n 20 -s 1024 -c -e 10.78.0.1 >/tmp/sroce-arp-$$.log 2>&1 ||
  { cat /tmp/sroce-arp-$$.log; rm -f /tmp/sroce-arp-$$.log; fail "RoCE ping-pong after the ARP exchange"; }
rm -f /tmp/sroce-arp-$$.log
echo "arp.sh: RoCE ping-pong through sroced afterwards: ok"
