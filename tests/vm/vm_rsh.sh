#!/bin/sh
# vm_rsh.sh HOST COMMAND...: Open MPI's launch agent (plm_rsh_agent) in the VM for the two
# namespace hosts of vm_clients.sh, in place of ssh: sroce-h1 is namespace r1 (device
# sroce1), sroce-h2 is r2 (sroce2). COMMAND (Open MPI's orted line, words a shell joins, as
# ssh would) runs there in a UTS namespace whose hostname is HOST, with UCX_NET_DEVICES
# naming that host's device, which the ranks orted starts inherit.
host=$1
shift
case $host in
sroce-h1) ns=r1 dev=sroce1 ;;
sroce-h2) ns=r2 dev=sroce2 ;;
*)
	echo "vm_rsh.sh: unknown host $host" >&2
	exit 255
	;;
esac
export UCX_NET_DEVICES=$dev:1
exec /usr/sbin/ip netns exec "$ns" unshare -u /bin/sh -c 'hostname "$0"; exec /bin/sh -c "$*"' "$host" "$@"
