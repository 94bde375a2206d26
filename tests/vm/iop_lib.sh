#!/bin/sh
# What the two interop tests share inside the VM (vm_interop.sh: sroced on the UDP
# datapath; vm_interop_dpdk.sh: on the DPDK one; docs/interop.md): the check counters and
# their verdicts, the addresses of the veth's two ends, the GID lookup, the program pairs
# (pair, both), and the counter readers of both stacks. Sourced, not run.
. /test/rping_lib.sh
fails=0
checks=0
T0=$(cut -d. -f1 /proc/uptime)
pass() { checks=$((checks + 1)); echo "PASS $*"; }
fail() { checks=$((checks + 1)); fails=$((fails + 1)); echo "FAIL $*"; }
expect() { d=$1; shift; if "$@" >/tmp/out 2>&1; then pass "$d"; else fail "$d"; sed 's/^/    /' /tmp/out; fi; }
# moved A B PASS_TEXT FAIL_TEXT: a pass if counts A and B both went up (are above 0).
moved() { if [ "${1:-0}" -gt 0 ] && [ "${2:-0}" -gt 0 ]; then pass "$3"; else fail "$4"; fi; }
wait_for() { # seconds, then a command
	n=$(($1 * 10)); shift
	while [ "$n" -gt 0 ]; do "$@" >/dev/null 2>&1 && return 0; sleep 0.1; n=$((n - 1)); done
	return 1
}
IP=/usr/sbin/ip
[ -x "$IP" ] || IP="busybox ip"
NS="$IP netns exec iop"
RXE_V4=10.77.0.1
SRO_V4=10.77.0.2
RXE_V6=fd77::1
SRO_V6=fd77::2

# cable [VETH_ARGS...]: the veth ifr (rxe, init namespace) <-> ifs (sroce, namespace iop),
# both ends addressed (IPv4 and IPv6) and up; VETH_ARGS go to both ends' `ip link add`.
cable() {
	$IP link set lo up
	$IP netns add iop
	# shellcheck disable=SC2068
	$IP link add ifr $@ type veth peer name ifs $@
	$IP link set ifs netns iop
	$IP addr add $RXE_V4/24 dev ifr
	$IP -6 addr add $RXE_V6/64 dev ifr nodad
	$IP link set ifr up
	$NS $IP link set lo up
	$NS $IP addr add $SRO_V4/24 dev ifs
	$NS $IP -6 addr add $SRO_V6/64 dev ifs nodad
	$NS $IP link set ifs up
}

# gid_index DEV GID: the RoCE v2 entry of GID (the sysfs spelling) in DEV's table.
gid_index() {
	for g in /sys/class/infiniband/"$1"/ports/1/gids/*; do
		i=${g##*/}
		grep -q "^$2\$" "$g" 2>/dev/null || continue
		t=/sys/class/infiniband/$1/ports/1/gid_attrs/types/$i
		[ -r "$t" ] && ! grep -q "v2" "$t" 2>/dev/null && continue
		echo "$i"
		return 0
	done
	return 1
}

# pair NAME TIMEOUT SERVER_SIDE "SERVER ARGS" CLIENT_ARGS: SERVER_SIDE is rxe or sroce;
# the server runs there, the client on the other end, connecting to the server's address
# (the out-of-band TCP exchange crosses the veth too). The verdict is pair_verdict's
# (rping_lib.sh): both exit 0, or for rping its own race with every ping verified.
pair() {
	name=$1; to=$2; side=$3; sargs=$4; cargs=$5
	if [ "$side" = sroce ]; then
		sns=$NS; cns=""; saddr=$SRO_V4
	else
		sns=""; cns=$NS; saddr=$RXE_V4
	fi
	# shellcheck disable=SC2086
	timeout "$to" $sns $sargs >/tmp/srv.out 2>&1 &
	spid=$!
	# PAIR_SLEEP: the head start of the server.
	sleep "${PAIR_SLEEP:-2}"
	# The server must listen before its client connects: on a loaded host 2 s were once
	# not enough for a TCP exchange, and once not for an rdma_cm listener (the client was
	# rejected, reason 8: no such service ID). A TCP server listens on a socket; an rdma_cm
	# server on a cm_id in state LISTEN (rdma resource show, as vm_rdmacm.sh waits).
	case "$sargs" in
	rping* | *" -R "*)
		comm=${sargs%% *}
		wait_for 30 sh -c "$sns rdma resource show cm_id 2>/dev/null | grep LISTEN | grep -q 'comm $comm'" ||
			echo "INFO $name: no listening cm_id of $comm after 30 s" ;;
	*) wait_for 30 sh -c "$sns cat /proc/net/tcp /proc/net/tcp6 2>/dev/null | awk '\$4 == \"0A\" { f = 1 } END { exit !f }'" ||
		echo "INFO $name: no TCP listener after 30 s" ;;
	esac
	# shellcheck disable=SC2086
	timeout "$to" $cns $cargs $saddr >/tmp/cli.out 2>&1
	crc=$?
	wait "$spid"
	src=$?
	if pair_verdict "$sargs" "$cargs" "$src" "$crc"; then
		pass "$name"
	else
		fail "$name (server $src, client $crc)"
		sed "s/^/    server: /" /tmp/srv.out | grep -v -E "^    server: *(PCIe|ibv_wr|CQ Mod|Mtu|Link type|GID index|Outstand|rdma_cm|Data ex|TX depth|Connection type|Number of qps|Dual-port|Device|Using SRQ)" | tail -n 12
		sed "s/^/    client: /" /tmp/cli.out | grep -v -E "^    client: *(PCIe|ibv_wr|CQ Mod|Mtu|Link type|GID index|Outstand|rdma_cm|Data ex|TX depth|Connection type|Number of qps|Dual-port|Device|Using SRQ)" | tail -n 12
	fi
}
# Both directions of one program: the server on sroce (rxe's client sends first), then on
# rxe. DEVARG is the device option, GIDARG the GID option of the program.
PAIRS=0  # program pairs run so far (both() runs two)
both() {
	bname=$1; bto=$2; gidopt=$3; rg=$4; sg=$5; shift 5
	PAIRS=$((PAIRS + 2))
	pair "$bname rxe->sroce" "$bto" sroce "$* -d sroce0 $gidopt $sg" "$* -d rxe0 $gidopt $rg"
	perf_line "$bname rxe->sroce"
	pair "$bname sroce->rxe" "$bto" rxe "$* -d rxe0 $gidopt $rg" "$* -d sroce0 $gidopt $sg"
	perf_line "$bname sroce->rxe"
}
perf_line() {
	l=$(grep -A1 -E '^ *#bytes' /tmp/cli.out | tail -n1 | tr -s ' ')
	[ -z "$l" ] && l=$(grep -E 'bytes in .* seconds' /tmp/cli.out | head -n1)
	[ -n "$l" ] && echo "SUMMARY $1: $l"
}

# Counters. sroce's from `sroce status --json` (datapath and engine sections), rxe's from
# `rdma statistic`; rxe reports a bad ICRC only in the kernel log, if at all (docs/interop.md).
dp_json() { $NS sroce status --json --dev sroce0 2>/dev/null | python3 -c "import json,sys; d=json.load(sys.stdin)['datapath']; print(d['$1'])" 2>/dev/null; }
eng_json() { $NS sroce status --json --dev sroce0 2>/dev/null | python3 -c "import json,sys; print(json.load(sys.stdin)['engine']['$1'])" 2>/dev/null; }
rxe_stat() { rdma statistic show link rxe0/1 2>/dev/null | tr -s ' ' '\n' | grep -A1 -x "$1" | tail -n1; }
sroce_ctr() { $NS sroce status --json --dev sroce0 2>/dev/null | tr ',{}' '\n\n\n' | sed -n "s/.*\"$1\": *\([0-9]*\).*/\1/p" | head -n1; }
rxe_bad() { dmesg | grep -ci "bad icrc"; }
