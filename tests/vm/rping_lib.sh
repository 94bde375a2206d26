#!/bin/sh
# The verdict on one rping process (librdmacm/examples/rping.c, rdmacm-utils 44), shared by
# vm_interop.sh (through iop_lib.sh) and vm_rdmacm.sh. Sourced, not run.
#
# rping_ok ROLE RC OUT WANT: true if the rping that exited RC, with its stdout and stderr in
# OUT, did its work. ROLE is client or server; WANT is the number of "ping data" lines the
# client must have printed (-v prints one after each ping, and with -V only after its
# memcmp matched), 0 for a server.
#
# Exit 0 is a success once WANT pings are there. Exit 255 is one too, on one condition,
# because of a teardown race in rping itself: its cm_thread is never stopped. After the
# DISCONNECTED event main goes on to rdma_destroy_id (which returns once cm_thread has
# acked that event) and rdma_destroy_event_channel, and a cm_thread that comes back to
# rdma_get_cm_event after main closed the channel reads a closed descriptor: perror
# "rdma_get_cm_event: Bad file descriptor" and exit(-1). The window opens when the
# disconnect's answer comes late, after main has reached rdma_destroy_id; under qemu TCG,
# with the DREP from our GSI, it once did (CI, vm_interop, client on rxe). So 255 passes
# only if everything else the process wrote is what a clean run writes: the DISCONNECT
# event, a server's end-of-loop line (the DISCONNECTED state is 10), the ping lines, and
# that one perror line.
rping_ok() {
	_role=$1 _rc=$2 _out=$3 _want=$4
	_n=$(grep -c "^ping data: " "$_out")
	[ "$_n" -ge "$_want" ] || return 1
	[ "$_rc" = 0 ] && return 0
	[ "$_rc" = 255 ] || return 1
	grep -qx "rdma_get_cm_event: Bad file descriptor" "$_out" || return 1
	grep -qx "$_role DISCONNECT EVENT\.\.\." "$_out" || return 1
	! grep -v -x -E "($_role DISCONNECT EVENT\.\.\.|wait for RDMA_READ_ADV state 10|rdma_get_cm_event: Bad file descriptor|(server )?ping data: .*)" "$_out" | grep -q .
}

# pair_verdict SERVER_CMD CLIENT_CMD SERVER_RC CLIENT_RC: the verdict of a server/client
# pair whose outputs are in /tmp/srv.out and /tmp/cli.out. An rping pair passes rping_ok on
# both sides (the client with its -C count of pings), with a note when rping's race ended
# either one; any other pair must have exited 0 on both sides.
pair_verdict() {
	case "$1" in
	rping*)
		_pv_n=$(echo "$2" | sed -n 's/.* -C \([0-9]*\).*/\1/p')
		rping_ok server "$3" /tmp/srv.out 0 && rping_ok client "$4" /tmp/cli.out "${_pv_n:-1}" || return 1
		[ "$3$4" = 00 ] ||
			echo "    note: rping's teardown race ended a process with 255 (server $3, client $4) after every ping was verified"
		return 0 ;;
	*) [ "$3" = 0 ] && [ "$4" = 0 ] ;;
	esac
}
