#!/bin/sh
# Real clients through rdma_sroce.ko, inside the VM (ctest vm_clients, label vm;
# docs/clients.md): UCX's ucx_perftest and Open MPI (pml ucx) between two "hosts", with no
# sroce-run and no environment for libibverbs: the devices are the module's, found through
# sysfs and /dev/infiniband like any RNIC's; and qperf's UD tests, which cannot run on RoCE.
#
# Hosts: network namespaces r1 and r2 joined by a veth pair, sroce1 on r1's end and sroce2
# on r2's, a real `sroced --kernel` in each namespace. One SUMMARY line per program.
set -u
fails=0
checks=0
T0=$(cut -d. -f1 /proc/uptime)
pass() { checks=$((checks + 1)); echo "PASS $*"; }
fail() { checks=$((checks + 1)); fails=$((fails + 1)); echo "FAIL $*"; }
expect() { d=$1; shift; if "$@" >/tmp/out 2>&1; then pass "$d"; else fail "$d"; sed 's/^/    /' /tmp/out; fi; }
wait_for() { # seconds, then a command
	n=$(($1 * 10)); shift
	while [ "$n" -gt 0 ]; do "$@" >/dev/null 2>&1 && return 0; sleep 0.1; n=$((n - 1)); done
	return 1
}
# tcp_listening PORT NETNS: a socket of NETNS listens on TCP PORT (/proc/net/tcp{,6}).
tcp_listening() {
	hex=$(printf '%04X' "$1")
	$IP netns exec "$2" cat /proc/net/tcp /proc/net/tcp6 2>/dev/null |
		awk -v p=":$hex" '$2 ~ (p "$") && $4 == "0A" { f = 1 } END { exit !f }'
}
now() { cut -d' ' -f1 /proc/uptime; }
since() { echo "$1 $(now)" | awk '{ printf "%.0f", $2 - $1 }'; }
IP=/usr/sbin/ip
[ -x "$IP" ] || IP="busybox ip"
NS1=r1 NS2=r2 A1=10.2.0.1 A2=10.2.0.2 D1=sroce1 D2=sroce2

echo "== modules"
for m in virtio_pci veth ib_core ib_uverbs ib_umad ib_cm iw_cm rdma_cm rdma_ucm; do
	modprobe "$m" || fail "modprobe $m"
done
expect "modprobe rdma_sroce" modprobe rdma_sroce call_timeout_ms=5000
$IP link set lo up

echo "== two hosts: $D1 in $NS1, $D2 in $NS2, a sroced --kernel each"
$IP netns add $NS1 && $IP netns add $NS2 || fail "ip netns add"
$IP link add veth4 type veth peer name veth5
$IP link set veth4 netns $NS1
$IP link set veth5 netns $NS2
$IP -n $NS1 addr add $A1/24 dev veth4
$IP -n $NS2 addr add $A2/24 dev veth5
for ns in $NS1 $NS2; do $IP -n $ns link set lo up; done
$IP -n $NS1 link set veth4 up
$IP -n $NS2 link set veth5 up
expect "rdma link add $D1 on veth4 ($NS1)" $IP netns exec $NS1 rdma link add $D1 type sroce netdev veth4
expect "rdma link add $D2 on veth5 ($NS2)" $IP netns exec $NS2 rdma link add $D2 type sroce netdev veth5
mkdir -p /run/sroce
# start_sroced N DEV NETDEV: sets SROCEDN. The daemons' loops run SCHED_FIFO and sleep when
# idle (datapath.realtime_priority, busy_poll_us 0: docs/sroced.md, "Latency: who waits for
# whom"): UCX and Open MPI spin on their completion queues, and on the VM's two emulated
# CPUs two spinning ranks otherwise starve the two daemons (an ASan sroced under TCG most:
# RC retries run out and UCX aborts the job).
start_sroced() {
	$IP netns exec r$1 sroced --dev "$2" --netdev "$3" --kernel --socket /run/sroce/r$1.sock \
		--set datapath.realtime_priority=50 --set datapath.busy_poll_us=0 \
		--log-level info >/tmp/sroced.r$1.out 2>&1 &
	eval "SROCED$1=$!"
	if wait_for 30 sh -c "[ \"\$(cat /sys/class/infiniband/$2/ports/1/state)\" = '4: ACTIVE' ]"; then
		pass "sroced --kernel for $2 in r$1: port ACTIVE"
	else
		fail "sroced --kernel for $2 in r$1 did not attach"
		sed 's/^/    sroced: /' /tmp/sroced.r$1.out
	fi
}
start_sroced 1 $D1 veth4
start_sroced 2 $D2 veth5
$IP netns exec $NS1 ping -c 1 -W 5 $A2 >/dev/null 2>&1 || fail "ping $A2 from $NS1"
expect "ibv_devinfo -d $D1 in $NS1 (no RDMAV_DRIVERS, no sroce-run)" \
	sh -c "env | grep -qE '^(RDMAV_DRIVERS|SYSFS_PATH|LD_PRELOAD)=' && exit 1;
		$IP netns exec $NS1 ibv_devinfo -d $D1 | grep -q PORT_ACTIVE"

# daemon_counters: what each sroced reports (sroce status), after a failure.
daemon_counters() {
	command -v sroce >/dev/null || return 0
	for n in 1 2; do
		timeout 20 $IP netns exec r$n sroce status --socket /run/sroce/r$n.sock 2>&1 |
			tail -n 25 | sed "s/^/    sroced r$n: /"
	done
}

# pair NAME TIMEOUT PORT "SERVER CMD" "CLIENT CMD": the server in r2, then once it listens
# on TCP PORT the client in r1; PASS when both exit 0. Outputs in /tmp/srv.out, /tmp/cli.out.
pair() {
	name=$1 to=$2 port=$3 scmd=$4 ccmd=$5
	# shellcheck disable=SC2086
	timeout "$to" $IP netns exec $NS2 $scmd >/tmp/srv.out 2>&1 &
	spid=$!
	wait_for 30 tcp_listening "$port" $NS2 || echo "    note: nothing listens on TCP $port in $NS2 after 30 s"
	# shellcheck disable=SC2086
	timeout "$to" $IP netns exec $NS1 $ccmd >/tmp/cli.out 2>&1
	crc=$?
	wait "$spid"
	src=$?
	if [ "$crc" = 0 ] && [ "$src" = 0 ]; then pass "$name"; else
		fail "$name (server $src, client $crc; 124 or 143 = timed out)"
		sed 's/^/    server: /' /tmp/srv.out | tail -n 20
		sed 's/^/    client: /' /tmp/cli.out | tail -n 20
		daemon_counters
	fi
	[ "$crc" = 0 ] && [ "$src" = 0 ]
}

# qperf's UD tests (ud_lat, ud_bw) never use rdma_cm (qperf 0.4.11 forces -cm0 for them)
# and build their address handle from the port's LID alone, without a GRH; RoCE has no
# LIDs and every RoCEv2 packet carries the routing header (IBA Annex A17), so a RoCE device
# must refuse that address handle with EINVAL, as the kernel's own check does for rxe and
# RoCE NICs (rdma_check_ah_attr). With the devices named, qperf reaches exactly that.
if command -v qperf >/dev/null; then
	echo "== qperf ud_lat with the devices named (-li $D1:1 -ri $D2:1)"
	timeout 120 $IP netns exec $NS2 qperf -lp 19766 >/tmp/qsrv.out 2>&1 &
	qpid=$!
	wait_for 20 tcp_listening 19766 $NS2 || echo "    note: qperf's server not listening after 20 s"
	timeout 60 $IP netns exec $NS1 qperf -lp 19766 -li $D1:1 -ri $D2:1 -t 2 $A2 ud_lat >/tmp/cli.out 2>&1
	qrc=$?
	# Whichever end reaches ibv_create_ah first fails the test: the client prints its own
	# error, or "server: ..." with the server's, which the server also prints itself.
	kill "$qpid" 2>/dev/null
	wait "$qpid" 2>/dev/null
	sed 's/^/    qperf client: /' /tmp/cli.out | tail -n 5
	sed 's/^/    qperf server: /' /tmp/qsrv.out | tail -n 5
	refused="failed to create address handle: Invalid argument"
	if [ "$qrc" != 0 ] && [ "$qrc" != 124 ] && [ "$qrc" != 143 ] &&
		grep -qh "$refused" /tmp/cli.out /tmp/qsrv.out; then
		pass "qperf ud_lat: an address handle without a GRH is refused with EINVAL (RoCE), no hang"
	else
		fail "qperf ud_lat: exit $qrc, want a refused address handle (EINVAL) on either end"
	fi
	echo "SUMMARY qperf ud_lat: refused (exit $qrc): $(grep -ho 'failed to create address handle.*' /tmp/cli.out /tmp/qsrv.out | head -n1)"
fi

# UCX (Debian's ucx-utils): ucx_perftest's UCP tests over rc_verbs (+ ud_verbs for the
# wire-up, as UCP uses it) and over ud_verbs alone. Each side names its own device
# (UCX_NET_DEVICES); UCT tests are not run here: ucx_perftest's server takes the device
# name from the client's parameters, and the two hosts' devices have different names.
if command -v ucx_perftest >/dev/null; then
	echo "== UCX ucx_perftest through the module"
	ucx_port=13400
	ucx() { # TLS TEST ARGS...
		tls=$1 t=$2
		shift 2
		ucx_port=$((ucx_port + 1))
		env="env UCX_TLS=$tls UCX_WARN_UNUSED_ENV_VARS=n"
		if pair "ucx_perftest $t $* ($tls)" 120 $ucx_port \
			"$env UCX_NET_DEVICES=$D2:1 ucx_perftest -p $ucx_port -t $t $*" \
			"$env UCX_NET_DEVICES=$D1:1 ucx_perftest $A2 -p $ucx_port -t $t -f $*"; then
			# The client's final row (-f): iterations and seven figures.
			final=$(grep -E '^[ |]*[0-9]+([ |]+(-?nan|-?inf|[0-9.]+)){7}[ |]*$' /tmp/cli.out | tail -n1 | tr -s ' |' ' ')
			if [ -n "$final" ]; then
				pass "ucx_perftest $t ($tls): final figures printed"
			else
				fail "ucx_perftest $t ($tls): no final figures"
				tail -n 10 /tmp/cli.out | sed 's/^/    client: /'
			fi
			echo "SUMMARY ucx $t $tls $*: $final"
		else
			echo "SUMMARY ucx $t $tls: FAILED"
		fi
	}
	t_ucx=$(now)
	ucx rc_verbs,ud_verbs tag_bw -s 65536 -n 200 -w 20
	ucx rc_verbs,ud_verbs tag_lat -s 8 -n 200 -w 20
	ucx rc_verbs,ud_verbs ucp_put_bw -s 65536 -n 200 -w 20
	ucx rc_verbs,ud_verbs ucp_get -s 65536 -n 200 -w 20
	ucx rc_verbs,ud_verbs ucp_am_bw -s 4096 -n 500 -w 20
	ucx ud_verbs tag_bw -s 65536 -n 50 -w 5
	ucx ud_verbs tag_lat -s 8 -n 200 -w 20
	echo "    UCX section: $(since "$t_ucx") s"
fi

# Open MPI (openmpi-bin, pml ucx): mpi_check's two ranks (10 iterations, sizes up to 64 KiB,
# which pml ucx already sends by rendezvous: the 1 MiB steps of the host tests take minutes
# under TCG), rank 0 with mpirun in r1 as host
# sroce-h1, rank 1 in r2 as sroce-h2, started by vm_rsh.sh (plm_rsh_agent: ip netns exec and
# a UTS namespace instead of ssh); every received byte checked by the program. Each rank's
# UCX uses its own host's device: mpirun's environment names sroce1, the agent's sroce2.
if command -v mpirun >/dev/null && [ -x /test/bin/mpi_check ] && [ -x /test/bin/vm_rsh.sh ]; then
	echo "== Open MPI mpi_check through the module"
	for ns in $NS1 $NS2; do
		mkdir -p /etc/netns/$ns
		printf '127.0.0.1 localhost\n%s sroce-h1\n%s sroce-h2\n' $A1 $A2 >/etc/netns/$ns/hosts
	done
	t_mpi=$(now)
	for tls in rc_verbs,ud_verbs ud_verbs; do
		timeout 240 $IP netns exec $NS1 unshare -u /bin/sh -c 'hostname sroce-h1; exec "$@"' sh \
			env UCX_NET_DEVICES=$D1:1 mpirun --allow-run-as-root -np 2 --host sroce-h1:1,sroce-h2:1 \
			--mca plm_rsh_agent /test/bin/vm_rsh.sh --mca plm_rsh_no_tree_spawn 1 \
			--mca oob_tcp_if_include 10.2.0.0/24 \
			--mca pml ucx --mca btl ^vader,tcp,openib,uct,smcuda --mca osc ucx \
			-x UCX_TLS="$tls,self" -x UCX_LOG_LEVEL=info -x UCX_WARN_UNUSED_ENV_VARS=n \
			/test/bin/mpi_check 10 65536 >/tmp/mpi.out 2>&1
		mrc=$?
		ok=1
		grep -q '^mpi_check: ok$' /tmp/mpi.out || ok=0
		grep -q 'rank 0 of 2 on sroce-h1' /tmp/mpi.out || ok=0
		grep -q 'rank 1 of 2 on sroce-h2' /tmp/mpi.out || ok=0
		# UCX's own account of each rank's endpoint (UCX_LOG_LEVEL=info): the tag lane is
		# the first transport of TLS on the rank's own host's device.
		lane="tag(${tls%%,*}/$D1:1)"
		lane2="tag(${tls%%,*}/$D2:1)"
		grep -qF "$lane" /tmp/mpi.out || ok=0
		grep -qF "$lane2" /tmp/mpi.out || ok=0
		if [ "$mrc" = 0 ] && [ "$ok" = 1 ]; then
			pass "mpirun mpi_check 10 65536 over $tls (2 ranks, 2 hosts, every byte checked; $lane, $lane2)"
			echo "SUMMARY mpi $tls: $(grep -E 'pingpong size 65536|collectives' /tmp/mpi.out | tr '\n' ' ')"
		else
			fail "mpirun mpi_check over $tls (exit $mrc; ok line, both hosts, $lane and $lane2 required)"
			grep -E 'UCX +(ERROR|FATAL|WARN)|[Ff]atal|rror' /tmp/mpi.out | head -n 10 | sed 's/^/    mpi: /'
			grep -vE '^\[|^ *[0-9]+  /' /tmp/mpi.out | tail -n 30 | sed 's/^/    mpi: /'
			grep -E 'ucp_worker.*tag\(' /tmp/mpi.out | head -n 4 | sed 's/^/    mpi: /'
			daemon_counters
			echo "SUMMARY mpi $tls: FAILED"
		fi
	done
	echo "    MPI section: $(since "$t_mpi") s"
fi

echo "== teardown"
for n in 1 2; do
	eval "p=\$SROCED$n"
	# shellcheck disable=SC2154 # p is set by the eval above
	kill -TERM "$p" 2>/dev/null
	wait "$p"
	if grep -qE " error | critical " /tmp/sroced.r$n.out; then
		fail "sroced r$n logged errors"
		grep -E " error | critical " /tmp/sroced.r$n.out | head -n 10 | sed 's/^/    /'
	fi
done
expect "rdma link delete $D1" rdma link delete $D1
expect "rdma link delete $D2" rdma link delete $D2
$IP netns del $NS1
$IP netns del $NS2
expect "rmmod rdma_sroce" rmmod rdma_sroce
expect "module reported clean unload" sh -c 'dmesg | grep -q "rdma_sroce: unloaded"'

echo "SUMMARY vm_clients: $checks checks, $fails failures, $(($(cut -d. -f1 /proc/uptime) - T0)) s"
[ "$fails" -eq 0 ]
