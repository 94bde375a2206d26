#!/bin/bash
# rsh.sh HOST COMMAND...: Open MPI's launch agent (plm_rsh_agent) for the namespace hosts of
# hosts.sh. HOST is sroce-h1 or sroce-h2; COMMAND (Open MPI's orted line) runs there under
# sroce-run, in a UTS namespace of its own whose hostname is HOST, as on a real second host.
# Needs $SROCE_E2E_STATE (the hosts' state directory); SROCE_HOSTS=dpdk: tests/dpdk's hosts.
set -u
state=${SROCE_E2E_STATE:?}
host=$1
shift
case $host in
  sroce-h1) h=h1 ;;
  sroce-h2) h=h2 ;;
  *) echo "rsh.sh: unknown host $host" >&2; exit 255 ;;
esac
here=$(dirname "$(readlink -f "$0")")
hosts_sh=$here/../hosts.sh
[ "${SROCE_HOSTS:-e2e}" = dpdk ] && hosts_sh=$here/../../dpdk/hosts.sh
# Open MPI hands the remote command as words to be joined by a shell, as ssh would. The
# agent runs under h1's sroce-run (mpirun's): what it set for h1 must not reach h2's
# sroce-run (a preloaded shim ahead of an ASan build's runtime aborts it), which sets its own.
unset LD_PRELOAD SYSFS_PATH RDMAV_DRIVERS SROCE_SOCKET
exec unshare --uts /bin/sh -c 'hostname "$0"; exec "$@"' "$host" \
  "$hosts_sh" run "$state" "$h" -- /bin/sh -c "$*"
