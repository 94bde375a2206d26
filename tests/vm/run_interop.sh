#!/bin/sh
# The interop tests with Linux rxe (ctest: vm_interop and vm_interop_dpdk, labels vm;interop;
# docs/interop.md):
#   tests/vm/run_interop.sh OUTDIR [FILE[=DEST]]...
#   tests/vm/run_interop.sh --dpdk SROCED OUTDIR [FILE[=DEST]]...
# Boots the VM once with vm_interop.sh (rdma_rxe and rdma_sroce + sroced on the two ends
# of a veth pair), or with --dpdk vm_interop_dpdk.sh (sroced on the DPDK datapath, the
# af_packet and af_xdp vdevs), then decodes the capture the VM left on its disk with
# tshark: every RoCEv2 frame must decode as InfiniBand, none malformed, no expert error,
# and carry the ICRC of the IP header it has (check_icrc_pcap.py).
#
# --dpdk SROCED: the image also gets the DPDK plugins SROCED's EAL needs: the mempool ring
# driver, the vdev bus and the af_packet and af_xdp PMDs. Debian's DPDK loads them from its
# plugin directory; here they are found next to the librte_eal that ldd resolves for
# SROCED, copied to the same paths and named to EAL with -d (/test/dpdk_eal_args).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
dpdk=""
if [ "$1" = --dpdk ]; then
	dpdk=$2
	shift 2
fi
out=$1
shift
mkdir -p "$out"
out=$(cd "$out" && pwd)
disk="$out/capture.img"
rm -f "$disk"
truncate -s 32M "$disk"
script=vm_interop.sh
icrc_args="--sroce 10.77.0.2"
plugins=""
if [ -n "$dpdk" ]; then
	script=vm_interop_dpdk.sh
	# The DPDK datapath sends IPv4 id 0 (no GSO): no non-zero ids of sroce's to require.
	icrc_args=""
	eal=$(ldd "$dpdk" | awk '$1 ~ /^librte_eal\.so/ { print $3 }')
	if [ -z "$eal" ]; then
		echo "interop: FAIL: $dpdk does not link DPDK's librte_eal (CONFIG_DATAPATH_DPDK off?)"
		exit 1
	fi
	abi=${eal##*.so.}
	args=""
	for p in mempool_ring bus_vdev net_af_packet net_af_xdp; do
		f="$(dirname "$eal")/librte_$p.so.$abi"
		if [ ! -e "$f" ]; then
			echo "interop: FAIL: no $f beside $eal (Debian: librte-$(echo "$p" | tr _ -)$abi; make deps)"
			exit 1
		fi
		plugins="$plugins $f"
		args="$args${args:+, }\"-d\", \"$f\""
	done
	echo "[$args]" >"$out/dpdk_eal_args"
	plugins="$plugins $out/dpdk_eal_args=/test/dpdk_eal_args"
	echo "interop: DPDK plugins for EAL: $(cat "$out/dpdk_eal_args")"
fi
rc=0
# shellcheck disable=SC2086
SROCE_VM_SCRIPT=$script SROCE_VM_DISK="$disk" "$here/run.sh" "$out" \
	"$here/corrupt_frame.py=/test/bin/corrupt_frame.py" \
	/usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav34.so /etc/libibverbs.d/rxe.driver \
	/usr/sbin/tc $plugins \
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
# The heuristics that guess a protocol inside the payload (RPC over RDMA, an Ethernet frame
# over IB) are off: the payload is the programs' data (sroce-datacheck's short WRITEs and
# SENDs looked like both), not a header of either stack.
bad=$(tshark -r "$out/interop.pcap" -Y "_ws.malformed || (_ws.expert.severity == error &&
	!(ipv6.src == fd77::1 && udp.checksum == 0 && !_ws.malformed))" \
	--disable-heuristic rpcrdma_infiniband --disable-heuristic eth_over_ib 2>/dev/null | wc -l)
rxe0=$(tshark -r "$out/interop.pcap" -Y 'ipv6.src == fd77::1 && udp.checksum == 0' 2>/dev/null | wc -l)
echo "interop: $rxe0 IPv6 frames from rxe with a zero UDP checksum (rxe's, tolerated)"
v6=$(tshark -r "$out/interop.pcap" -Y 'ipv6 && infiniband' 2>/dev/null | wc -l)
echo "interop: capture: $roce RoCEv2 frames, $ib decoded as InfiniBand ($v6 over IPv6), $bad malformed or in error"
tshark -r "$out/interop.pcap" -Y infiniband -T fields -e ip.src -e ipv6.src -e infiniband.bth.opcode 2>/dev/null |
	sort | uniq -c | sort -rn | head -n 20 | sed 's/^/    /'
if [ "$roce" -lt 20 ] || [ "$ib" != "$roce" ] || [ "$bad" != 0 ] || [ "$v6" = 0 ]; then
	echo "interop: FAIL: the capture does not decode cleanly"
	tshark -r "$out/interop.pcap" -Y '_ws.malformed || _ws.expert.severity == error' \
		--disable-heuristic rpcrdma_infiniband --disable-heuristic eth_over_ib 2>/dev/null | head -n 10
	exit 1
fi
echo "interop: tshark decoded the capture cleanly"
# Both stacks' frames are in it, sroce's (from ifs's address) among them.
from_sroce=$(tshark -r "$out/interop.pcap" -Y 'ip.src == 10.77.0.2 && infiniband' 2>/dev/null | wc -l)
from_rxe=$(tshark -r "$out/interop.pcap" -Y 'ip.src == 10.77.0.1 && infiniband' 2>/dev/null | wc -l)
echo "interop: IPv4 RoCEv2 frames: $from_sroce from sroce, $from_rxe from rxe"
if [ "$from_sroce" = 0 ] || [ "$from_rxe" = 0 ]; then
	echo "interop: FAIL: the capture lacks one stack's frames"
	exit 1
fi
# Every frame's ICRC over the IP header it carries (check_icrc_pcap.py, stdlib only), and
# sroce's GSO segments among them (IPv4 ids other than 0).
# shellcheck disable=SC2086
if ! /usr/bin/python3 "$here/check_icrc_pcap.py" "$out/interop.pcap" $icrc_args; then
	echo "interop: FAIL: ICRCs in the capture"
	exit 1
fi
echo "interop: every RoCEv2 frame's ICRC matches its IP header${icrc_args:+, sroce's GSO segments included}"
exit "$rc"
