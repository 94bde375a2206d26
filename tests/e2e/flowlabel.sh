#!/bin/bash
# flowlabel.sh STATE_DIR PORT
# The IPv6 flow label on the wire (Annex A17.4.5.1: the GRH's flow label is the IPv6 header's),
# seen by tshark (an independent decoder) on h2's interface of hosts.sh:
#  1. UD sends from h1 with an address vector whose flow label is 0x12345 (pyverbs,
#     ud_flowlabel.py): every such packet carries 0x12345, and the receiver's GRH says so too;
#  2. ibv_rc_pingpong -g 1 (flow label 0): every RC packet, both ways, carries the label sroced
#     derives from its destination QP and UDP source port (UdpDatapath::derive_flow_label);
#  3. `sroce lanes` on h1 lists the IPv6 lanes with their source address fd77::1 (table and
#     --json), and h1's kernel counted the datagrams as UDP/IPv6.
set -u
here=$(dirname "$(readlink -f "$0")")
state=$1
port=$2
tag=$(echo -n "$state" | md5sum | cut -c1-6)
bin=$(cat "$state/bindir")
fail() { echo "flowlabel: $*" >&2; exit 1; }
out=$(mktemp -d /tmp/sroce-fl.XXXXXX)
tpid=
cleanup() {
  [ -n "$tpid" ] && kill "$tpid" 2>/dev/null
  rm -rf "$out"
}
trap cleanup EXIT
counter() {  # HOST NAME
  ip netns exec "sre2e-$tag-$1" cat /proc/net/snmp6 | awk -v n="$2" '$1 == n {print $2}'
}
count=50

ip netns exec "sre2e-$tag-h2" tshark -i "se${tag}b" -f "udp port 4791" -w "$out/cap.pcap" 2>"$out/tshark.err" &
tpid=$!
for _ in $(seq 200); do grep -q "Capturing on" "$out/tshark.err" && break; sleep 0.05; done
grep -q "Capturing on" "$out/tshark.err" || fail "tshark did not start: $(cat "$out/tshark.err")"
out6=$(counter h1 Udp6OutDatagrams)

timeout -k 5 60 "$here/hosts.sh" run "$state" h2 -- \
  /usr/bin/python3 "$here/ud_flowlabel.py" recv "$out/qpn" "$count" >"$out/recv" 2>&1 &
rpid=$!
timeout -k 5 60 "$here/hosts.sh" run "$state" h1 -- \
  /usr/bin/python3 "$here/ud_flowlabel.py" send "$out/qpn" "$count" fd77::2 0x12345 1 >"$out/send" 2>&1
src=$?
wait "$rpid"
rrc=$?
echo "UD sender (h1) -> $src: $(cat "$out/send")"
echo "UD receiver (h2) -> $rrc: $(cut -c1-200 "$out/recv")"
[ "$src" -eq 0 ] && [ "$rrc" -eq 0 ] || fail "the UD exchange failed"

"$here/pair.sh" "$state" "$port" 90 ibv_rc_pingpong -g 1 -p "$port" -n 50 -s 1024 -- \
  ibv_rc_pingpong -g 1 -p "$port" -n 50 -s 1024 10.77.0.1 >"$out/pair" 2>&1 || { cat "$out/pair"; fail "ibv_rc_pingpong failed"; }

lanes=$(ip netns exec "sre2e-$tag-h1" "$bin/sroce" lanes --socket "$state/h1.sock") || fail "sroce lanes failed"
lanes_json=$(ip netns exec "sre2e-$tag-h1" "$bin/sroce" lanes --json --socket "$state/h1.sock") || fail "sroce lanes --json failed"
echo "$lanes"
d6=$(( $(counter h1 Udp6OutDatagrams) - out6 ))
echo "flowlabel: h1 Udp6OutDatagrams +$d6"
[ "$d6" -ge "$count" ] || fail "h1 sent only $d6 UDP/IPv6 datagrams"

sleep 0.5
kill -INT "$tpid"
wait "$tpid"
tpid=
tshark -r "$out/cap.pcap" -Y "ipv6 && infiniband" -T fields -E separator=' ' \
  -e ipv6.src -e ipv6.dst -e ipv6.flow -e udp.srcport -e infiniband.bth.destqp -e infiniband.bth.opcode \
  >"$out/fields" 2>"$out/tshark2.err" || fail "tshark -r failed: $(cat "$out/tshark2.err")"

/usr/bin/python3 - "$out/fields" "$(cat "$out/qpn")" "$count" "$out/recv" "$lanes_json" "$lanes" <<'PY' || fail "wire check failed"
import json, sys
fields, ud_qpn, count, recv, lanes_json, lanes = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5], sys.argv[6]
def derive(dqpn, sport):  # UdpDatapath::derive_flow_label, written again
    v = ((((dqpn & 0xffffff) << 16) | sport) * 0x9e3779b97f4a7c15) & (2**64 - 1)
    return ((v >> 44) & 0xfffff) or 1
ud, rc, bad = 0, 0, []
for line in open(fields):
    f = line.split()
    if len(f) < 6:
        continue
    src, dst, flow, sport, dqpn = f[0], f[1], int(f[2], 16), int(f[3]), int(f[4], 0)
    if dqpn == ud_qpn and src == "fd77::1":
        ud += 1
        if flow != 0x12345: bad.append(("UD", line.strip()))
    else:
        rc += 1
        if flow != derive(dqpn, sport): bad.append(("RC want %#x" % derive(dqpn, sport), line.strip()))
print(f"wire: {ud} UD packets with the AV's label, {rc} RC packets with the derived label, {len(bad)} wrong")
for b in bad[:10]: print("  wrong:", b)
got = open(recv).read().split("labels", 1)[1].split()
print("receiver's GRH labels:", len(got), "all 0x12345" if set(got) == {"0x12345"} else set(got))
lj = json.loads(lanes_json)
lanes_list = lj if isinstance(lj, list) else lj.get("lanes", [])
locals_ = {l.get("local") for l in lanes_list}
print("sroce lanes --json locals:", sorted(locals_))
ok = (ud >= count and rc >= 100 and not bad and len(got) == count and set(got) == {"0x12345"}
      and "fd77::1" in locals_ and "fd77::1" in lanes and "0.0.0.0" not in locals_ - {None})
sys.exit(0 if ok else 1)
PY
echo "flowlabel: ok"
