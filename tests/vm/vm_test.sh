#!/bin/sh
# The kernel module tests, inside the VM (busybox sh, as root). Prints one
# "PASS ..." or "FAIL ..." line per check and a summary; exits 1 on any
# failure. The host (run.sh) also scans the kernel log printed after this.
#
# kverbs plays libsroce's kernel path, kmock sroced's (see their headers);
# the unchanged rdma-core tools run where they need no transport.
set -u
fails=0
checks=0
T0=$(cut -d. -f1 /proc/uptime)
pass() { checks=$((checks + 1)); echo "PASS $*"; }
fail() { checks=$((checks + 1)); fails=$((fails + 1)); echo "FAIL $*"; }
expect() { d=$1; shift; if "$@" >/tmp/out 2>&1; then pass "$d"; else fail "$d"; sed 's/^/    /' /tmp/out; fi; }
expect_fail() { d=$1; shift; if "$@" >/tmp/out 2>&1; then fail "$d"; cat /tmp/out; else pass "$d"; fi; }
# A program that prints PASS/FAIL lines itself: fold them into ours.
run_checks() {
	"$@" >/tmp/out 2>&1
	rc=$?
	cat /tmp/out
	p=$(grep -c '^PASS' /tmp/out)
	f=$(grep -c '^FAIL' /tmp/out)
	checks=$((checks + p + f))
	fails=$((fails + f))
	if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then fail "$* exited $rc"; fi
}
port_state() { cat /sys/class/infiniband/"$1"/ports/1/state 2>/dev/null; }
# tcp_listening PORT [NETNS]: a socket of this (or NETNS's) network namespace listens on
# TCP PORT (/proc/net/tcp and tcp6: local address :PORT in hex, state 0A).
tcp_listening() {
	hex=$(printf '%04X' "$1")
	if [ -n "${2:-}" ]; then
		$IP netns exec "$2" cat /proc/net/tcp /proc/net/tcp6 2>/dev/null
	else
		cat /proc/net/tcp /proc/net/tcp6 2>/dev/null
	fi | awk -v p=":$hex" '$2 ~ (p "$") && $4 == "0A" { f = 1 } END { exit !f }'
}
wait_for() { # seconds, then a command
	n=$(($1 * 10)); shift
	while [ "$n" -gt 0 ]; do "$@" >/dev/null 2>&1 && return 0; sleep 0.1; n=$((n - 1)); done
	return 1
}
start_kmock() { # args...; sets KMOCK
	rm -f /tmp/kmock.ready
	kmock --ready /tmp/kmock.ready "$@" >/tmp/kmock.out 2>&1 &
	KMOCK=$!
	wait_for 10 test -e /tmp/kmock.ready || fail "kmock $* did not start: $(cat /tmp/kmock.out)"
}
stop_kmock() {
	kill -TERM "$KMOCK" 2>/dev/null
	wait "$KMOCK" 2>/dev/null
	cat /tmp/kmock.out
}
# busybox's applets win over PATH in its shell: name iproute2 explicitly.
IP=/usr/sbin/ip
[ -x "$IP" ] || IP="busybox ip"
# The module resets a device whose sroced died under programs (unregister, register
# again: docs/kmod.md, "sroced's death"): resets DEV counts them, wait_reset DEV N waits
# for the reset after the N-th and the device being back.
resets() { dmesg | grep -c "$1 reset after sroced's death"; }
wait_reset() {
	if wait_for 20 sh -c "[ \$(dmesg | grep -c \"$1 reset after sroced's death\") -gt $2 ] &&
		test -e /sys/class/infiniband/$1/ports/1/state"; then
		pass "$1 reset after its sroced's death and registered again"
	else
		fail "$1 not reset after its sroced's death"
	fi
}
summary_field() { sed -n "s/.* $1=\([0-9]*\).*/\1/p" /tmp/kmock.out | tail -n1; }

echo "== modules"
for m in virtio_pci virtio_net veth ib_core ib_uverbs ib_umad ib_cm iw_cm rdma_cm rdma_ucm; do
	modprobe "$m" || fail "modprobe $m"
done
expect "modprobe rdma_sroce" modprobe rdma_sroce call_timeout_ms=2000
$IP link set lo up
$IP link set eth0 up
$IP addr add 10.0.2.15/24 dev eth0
$IP -6 addr add fd00::15/64 dev eth0 nodad

echo "== device"
expect "rdma link add sroce0 type sroce netdev eth0" rdma link add sroce0 type sroce netdev eth0
# SROCE_VM_PYVERBS_ONLY=1 (run.sh's environment): only the pyverbs section, for work on it.
if [ "${SROCE_VM_PYVERBS_ONLY:-0}" = 1 ] && [ -r /test/vm_pyverbs.sh ]; then
	. /test/vm_pyverbs.sh
	expect "rdma link delete sroce0" rdma link delete sroce0
	expect "rmmod rdma_sroce" rmmod rdma_sroce
	expect_fail "no leak reported by the module" sh -c 'dmesg | grep -q "rdma_sroce: leak"'
	echo "SUMMARY vm_test: $checks checks, $fails failures, $(($(cut -d. -f1 /proc/uptime) - T0)) s (pyverbs only)"
	[ "$fails" -eq 0 ]
	exit
fi
expect "rdma link shows sroce0 on eth0" sh -c 'rdma link show | grep -q "sroce0/1 .*netdev eth0"'
expect "sysfs: device/net/eth0 (the netdev's parent is ours)" test -e /sys/class/infiniband/sroce0/device/net/eth0
expect "node GUID is eth0's EUI-64 (IBA 4.1.1)" sh -c '
	mac=$(tr -d : </sys/class/net/eth0/address)
	first=$(printf "%02x" $((0x$(echo "$mac" | cut -c1-2) ^ 2)))
	want="$first$(echo "$mac" | cut -c3-6)fffe$(echo "$mac" | cut -c7-12)"
	[ "$(tr -d : </sys/class/infiniband/sroce0/node_guid)" = "$want" ]'
expect "GID table: ::ffff:10.0.2.15 as RoCE v2" sh -c '
	for g in /sys/class/infiniband/sroce0/ports/1/gids/*; do
		i=${g##*/}
		if grep -q "0000:0000:0000:0000:0000:ffff:0a00:020f" "$g"; then
			grep -q "RoCE v2" /sys/class/infiniband/sroce0/ports/1/gid_attrs/types/$i && exit 0
		fi
	done; exit 1'
expect "GID table follows addresses: fd00::15 appears" wait_for 5 grep -rq "fd00:0000:0000:0000:0000:0000:0000:0015" /sys/class/infiniband/sroce0/ports/1/gids/
$IP -6 addr del fd00::15/64 dev eth0
expect "... and goes with the address" wait_for 5 sh -c '! grep -rq "fd00:0000:0000:0000:0000:0000:0000:0015" /sys/class/infiniband/sroce0/ports/1/gids/'
expect "link layer Ethernet" grep -q Ethernet /sys/class/infiniband/sroce0/ports/1/link_layer
[ "$(port_state sroce0)" = "1: DOWN" ] && pass "port DOWN without sroced" || fail "port state without sroced: $(port_state sroce0)"
expect "uverbs device node" sh -c 'ls /dev/infiniband/ | grep -q uverbs'
expect "rdma_cm device node" test -c /dev/infiniband/rdma_cm
expect_fail "second sroce device on the same netdev refused" rdma link add sroceX type sroce netdev eth0
if command -v ibv_devices >/dev/null; then
	expect "ibv_devices lists sroce0 (libsroce matched the kernel device)" sh -c 'ibv_devices | grep -q sroce0'
fi

if command -v sroced >/dev/null && command -v ibv_devinfo >/dev/null; then
	# The real sroced on its kernel path (/dev/sroce) and libsroce on its own (the uverbs
	# device): unchanged programs, no sroce-run. Loopback: both ends on sroce0, the packets
	# go out through sroced's UDP datapath to 10.0.2.15 and back.
	echo "== unchanged programs on the real device through sroced's kernel path"
	mkdir -p /run/sroce
	sroced --netdev eth0 --kernel --check-config >/tmp/sroced.out 2>&1 || { fail "sroced --check-config"; cat /tmp/sroced.out; }
	sroced --netdev eth0 --kernel --log-level info >/tmp/sroced.out 2>&1 &
	SROCED=$!
	if wait_for 30 sh -c '[ "$(cat /sys/class/infiniband/sroce0/ports/1/state)" = "4: ACTIVE" ]'; then
		pass "sroced --kernel attached: port ACTIVE"
	else
		fail "sroced --kernel did not attach"
		sed 's/^/    sroced: /' /tmp/sroced.out
		kill -0 "$SROCED" 2>/dev/null && echo "    sroced still running: $(cat /proc/$SROCED/wchan) $(cat /proc/$SROCED/stat)"
	fi
	expect "ibv_devinfo -d sroce0 (PORT_ACTIVE)" sh -c 'ibv_devinfo -d sroce0 | tee /tmp/devinfo | grep -q PORT_ACTIVE'
	grep -E "hca_id|node_guid|state|active_mtu|link_layer" /tmp/devinfo | sed 's/^/    /'
	# The socket path's uid policy on the kernel path too (control.allow_*: root and
	# sroced's own uid by default): another uid's open is refused.
	run_checks kverbs uid sroce0 4242 13
	# The kernel's GID table index of ::ffff:10.0.2.15, the address sroced sends from.
	G=""
	for g in /sys/class/infiniband/sroce0/ports/1/gids/*; do
		grep -q "0000:0000:0000:0000:0000:ffff:0a00:020f" "$g" && G=${g##*/} && break
	done
	[ -n "$G" ] && pass "IPv4 GID at index $G" || fail "no IPv4 GID for 10.0.2.15"
	# client_server NAME TIMEOUT SERVER-COMMAND... -- CLIENT-ARGS (the client is the server
	# command plus CLIENT-ARGS); prints both outputs, PASS when both exit 0.
	client_server() {
		name=$1; to=$2; shift 2
		srv=""; while [ "$1" != "--" ]; do srv="$srv $1"; shift; done; shift
		# shellcheck disable=SC2086
		timeout "$to" $srv >/tmp/srv.out 2>&1 &
		spid=$!
		# The client starts once the server listens (every program here uses TCP 18515).
		wait_for 30 tcp_listening 18515 || echo "    note: nothing listens on TCP 18515 after 30 s"
		# shellcheck disable=SC2086
		timeout "$to" $srv "$@" >/tmp/cli.out 2>&1
		crc=$?
		wait "$spid"
		src=$?
		if [ "$crc" = 0 ] && [ "$src" = 0 ]; then pass "$name"; else
			fail "$name (server $src, client $crc)"
			sed 's/^/    server: /' /tmp/srv.out | tail -n 15
			sed 's/^/    client: /' /tmp/cli.out | tail -n 15
		fi
	}
	client_server "ibv_rc_pingpong -c (data validated)" 60 ibv_rc_pingpong -d sroce0 -g "$G" -n 200 -s 4096 -c -- 127.0.0.1
	grep -E "bytes in|iters in" /tmp/cli.out | sed 's/^/    /'
	echo "SUMMARY ibv_rc_pingpong -c: $(grep -E 'iters in' /tmp/cli.out | head -n1)"
	client_server "ibv_rc_pingpong -e (completion channel)" 60 ibv_rc_pingpong -d sroce0 -g "$G" -n 200 -s 1024 -e -- 127.0.0.1
	echo "SUMMARY ibv_rc_pingpong -e: $(grep -E 'iters in' /tmp/cli.out | head -n1)"
	# Every byte of every operation (tests/lib/datacheck): SEND, SEND with immediate, WRITE,
	# WRITE with immediate, READ, both atomics, random sizes and offsets.
	if command -v sroce-datacheck >/dev/null; then
		client_server "sroce-datacheck (every byte of 48 steps, all operations)" 180 \
			sroce-datacheck -d sroce0 -g "$G" -p 18515 -n 48 -s 16384 -- 127.0.0.1
		echo "SUMMARY sroce-datacheck: $(grep -E 'client (OK|FAIL)' /tmp/cli.out | head -n1)"
	fi
	client_server "ib_write_bw" 90 ib_write_bw -d sroce0 -x "$G" -s 65536 -n 200 -F -- 127.0.0.1
	echo "SUMMARY ib_write_bw: $(grep -A1 -E '#bytes' /tmp/cli.out | tail -n1)"
	client_server "ib_send_lat" 90 ib_send_lat -d sroce0 -x "$G" -s 64 -n 200 -F -- 127.0.0.1
	echo "SUMMARY ib_send_lat: $(grep -A1 -E '#bytes' /tmp/cli.out | tail -n1)"
	# libsroce's own test of completion timestamps and ibv_resize_cq (tests/provider/cq_test.cc),
	# here through the module: the new rings come from rdma_sroce.ko.
	if [ -x /test/bin/provider_cq ]; then
		expect "provider_cq (timestamps, resize CQ) on the kernel path" \
			env SROCE_TEST_GID="$G" ASAN_OPTIONS=detect_leaks=0 timeout 120 /test/bin/provider_cq
		echo "SUMMARY provider_cq: $(grep -E 'All tests passed|test cases:' /tmp/out | tail -n1)"
	fi
	kill -TERM "$SROCED"
	wait "$SROCED"
	tail -n 30 /tmp/sroced.out | sed 's/^/    sroced: /'
	if grep -qE " error | critical " /tmp/sroced.out; then fail "sroced logged errors"; sed 's/^/    /' /tmp/sroced.out; fi
	wait_for 5 sh -c '[ "$(cat /sys/class/infiniband/sroce0/ports/1/state)" = "1: DOWN" ]' &&
		pass "port DOWN after sroced --kernel exited" || fail "port state after sroced: $(port_state sroce0)"

	echo "== sroced killed under unchanged programs (kernel path)"
	sroced --netdev eth0 --kernel --log-level warn >/tmp/sroced.out 2>&1 &
	SROCED=$!
	wait_for 30 sh -c '[ "$(cat /sys/class/infiniband/sroce0/ports/1/state)" = "4: ACTIVE" ]' ||
		fail "sroced --kernel did not attach again"
	timeout 60 ibv_rc_pingpong -d sroce0 -g "$G" -n 1000000 -s 1024 -e >/tmp/srv.out 2>&1 &
	S=$!
	sleep 1
	timeout 60 ibv_rc_pingpong -d sroce0 -g "$G" -n 1000000 -s 1024 -e 127.0.0.1 >/tmp/cli.out 2>&1 &
	C=$!
	sleep 3
	# Still exchanging when the daemon goes (a million round trips take far longer; their
	# stdout is buffered, so only the processes being alive tells).
	running=0
	kill -0 "$S" 2>/dev/null && kill -0 "$C" 2>/dev/null && running=1
	r0=$(resets sroce0)
	kill -KILL "$SROCED"
	wait "$SROCED" 2>/dev/null
	wait "$S"
	src=$?
	wait "$C"
	crc=$?
	# Both sleep in ibv_get_cq_event: the module wakes them, the provider turns the rings'
	# error flag into flush completions, pingpong reports a failed completion and exits.
	# A hang ends in timeout's kill: 124 from coreutils, 143 (SIGTERM) from busybox's.
	hung() { [ "$1" = 124 ] || [ "$1" = 143 ]; }
	if [ "$running" = 1 ] && [ "$src" != 0 ] && ! hung "$src" && [ "$crc" != 0 ] && ! hung "$crc"; then
		pass "ibv_rc_pingpong -e ended with an error when sroced was killed (server $src, client $crc)"
	else
		fail "ibv_rc_pingpong -e after sroced was killed: running $running, server $src, client $crc (124 or 143 = hung)"
	fi
	grep -v "address" /tmp/srv.out /tmp/cli.out | head -n 8 | sed "s/^/    /"
	[ "$running" = 1 ] || head -n 40 /tmp/sroced.out | sed "s/^/    sroced: /"
	wait_reset sroce0 "$r0"
fi

echo "== without sroced"
run_checks kverbs nodaemon

echo "== channel misuse"
run_checks kmock --faults sroce0

echo "== objects through uverbs, mirrored to the daemon"
start_kmock --dev sroce0 --log /tmp/kmock.log
[ "$(port_state sroce0)" = "4: ACTIVE" ] && pass "port ACTIVE once sroced attached" || fail "port state with sroced: $(port_state sroce0)"
run_checks kverbs objects
run_checks kverbs faults
run_checks kverbs exit-live
stop_kmock
[ "$(summary_field closes)" = 3 ] && pass "daemon saw 3 context closes" || fail "context closes: $(summary_field closes)"
[ "$(summary_field left_at_close)" = 0 ] && pass "every object destroyed before its context closed" ||
	fail "objects left at close: $(summary_field left_at_close)"
[ "$(summary_field mr_checked)" -ge 2 ] && pass "daemon read MR bytes through its mapping" || fail "mr_checked $(summary_field mr_checked)"
[ "$(summary_field ro_refused)" -ge 1 ] && [ "$(summary_field ro_violations)" = 0 ] &&
	pass "read-only MR: a writable daemon mapping is refused (EACCES)" ||
	fail "read-only MR mappings: refused $(summary_field ro_refused), violations $(summary_field ro_violations)"
[ "$(summary_field doorbells)" -ge 2 ] && pass "doorbells reached the daemon's eventfd" || fail "doorbells $(summary_field doorbells)"
[ "$(summary_field events)" -ge 2 ] && pass "completion/async events sent" || fail "events $(summary_field events)"
[ "$(summary_field gids)" -ge 1 ] && pass "GID table mirrored at attach" || fail "gids $(summary_field gids)"
wait_for 5 sh -c '[ "$(cat /sys/class/infiniband/sroce0/ports/1/state)" = "1: DOWN" ]' &&
	pass "port DOWN after sroced left" || fail "port state after sroced left: $(port_state sroce0)"

echo "== four programs at once"
start_kmock --dev sroce0
for i in 1 2 3 4; do kverbs objects >/tmp/par.$i 2>&1 & done
wait_pids_ok=1
for j in $(jobs -p); do [ "$j" = "$KMOCK" ] && continue; wait "$j" || wait_pids_ok=0; done
n=$(cat /tmp/par.* | grep -c '^RESULT objects .* 0 failures')
[ "$n" = 4 ] && [ "$wait_pids_ok" = 1 ] && pass "4 concurrent kverbs objects passed" ||
	{ fail "concurrent kverbs objects: $n of 4"; grep -h '^FAIL' /tmp/par.*; }
stop_kmock >/dev/null
[ "$(summary_field left_at_close)" = 0 ] && pass "concurrent: nothing left at close" || fail "concurrent left_at_close"

echo "== sroced dies under a sleeping program"
rm -f /tmp/kverbs.ready
start_kmock --dev sroce0
kverbs death >/tmp/death.out 2>&1 &
KV=$!
wait_for 10 test -e /tmp/kverbs.ready || fail "kverbs death did not get ready"
r0=$(resets sroce0)
kill -KILL "$KMOCK"
wait "$KMOCK" 2>/dev/null
wait "$KV"
rc=$?
cat /tmp/death.out
p=$(grep -c '^PASS' /tmp/death.out); f=$(grep -c '^FAIL' /tmp/death.out)
checks=$((checks + p + f)); fails=$((fails + f))
[ "$rc" = 0 ] || [ "$f" -gt 0 ] || fail "kverbs death exited $rc"
wait_reset sroce0 "$r0"

echo "== sroced hangs"
start_kmock --dev sroce0 --hang
run_checks kverbs timeout sroce0 2
# The waiter must leave on SIGKILL, long before the (raised) call timeout would end it;
# the bound leaves room for an ASan process's exit under TCG.
echo 30000 >/sys/module/rdma_sroce/parameters/call_timeout_ms
run_checks kverbs killwait sroce0 5
echo 2000 >/sys/module/rdma_sroce/parameters/call_timeout_ms
stop_kmock >/dev/null
[ -r /test/vm_slow.sh ] && . /test/vm_slow.sh

echo "== device removal under an attached daemon"
start_kmock --dev sroce0
expect "rdma link delete sroce0" rdma link delete sroce0
expect "daemon sees the channel hang up and exits" wait_for 5 sh -c "! kill -0 $KMOCK"
wait "$KMOCK" 2>/dev/null
expect "sroce0 gone from sysfs" sh -c '! test -e /sys/class/infiniband/sroce0'

echo "== the netdev goes away"
$IP link add veth0 type veth peer name veth1
$IP link set veth0 up
$IP link set veth1 up
expect "rdma link add sroce1 on veth0" rdma link add sroce1 type sroce netdev veth0
expect "veth has no parent device: still registers" test -e /sys/class/infiniband/sroce1
$IP link del veth0
expect "sroce1 unregistered with its netdev" wait_for 10 sh -c '! test -e /sys/class/infiniband/sroce1'
expect "rdma link add sroce0 again" rdma link add sroce0 type sroce netdev eth0

echo "== GSI: MADs of QP1 carried by the daemon between two hosts"
# Two "hosts": network namespaces joined by a veth pair, a device each.
$IP netns add h1 && $IP netns add h2 || fail "ip netns add"
$IP link add veth2 type veth peer name veth3
$IP link set veth2 netns h1
$IP link set veth3 netns h2
$IP -n h1 addr add 10.1.0.1/24 dev veth2
$IP -n h2 addr add 10.1.0.2/24 dev veth3
$IP -n h1 link set veth2 up
$IP -n h2 link set veth3 up
$IP -n h1 link set lo up
$IP -n h2 link set lo up
$IP -n h1 -6 addr add fd01::1/64 dev veth2 nodad
$IP -n h2 -6 addr add fd01::2/64 dev veth3 nodad
expect "rdma link add sroce1 in h1" $IP netns exec h1 rdma link add sroce1 type sroce netdev veth2
expect "rdma link add sroce2 in h2" $IP netns exec h2 rdma link add sroce2 type sroce netdev veth3
start_kmock --dev sroce1 --dev sroce2 --wire
wait_for 5 sh -c 'grep -q "ffff:0a01:0002" /sys/class/infiniband/sroce2/ports/1/gids/*'
wait_for 5 sh -c 'grep -q "^fd01" /sys/class/infiniband/sroce2/ports/1/gids/*'
# Neighbour discovery sends no solicitation while the link-local address is still
# tentative (RFC 4862 DAD, ~1-2 s after link up), and ib_umad's AH resolution gives up
# after 1 s: wait until both ends are past DAD, as a real host would be.
dad_done() { # netns dev: a link-local address exists and none is tentative
	$IP -n "$1" -6 addr show dev "$2" scope link | grep -q inet6 &&
		! $IP -n "$1" -6 addr show dev "$2" tentative | grep -q inet6
}
{ wait_for 10 dad_done h1 veth2 && wait_for 10 dad_done h2 veth3; } ||
	fail "IPv6 DAD still running on the GSI veth pair"
run_checks kmad sroce1 sroce2 v4
run_checks kmad sroce1 sroce2 v6
stop_kmock
[ "$(summary_field gsi_out)" -ge 4 ] && pass "daemon carried the MADs ($(summary_field gsi_out))" ||
	fail "gsi_out $(summary_field gsi_out)"
expect "rdma link delete sroce1" rdma link delete sroce1
expect "rdma link delete sroce2" rdma link delete sroce2
$IP netns del h1
$IP netns del h2

[ -r /test/vm_rdmacm.sh ] && . /test/vm_rdmacm.sh
[ -r /test/vm_pyverbs.sh ] && . /test/vm_pyverbs.sh
echo "== unload"
expect "rdma link delete sroce0" rdma link delete sroce0
expect "rmmod rdma_sroce" rmmod rdma_sroce
expect "module reported clean unload" sh -c 'dmesg | grep -q "rdma_sroce: unloaded"'
expect_fail "no leak reported by the module" sh -c 'dmesg | grep -q "rdma_sroce: leak"'

T1=$(cut -d. -f1 /proc/uptime)
echo "SUMMARY vm_test: $checks checks, $fails failures, $((T1 - T0)) s"
[ "$fails" -eq 0 ]
