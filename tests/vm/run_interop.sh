#!/bin/sh
# The interop test with Linux rxe (ctest: vm_interop, label vm; docs/interop.md):
#   tests/vm/run_interop.sh OUTDIR [FILE[=DEST]]...
# Boots the VM once with vm_interop.sh (rdma_rxe and rdma_sroce + sroced on the two ends
# of a veth pair), then decodes the capture the VM left on its disk with tshark: every
# RoCEv2 frame must decode as InfiniBand, none malformed, no expert error, and carry the
# ICRC of the IP header it has (check_icrc_pcap.py).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=$1
shift
mkdir -p "$out"
out=$(cd "$out" && pwd)
disk="$out/capture.img"
rm -f "$disk"
truncate -s 32M "$disk"
rc=0
SROCE_VM_SCRIPT=vm_interop.sh SROCE_VM_DISK="$disk" "$here/run.sh" "$out" \
	"$here/corrupt_frame.py=/test/bin/corrupt_frame.py" \
	/usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav34.so /etc/libibverbs.d/rxe.driver \
	/usr/sbin/tc \
	"$@" || rc=$?

n=$(sed -n 's/^SROCE_VM_PCAP bytes=\([0-9]*\).*/\1/p' "$out/console.log.txt" | tail -n1)
if [ -z "$n" ]; then
	echo "interop: FAIL: the VM left no capture"
	exit 1
fi
head -c "$n" "$disk" >"$out/interop.pcap"
if ! command -v tshark >/dev/null; then
	echo "interop: tshark not installed: the capture ($out/interop.pcap) is not decoded"
	exit "$rc"
fi
roce=$(tshark -r "$out/interop.pcap" -Y 'udp.port == 4791' 2>/dev/null | wc -l)
ib=$(tshark -r "$out/interop.pcap" -Y 'udp.port == 4791 && infiniband' 2>/dev/null | wc -l)
# rxe sends RoCEv2 over IPv6 with a zero UDP checksum, which tshark flags as an error
# ("Illegal checksum value (0)", RFC 8200); that one is rxe's (docs/interop.md), counted
# apart. Any other expert error, any malformed frame, or a zero checksum from sroce fails.
bad=$(tshark -r "$out/interop.pcap" -Y "_ws.malformed || (_ws.expert.severity == error &&
	!(ipv6.src == fd77::1 && udp.checksum == 0 && !_ws.malformed))" \
	--disable-heuristic rpcrdma_infiniband 2>/dev/null | wc -l)
rxe0=$(tshark -r "$out/interop.pcap" -Y 'ipv6.src == fd77::1 && udp.checksum == 0' 2>/dev/null | wc -l)
echo "interop: $rxe0 IPv6 frames from rxe with a zero UDP checksum (rxe's, tolerated)"
v6=$(tshark -r "$out/interop.pcap" -Y 'ipv6 && infiniband' 2>/dev/null | wc -l)
echo "interop: capture: $roce RoCEv2 frames, $ib decoded as InfiniBand ($v6 over IPv6), $bad malformed or in error"
tshark -r "$out/interop.pcap" -Y infiniband -T fields -e ip.src -e ipv6.src -e infiniband.bth.opcode 2>/dev/null |
	sort | uniq -c | sort -rn | head -n 20 | sed 's/^/    /'
if [ "$roce" -lt 20 ] || [ "$ib" != "$roce" ] || [ "$bad" != 0 ] || [ "$v6" = 0 ]; then
	echo "interop: FAIL: the capture does not decode cleanly"
	tshark -r "$out/interop.pcap" -Y '_ws.malformed || _ws.expert.severity == error' 2>/dev/null | head -n 10
	exit 1
fi
echo "interop: tshark decoded the capture cleanly"
# Every frame's ICRC over the IP header it carries (check_icrc_pcap.py, stdlib only), and
# sroce's GSO segments among them (IPv4 ids other than 0).
if ! /usr/bin/python3 "$here/check_icrc_pcap.py" "$out/interop.pcap" --sroce 10.77.0.2; then
	echo "interop: FAIL: ICRCs in the capture"
	exit 1
fi
echo "interop: every RoCEv2 frame's ICRC matches its IP header, sroce's GSO segments included"
exit "$rc"
