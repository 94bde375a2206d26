# rdma_cm through the real sroced (sourced by vm_test.sh, which defines pass, fail,
# expect, wait_for, port_state and IP).
#
# Two "hosts": network namespaces r1 and r2 joined by a veth pair, a sroce device on each
# end and a real `sroced --kernel` in each namespace. The MADs of QP1 (ib_cm's REQ/REP/RTU,
# SIDR for UD) go module -> GSI_SEND -> sroced -> RoCEv2 UD -> the other sroced ->
# GSI_RECV -> module (docs/kmod.md, "The GSI QP"); the connections' data through the
# sroceds' engines. Unchanged programs: rping, ib_send_bw -R, ib_write_bw -R, ucmatose,
# udaddy; then sroced killed under a running rping. One SUMMARY line per program.
. /test/rping_lib.sh
rdmacm_main() {
	if ! command -v sroced >/dev/null || ! command -v rping >/dev/null; then
		echo "SUMMARY rdma_cm: skipped (sroced or rping not in the image)"
		return 0
	fi
	echo "== rdma_cm between two hosts through sroced's kernel path (GSI)"
	rc_t0=$(cut -d. -f1 /proc/uptime)
	NS1=r1 NS2=r2 A1=10.2.0.1 A2=10.2.0.2
	$IP netns add $NS1 && $IP netns add $NS2 || fail "ip netns add"
	$IP link add veth4 type veth peer name veth5
	$IP link set veth4 netns $NS1
	$IP link set veth5 netns $NS2
	$IP -n $NS1 addr add $A1/24 dev veth4
	$IP -n $NS2 addr add $A2/24 dev veth5
	$IP -n $NS1 link set lo up
	$IP -n $NS2 link set lo up
	$IP -n $NS1 link set veth4 up
	$IP -n $NS2 link set veth5 up
	$IP -n $NS1 -6 addr add fd01::1/64 dev veth4 nodad
	$IP -n $NS2 -6 addr add fd01::2/64 dev veth5 nodad
	expect "rdma link add sroce3 on veth4 ($NS1)" $IP netns exec $NS1 rdma link add sroce3 type sroce netdev veth4
	expect "rdma link add sroce4 on veth5 ($NS2)" $IP netns exec $NS2 rdma link add sroce4 type sroce netdev veth5
	mkdir -p /run/sroce
	rdmacm_start_sroced 1
	rdmacm_start_sroced 2
	# The neighbours first: rdma_resolve_addr does its own ARP, but a first exchange
	# should not race the kernel's resolution against TCG's slow clock.
	$IP netns exec $NS1 ping -c 1 -W 5 $A2 >/dev/null 2>&1 || fail "ping $A2 from $NS1"
	$IP netns exec $NS1 ping -c 1 -W 5 fd01::2 >/dev/null 2>&1 || fail "ping fd01::2 from $NS1"

	# MADs alone first, through the real sroceds: a GET and its answer between the two
	# devices' QP1s with ib_umad (kmad), over the IPv4 GIDs (the datapath) and the IPv6
	# ones (QP1's own socket in sroced, gsi_socket.h).
	if command -v kmad >/dev/null; then
		wait_for 5 sh -c 'grep -q "^fd01" /sys/class/infiniband/sroce4/ports/1/gids/*'
		run_checks kmad sroce3 sroce4 v4
		run_checks kmad sroce3 sroce4 v6
	fi

	# ns_pair NAME TIMEOUT "SERVER CMD" "CLIENT CMD": server in r2, client in r1, PASS when
	# both exit 0; their outputs in /tmp/srv.out and /tmp/cli.out.
	# cm_listening COMM: a cm_id of program COMM is in state LISTEN (rdma resource show).
	cm_listening() {
		rdma resource show cm_id 2>/dev/null | grep LISTEN | grep -q "comm $1"
	}
	# wait_cm_listen COMM: the client starts once the server listens, not after a sleep a
	# slow VM can outlast (up to 20 s; then a note, and the client runs anyway).
	wait_cm_listen() {
		wait_for 20 cm_listening "$1" || echo "    note: no listening cm_id of $1 seen in 20 s"
	}
	ns_pair() {
		name=$1 to=$2 scmd=$3 ccmd=$4
		# shellcheck disable=SC2086
		timeout "$to" $IP netns exec $NS2 $scmd >/tmp/srv.out 2>&1 &
		spid=$!
		wait_cm_listen "${scmd%% *}"
		# shellcheck disable=SC2086
		timeout "$to" $IP netns exec $NS1 $ccmd >/tmp/cli.out 2>&1
		crc=$?
		wait "$spid"
		src=$?
		ok=0
		pair_verdict "$scmd" "$ccmd" "$src" "$crc" && ok=1
		if [ "$ok" = 1 ]; then pass "$name"; else
			fail "$name (server $src, client $crc; 124 or 143 = timed out)"
			sed 's/^/    server: /' /tmp/srv.out | tail -n 15
			sed 's/^/    client: /' /tmp/cli.out | tail -n 15
		fi
		[ "$ok" = 1 ]
	}
	t0=$(cut -d' ' -f1 /proc/uptime)
	if ns_pair "rping -V (10 pings of 1 KiB, data verified)" 60 "rping -s -a $A2 -C 10 -S 1024 -V -v" \
		"rping -c -a $A2 -C 10 -S 1024 -V -v"; then
		rp_n=$(grep -c "ping data" /tmp/cli.out)
		t1=$(cut -d' ' -f1 /proc/uptime)
		echo "SUMMARY rping: $rp_n pings verified in $(echo "$t0 $t1" | awk '{ printf "%.1f", $2 - $1 }') s (connect included)"
		[ "$rp_n" -ge 10 ] && pass "rping client printed $rp_n verified pings" || fail "rping client printed $rp_n pings"
	else
		echo "SUMMARY rping: FAILED"
	fi
	# Every byte of every operation between the two sroceds (tests/lib/datacheck), over
	# each device's IPv4 GID.
	if command -v sroce-datacheck >/dev/null; then
		g3="" g4=""
		for g in /sys/class/infiniband/sroce3/ports/1/gids/*; do
			grep -q "0000:0000:0000:0000:0000:ffff:0a02:0001" "$g" && g3=${g##*/} && break
		done
		for g in /sys/class/infiniband/sroce4/ports/1/gids/*; do
			grep -q "0000:0000:0000:0000:0000:ffff:0a02:0002" "$g" && g4=${g##*/} && break
		done
		timeout 180 $IP netns exec $NS2 sroce-datacheck -d sroce4 -g "${g4:-0}" -p 18516 >/tmp/srv.out 2>&1 &
		spid=$!
		wait_for 30 tcp_listening 18516 $NS2 ||
			echo "    note: sroce-datacheck's server does not listen after 30 s"
		timeout 180 $IP netns exec $NS1 sroce-datacheck -d sroce3 -g "${g3:-0}" -p 18516 -n 48 \
			-s 16384 $A2 >/tmp/cli.out 2>&1
		crc=$?
		wait "$spid"
		src=$?
		if [ "$crc" = 0 ] && [ "$src" = 0 ]; then
			pass "sroce-datacheck across the two sroceds (GIDs $g3, $g4)"
		else
			fail "sroce-datacheck across the two sroceds (server $src, client $crc)"
			sed 's/^/    server: /' /tmp/srv.out | tail -n 15
			sed 's/^/    client: /' /tmp/cli.out | tail -n 15
		fi
		echo "SUMMARY sroce-datacheck r1->r2: $(grep -E 'client (OK|FAIL)' /tmp/cli.out | head -n1)"
	fi
	for bw in ib_send_bw ib_write_bw; do
		command -v $bw >/dev/null || continue
		if ns_pair "$bw -R (rdma_cm)" 90 "$bw -R -d sroce4 -s 65536 -n 100 -F" \
			"$bw -R -d sroce3 -s 65536 -n 100 -F $A2"; then
			# #bytes #iterations BW-peak BW-average MsgRate (MB/s, Mpps); ib_send_bw's
			# figure is the receiver's (the sender's may read 0 on a slow VM clock).
			echo "SUMMARY $bw -R: client $(grep -A1 -E '#bytes' /tmp/cli.out | tail -n1 | tr -s ' \t' ' ')," \
				"server $(grep -A1 -E '#bytes' /tmp/srv.out | tail -n1 | tr -s ' \t' ' ')"
		else
			echo "SUMMARY $bw -R: FAILED"
		fi
	done
	if command -v ucmatose >/dev/null; then
		if ns_pair "ucmatose (2 connections, 10 messages each)" 60 "ucmatose -b $A2 -c 2 -C 10" \
			"ucmatose -s $A2 -c 2 -C 10"; then
			echo "SUMMARY ucmatose: $(grep -E 'data transfers complete|completed' /tmp/cli.out | tail -n1)"
		else
			echo "SUMMARY ucmatose: FAILED"
		fi
	fi
	if command -v udaddy >/dev/null; then
		if ns_pair "udaddy (UD through SIDR)" 60 "udaddy -b $A2 -c 2 -C 10" "udaddy -s $A2 -c 2 -C 10"; then
			echo "SUMMARY udaddy: $(grep -E 'data transfers complete|completed' /tmp/cli.out | tail -n1)"
		else
			echo "SUMMARY udaddy: FAILED"
		fi
	fi
	# rsockets over rdma_cm (librdmacm's own benchmarks, docs/clients.md): a short transfer
	# of each, through the preload-free rsocket API.
	for rs in rstream riostream; do
		command -v $rs >/dev/null || continue
		if ns_pair "$rs (rsockets, 64 KiB x 100)" 90 "$rs -b $A2 -S 65536 -C 100" \
			"$rs -s $A2 -S 65536 -C 100"; then
			echo "SUMMARY $rs: $(grep -E '^[0-9]' /tmp/cli.out | tail -n1 | tr -s ' \t' ' ')"
		else
			echo "SUMMARY $rs: FAILED"
		fi
	done
	# qperf (Debian's qperf) with rdma_cm connections (-cm1): RC bandwidth and latency, RDMA
	# READ bandwidth. Not its UD tests: they never use rdma_cm and address the peer by LID
	# without a GRH, which no RoCE device accepts (vm_clients.sh checks the refusal); UD
	# through rdma_cm is udaddy's, above. The server is qperf itself, listening on TCP 19765 for its
	# control connection (no cm_id until a client comes) and serving one test after another
	# until it is killed: each client's exit status and figure decide.
	if command -v qperf >/dev/null; then
		timeout 600 $IP netns exec $NS2 qperf -lp 19765 >/tmp/qsrv.out 2>&1 &
		qpid=$!
		wait_for 20 tcp_listening 19765 $NS2 || echo "    note: qperf's server not listening after 20 s"
		for qt in rc_bw rc_lat rc_rdma_read_bw; do
			if timeout 60 $IP netns exec $NS1 qperf -cm1 -lp 19765 -t 2 -m 4096 $A2 $qt >/tmp/cli.out 2>&1 &&
				grep -qE '(bw|latency) *= *[0-9.]+ ' /tmp/cli.out; then
				pass "qperf -cm1 $qt"
				echo "SUMMARY qperf $qt: $(grep -E '(bw|latency) *=' /tmp/cli.out | tr -s ' ' ' ' | tr '\n' ' ')"
			else
				fail "qperf -cm1 $qt (client exit status or no figure; 124 = timed out)"
				sed 's/^/    client: /' /tmp/cli.out | tail -n 15
				sed 's/^/    server: /' /tmp/qsrv.out | tail -n 15
			fi
		done
		kill "$qpid" 2>/dev/null
		wait "$qpid" 2>/dev/null
	fi
	echo "== sroced killed under a running rping"
	$IP netns exec $NS2 rping -s -a $A2 -C 1000000 -S 1024 -V >/tmp/srv.out 2>&1 &
	S=$!
	wait_cm_listen rping
	$IP netns exec $NS1 rping -c -a $A2 -C 1000000 -S 1024 -V >/tmp/cli.out 2>&1 &
	C=$!
	# The kill comes once the two are connected (a second cm_id of rping that is not
	# listening: the server's accepted one, or the client's), not after a guess.
	wait_for 30 sh -c "rdma resource show cm_id 2>/dev/null | grep 'comm rping' | grep -qv LISTEN" ||
		echo "    note: no connected rping cm_id seen in 30 s"
	sleep 1
	running=0
	kill -0 "$S" 2>/dev/null && kill -0 "$C" 2>/dev/null && running=1
	resets0=$(dmesg | grep -c "sroce3 reset after sroced's death")
	t0=$(cut -d. -f1 /proc/uptime)
	kill -KILL "$SROCED1"
	wait "$SROCED1" 2>/dev/null
	# The client's device lost its daemon: the module wakes its completion channel,
	# dispatches DEVICE_FATAL, the provider flushes the rings (IBA 10.3.1) and rping's CQ
	# thread takes the flushed completions (IBV_WC_WR_FLUSH_ERR, which it skips). rping's
	# main thread waits on a semaphore that only its CM thread posts, for
	# RDMA_CM_EVENT_DISCONNECTED, DEVICE_REMOVAL or an error event, and rdma_cm raises
	# none on a fatal device error. The module then resets the device as an RNIC's
	# driver does after a fatal error (unregister, disassociating programs; register
	# again): rdma_cm's DEVICE_REMOVAL ends rping on its own.
	if wait_for 30 sh -c "! kill -0 $C"; then cli=exited; else
		cli=hung
		for t in /proc/"$C"/task/*; do
			[ -r "$t/wchan" ] && echo "    client thread ${t##*/}: $(cat "$t/wchan")"
		done
		kill -KILL "$C"
	fi
	wait "$C" 2>/dev/null
	cli_s=$(($(cut -d. -f1 /proc/uptime) - t0))
	if wait_for 20 sh -c "[ \$(dmesg | grep -c \"sroce3 reset after sroced's death\") -gt $resets0 ] &&
		test -e /sys/class/infiniband/sroce3/ports/1/state"; then
		pass "sroce3 reset after its sroced's death and registered again"
	else
		fail "sroce3 not reset after its sroced's death"
	fi
	# The server's host is fine but its peer went silent while it waits in a receive:
	# RC has no keepalive (IBA 9.7.7) and the client's DREQ died with its sroced, so it
	# waits, as with a hardware peer that lost power. It must still exit on SIGTERM.
	kill -TERM "$S" 2>/dev/null
	if wait_for 10 sh -c "! kill -0 $S"; then srv=gone; else srv=stuck; kill -KILL "$S"; fi
	wait "$S" 2>/dev/null
	if [ "$running" = 1 ] && [ "$cli" = exited ] && [ "$srv" = gone ]; then
		pass "rping: the client exited on its own ${cli_s} s after its sroced was killed (DEVICE_REMOVAL); the server exited on SIGTERM"
	else
		fail "rping after sroced was killed: running $running, client $cli, server $srv"
		tail -n 5 /tmp/srv.out /tmp/cli.out | sed 's/^/    /'
	fi
	grep -E "error|fail" /tmp/cli.out | head -n 3 | sed 's/^/    client: /'
	# The other host's sroced saw the server's context go and still serves.
	expect "sroced in $NS2 still serves after the peer's death (ibv_devinfo -d sroce4)" \
		sh -c "$IP netns exec $NS2 ibv_devinfo -d sroce4 | grep -q PORT_ACTIVE"
	rdmacm_stop_sroced 2
	expect "rdma link delete sroce3" rdma link delete sroce3
	expect "rdma link delete sroce4" rdma link delete sroce4
	$IP netns del $NS1
	$IP netns del $NS2
	echo "    rdma_cm section: $(($(cut -d. -f1 /proc/uptime) - rc_t0)) s"
}

# rdmacm_start_sroced N: sroced for sroce(N+2) on its veth in namespace rN; sets SROCEDN.
rdmacm_start_sroced() {
	# (wait_for uses $n: these names are its own)
	rs_n=$1 rs_dev=sroce$(($1 + 2)) rs_nd=veth$(($1 + 3))
	$IP netns exec r$rs_n sroced --dev $rs_dev --netdev $rs_nd --kernel --socket /run/sroce/r$rs_n.sock \
		--log-level info >/tmp/sroced.r$rs_n.out 2>&1 &
	eval "SROCED$rs_n=$!"
	if wait_for 30 sh -c "[ \"\$(cat /sys/class/infiniband/$rs_dev/ports/1/state)\" = '4: ACTIVE' ]"; then
		pass "sroced --kernel for $rs_dev in r$rs_n: port ACTIVE"
	else
		fail "sroced --kernel for $rs_dev in r$rs_n did not attach"
		sed 's/^/    sroced: /' /tmp/sroced.r$rs_n.out
	fi
}

rdmacm_stop_sroced() {
	eval "p=\$SROCED$1"
	kill -TERM "$p" 2>/dev/null
	wait "$p"
	grep -E "QP1|GSI| error | critical " /tmp/sroced.r$1.out | tail -n 10 | sed "s/^/    sroced r$1: /"
}

rdmacm_main
