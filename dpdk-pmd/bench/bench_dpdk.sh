#!/bin/bash
# make bench-dpdk: ib_write_bw over sroced's DPDK datapath beside dpdk-testpmd txonly -> rxonly
# on the same path, in one run (root, about a minute). Prints one JSON line.
#
#   bench_dpdk.sh BIN_DIR [SECONDS] [SIZE]
#
# The path: two namespaces joined by a veth pair (one queue, MTU 3000), an af_xdp vdev on each
# end with sroce's XDP program (UDP 4791 steered to the AF_XDP socket). First sroced on both
# ends (busy polling, dpdk.sleep_poll_us = 0; the writer's loop pinned to CPU 1, the
# receiver's to CPU 0) and unchanged ib_write_bw between them (RoCE MTU 2048, 64 KiB
# messages); then, with the daemons stopped, testpmd txonly on h2 (forwarding lcore on CPU 1)
# sending UDP 4791 frames of the size of ib_write_bw's data packets to testpmd rxonly on h1
# (CPU 0), through the same vdevs and the same XDP program. Data flows h2 -> h1 in both runs
# (the ib_write_bw client writes). BENCH_APP_PREFIX="taskset -c 0" pins the application too.
#
# Keys: dpdk_write_bw_gbps (ib_write_bw's payload rate), dpdk_pps (its data packets/s, from
# its message rate), testpmd_pps / testpmd_gbps (frames/s received by rxonly, their L2 bits/s),
# dpdk_ratio = dpdk_pps / testpmd_pps: the same frames over the same path, so the ratio of
# packet rates says how much of the path sroced gets; dpdk_ratio_gbps compares the bit rates
# (payload against whole frames). frame_bytes is the L2 size used for both.
set -u
here=$(dirname "$(readlink -f "$0")")
hosts=$here/../../tests/dpdk/hosts.sh
bin=$(readlink -f "$1")
secs=${2:-8}
size=${3:-65536}
state=/tmp/sroce-bench-dpdk-$$
xdp=$bin/../lib/sroce/sroce_xdp.bpf.o
py=/usr/bin/python3

cleanup() {
  "$hosts" down "$state" >/dev/null 2>&1
  rm -rf "$state"
  # testpmd (--no-shconf) still leaves EAL's empty runtime directory.
  rmdir /var/run/dpdk/sroce-tp-rx-$$ /var/run/dpdk/sroce-tp-tx-$$ 2>/dev/null
}
die() {
  echo "bench-dpdk: $*" >&2
  cleanup
  exit 1
}
[ "$(id -u)" -eq 0 ] || die "needs root (namespaces, AF_XDP)"
command -v dpdk-testpmd >/dev/null || die "dpdk-testpmd not found (Debian package dpdk-dev)"
[ -x "$bin/sroced" ] && [ -x "$bin/sroce-run" ] || die "build sroced and sroce-run first"
[ -r "$xdp" ] || die "no $xdp (build the sroce_xdp target)"
command -v ib_write_bw >/dev/null || die "ib_write_bw not found (perftest)"

# ---- sroced on both ends, busy polling (the DPDK way).
# Pinned as testpmd's forwarding lcores are below: the writer's loop (h2) on CPU 1, the
# receiver's (h1) on CPU 0; the application is left to the scheduler.
SROCE_DPDK_SLEEP_US=0 "$hosts" up "$state" "$bin" af_xdp af_xdp >/dev/null || die "hosts did not come up"
for h in h1 h2; do "$hosts" daemon "$state" $h stop; done
SROCED_EXTRA="${SROCED_EXTRA:-} --set dpdk.lcores=\"0\"" SROCE_DPDK_SLEEP_US=0 "$hosts" daemon "$state" h1 start ||
  die "sroced on h1 did not start"
SROCED_EXTRA="${SROCED_EXTRA:-} --set dpdk.lcores=\"1\"" SROCE_DPDK_SLEEP_US=0 "$hosts" daemon "$state" h2 start ||
  die "sroced on h2 did not start"
dev1=$("$hosts" dev "$state" h1)
dev2=$("$hosts" dev "$state" h2)
mac1=$("$hosts" exec "$state" h1 -- cat "/sys/class/net/$dev1/address")
port=18790
out=$state/write_bw
"$hosts" run "$state" h1 -- timeout $((secs + 40)) ib_write_bw -x 0 -F -p $port -D "$secs" -s "$size" \
  --report_gbits >"$out.server" 2>&1 &
spid=$!
for _ in $(seq 200); do
  "$hosts" exec "$state" h1 -- ss -Hltn "sport = :$port" | grep -q . && break
  sleep 0.05
done
"$hosts" run "$state" h2 -- timeout $((secs + 40)) ${BENCH_APP_PREFIX:-} ib_write_bw -x 0 -F -p $port -D "$secs" -s "$size" \
  --report_gbits 10.78.0.1 >"$out.client" 2>&1
crc=$?
wait $spid
[ $crc -eq 0 ] || { cat "$out.client"; die "ib_write_bw failed"; }
# perftest's result line: size, iterations, BW peak, BW average [Gb/sec], MsgRate [Mpps].
read -r bw msg_mpps < <(awk -v s="$size" '$1 == s && NF >= 5 {print $4, $5}' "$out.client" | tail -1)
[ -n "${bw:-}" ] || { cat "$out.client"; die "no result line from ib_write_bw"; }
"$hosts" daemon "$state" h1 stop
"$hosts" daemon "$state" h2 stop

# ---- testpmd on the same vdevs, the same XDP program, frames of the same size.
mtu=2048
frame=$((14 + 20 + 8 + 12 + mtu + 4))  # Ethernet, IPv4, UDP, BTH, payload, ICRC: a WRITE MIDDLE
# Main lcore unpinned (it only waits for the end), the forwarding lcore pinned: rx on CPU 0
# (h1), tx on CPU 1 (h2), as the daemons were.
eal_rx=(--lcores '0@(0,1),1@0' --no-huge -m 256 --no-pci --no-shconf --no-telemetry)
eal_tx=(--lcores '0@(0,1),1@1' --no-huge -m 256 --no-pci --no-shconf --no-telemetry)
tp=(--nb-cores=1 --mbuf-size=3840 --total-num-mbufs=8192)
(sleep $((secs + 6)) | "$hosts" exec "$state" h1 -- timeout $((secs + 30)) dpdk-testpmd "${eal_rx[@]}" \
  --file-prefix "sroce-tp-rx-$$" --vdev "net_af_xdp0,iface=$dev1,busy_budget=0,xdp_prog=$xdp" -- \
  --forward-mode=rxonly "${tp[@]}" --stats-period 1 >"$state/rx.log" 2>&1) &
rxp=$!
for _ in $(seq 100); do grep -q "Rx-pps" "$state/rx.log" 2>/dev/null && break; sleep 0.1; done
sleep $((secs + 2)) | "$hosts" exec "$state" h2 -- timeout $((secs + 30)) dpdk-testpmd "${eal_tx[@]}" \
  --file-prefix "sroce-tp-tx-$$" --vdev "net_af_xdp0,iface=$dev2,busy_budget=0,xdp_prog=$xdp" -- \
  --forward-mode=txonly "${tp[@]}" --txpkts=$frame --tx-udp=4791,4791 --tx-ip=10.78.0.2,10.78.0.1 \
  --eth-peer=0,"$mac1" >"$state/tx.log" 2>&1 || die "testpmd txonly failed: $(tail -5 "$state/tx.log")"
wait $rxp
# The rxonly side's per-second Rx-pps while txonly ran: the median of the busy seconds.
tp_pps=$(awk '/Rx-pps:/ {print $2}' "$state/rx.log" | $py -c '
import sys
v = sorted(int(x) for x in sys.stdin.read().split() if int(x) > 0)
print(v[len(v) // 2] if v else 0)')
$py - "$bw" "$msg_mpps" "$tp_pps" "$frame" "$secs" "$size" <<'EOF'
import json, sys
bw, mpps, tp_pps, frame, secs, size = sys.argv[1:]
bw = float(bw); tp_pps = int(tp_pps); frame = int(frame)
# Data packets per second from perftest's own message rate (its -D window,
# without set-up): a message of `size` bytes is ceil(size / 2048) packets.
per_msg = -(-int(size) // 2048)
dpdk_pps = float(mpps) * 1e6 * per_msg
tp_gbps = tp_pps * frame * 8 / 1e9
print(json.dumps({
    "bench": "dpdk",
    "path": "veth, af_xdp vdev + sroce XDP program, RoCE MTU 2048",
    "message_bytes": int(size),
    "frame_bytes": frame,
    "seconds": int(secs),
    "dpdk_write_bw_gbps": round(bw, 3),
    "dpdk_msg_rate_mpps": float(mpps),
    "dpdk_pps": round(dpdk_pps),
    "testpmd_pps": tp_pps,
    "testpmd_gbps": round(tp_gbps, 3),
    "dpdk_ratio": round(dpdk_pps / tp_pps, 3) if tp_pps else None,
    "dpdk_ratio_gbps": round(bw / tp_gbps, 3) if tp_gbps else None,
}))
EOF
cleanup
