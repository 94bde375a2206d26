#!/bin/bash
# mpi.sh STATE_DIR PROGRAM TLS [ARGS...]
# Open MPI (pml ucx) runs PROGRAM as two ranks, one on each host of hosts.sh, over sroce0
# with UCX transports TLS (e.g. rc_verbs or ud_verbs): mpirun and rank 0 on h1 under
# sroce-run, rank 1 on h2 through rsh.sh. Each host gets its own hostname (a UTS namespace)
# and an /etc/hosts naming both (ip netns exec binds /etc/netns/NS/hosts). Passes only if
# mpirun exits 0, PROGRAM printed "mpi_check: ok", each rank ran on its own host, and UCX
# reported the first transport of TLS on sroce0:1 as the tag lane of the ranks' endpoint.
# SROCE_HOSTS=dpdk: STATE_DIR holds the hosts of tests/dpdk/hosts.sh (the DPDK datapath,
# 10.78.0.0/24) instead of tests/e2e/hosts.sh's (rsh.sh reads it too).
set -u
here=$(dirname "$(readlink -f "$0")")
state=$1
prog=$2
tls=$3
shift 3
tag=$(echo -n "$state" | md5sum | cut -c1-6)
case ${SROCE_HOSTS:-e2e} in
  e2e) hosts_sh=$here/../hosts.sh net=10.77.0 nsp=sre2e ;;
  dpdk) hosts_sh=$here/../../dpdk/hosts.sh net=10.78.0 nsp=srdp ;;
  *) echo "mpi.sh: SROCE_HOSTS is e2e or dpdk, not $SROCE_HOSTS" >&2; exit 2 ;;
esac
export SROCE_HOSTS=${SROCE_HOSTS:-e2e}
ns() { echo "$nsp-$tag-$1"; }
for h in h1 h2; do
  mkdir -p "/etc/netns/$(ns $h)"
  printf '127.0.0.1 localhost\n%s.1 sroce-h1\n%s.2 sroce-h2\n' $net $net >"/etc/netns/$(ns $h)/hosts"
done
sroce_cli=$(cat "$state/bindir")/sroce
# A run that has not ended after 270 s (mpirun's bound is 300): every QP of both hosts, with
# its PSNs, outstanding work and counters, printed while the ranks still hold them.
watchdog() {
  sleep 270 </dev/null >/dev/null 2>&1 || return  # not holding ctest's pipe once killed
  for h in h1 h2; do
    echo "mpi.sh: $h QPs after 270 s:"
    "$sroce_cli" qps --json --socket "$state/$h.sock" 2>&1
  done
  # Where each rank is: all its threads' stacks (the UCX progress and wireup frames).
  command -v gdb >/dev/null || { echo "mpi.sh: no gdb, no rank backtraces"; return; }
  for pid in $(pgrep -x "$(basename "$prog" | cut -c1-15)"); do
    echo "mpi.sh: rank process $pid ($(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null)) after 270 s:"
    timeout 60 gdb -p "$pid" -batch -nx -iex "set debuginfod enabled off" -ex "thread apply all bt 25" </dev/null 2>&1 |
      grep -E '^(#|Thread )' | head -n 120
  done
}
watchdog &
wd=$!
cleanup() {
  pkill -P "$wd" sleep 2>/dev/null
  kill "$wd" 2>/dev/null
  for h in h1 h2; do rm -rf "/etc/netns/$(ns $h)"; done
}
trap cleanup EXIT
out=$(mktemp /tmp/sroce-mpi.XXXXXX)
export SROCE_E2E_STATE=$state
# The UCX transports: TLS only (and "self" for a rank's messages to itself), on sroce0 only;
# Open MPI's own TCP paths (oob) stay on the hosts' addresses.
timeout -k 10 300 unshare --uts /bin/sh -c 'hostname sroce-h1; exec "$@"' sh \
  "$hosts_sh" run "$state" h1 -- \
  mpirun --allow-run-as-root -np 2 --host sroce-h1:1,sroce-h2:1 \
    --mca plm_rsh_agent "$here/rsh.sh" --mca plm_rsh_no_tree_spawn 1 \
    --mca oob_tcp_if_include $net.0/24 \
    --mca pml ucx --mca btl ^vader,tcp,openib,uct,smcuda --mca osc ucx \
    --mca pml_ucx_verbose 0 \
    -x UCX_TLS="$tls,self" -x UCX_NET_DEVICES=sroce0:1 -x UCX_LOG_LEVEL="${SROCE_MPI_UCX_LOG:-info}" \
    -x UCX_WARN_UNUSED_ENV_VARS=n \
    "$prog" "$@" >"$out" 2>&1
rc=$?
cat "$out"
# Each host's engine counters for the log: the retries, duplicates and the READ replays its
# responder dropped after a DEREG_MR (engine.replays_dropped: the allreduce case of
# docs/security.md "Memory") or stale NAKs its requester ignored.
for h in h1 h2; do
  "$sroce_cli" status --json --socket "$state/$h.sock" 2>/dev/null |
    python3 -c "import json, sys; e = json.load(sys.stdin)['engine']; print('mpi.sh: $h ' + ' '.join(
      f'{k} {e[k]}' for k in ('retransmits', 'timeouts', 'duplicates', 'replays_dropped', 'stale_naks'))
      + f\" access_faults {e['access_faults']['sent']}/{e['access_faults']['received']}\"
      + ' rx_drop_reason ' + json.dumps(e.get('rx_drop_reason', {}), sort_keys=True)
      + ' nonzero ' + json.dumps({k: v for k, v in sorted(e.items()) if isinstance(v, int) and v}))" ||
    echo "mpi.sh: $h: no engine counters"
done
ok=0
grep -q '^mpi_check: ok$' "$out" || { echo "mpi.sh: no 'mpi_check: ok' line"; ok=1; }
grep -q 'rank 0 of 2 on sroce-h1' "$out" || { echo "mpi.sh: rank 0 did not run on sroce-h1"; ok=1; }
grep -q 'rank 1 of 2 on sroce-h2' "$out" || { echo "mpi.sh: rank 1 did not run on sroce-h2"; ok=1; }
# UCX's own account of the endpoint between the ranks (UCX_LOG_LEVEL=info): its tag lane must
# be the first transport of TLS, on sroce0.
want="tag(${tls%%,*}/sroce0:1)"
grep -qF "$want" "$out" || { echo "mpi.sh: UCX did not report $want for the ranks' endpoint"; ok=1; }
rm -f "$out"
[ "$rc" -eq 0 ] || echo "mpi.sh: mpirun exited $rc"
[ "$rc" -eq 0 ] && [ "$ok" -eq 0 ]
