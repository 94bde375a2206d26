"""The delay line: a fixed one-way delay for chosen ingress interfaces of one
namespace, where no qdisc can hold a packet for a time (no netem, no fq for
EDT timestamps, no BPF qdisc on this kernel).

Run inside the namespace (`ip netns exec NS python3 -m sroce_fabric.delayline
--queue IFNAME:QUEUE:SECONDS ...`, started by delay.py). It binds one NFQUEUE
per interface, installs the nf_tables rules that send that interface's
arriving packets to it (nfnl.py), and accepts each packet `delay` after it
was read, oldest first. Only the verdict crosses to user space (metadata copy
mode, GSO batches whole), so the packet itself never leaves the kernel.

Precision: the hold starts when the packet is read here, and the release is
a timer wake-up, each some tens of microseconds late under load; the
throughput ceiling is that of one Python process reading verdict messages
(docs/fabric.md gives the measured figures). Delays are FIFO per interface:
a delay line never reorders what arrives on one interface.
"""

from __future__ import annotations

import argparse
import collections
import ctypes
import os
import select
import signal
import socket
import sys
import time

from . import nfnl

TABLE = "sroce_fabric_delay"


class _Stop(Exception):
    pass


def _on_signal(_signum, _frame):
    # Raise, not set a flag: PEP 475 restarts an interrupted select() after
    # the handler returns, so a flag would only be seen at the next packet.
    raise _Stop()


def _parse_queue(text: str) -> tuple[str, int, float]:
    try:
        ifname, queue, seconds = text.rsplit(":", 2)
        return ifname, int(queue), float(seconds)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--queue {text!r}: expected IFNAME:QUEUE:SECONDS") from None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="sroce-fabric-delayline")
    ap.add_argument("--queue", type=_parse_queue, action="append", required=True)
    ap.add_argument("--maxlen", type=int, default=65536,
                    help="packets held per queue before the kernel drops (a full buffer)")
    args = ap.parse_args(argv)

    # Wake-ups at the requested time, not 50 us later (the default timer slack).
    try:
        ctypes.CDLL(None).prctl(29, 1, 0, 0, 0)  # PR_SET_TIMERSLACK, 1 ns
    except (OSError, AttributeError):
        pass
    # A delay is only as exact as the wake-ups: run ahead of ordinary work
    # (builds on a shared machine). Niceness only, not a real-time class, so
    # a flood of packets cannot starve the machine.
    try:
        os.setpriority(os.PRIO_PROCESS, 0, -20)
    except OSError:
        pass
    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    signal.signal(signal.SIGHUP, _on_signal)

    qsock = nfnl.NfnlSocket(rcvbuf=64 << 20)
    delays: dict[int, float] = {}
    fifos: dict[int, collections.deque] = {}
    rules = []
    for ifname, queue, seconds in args.queue:
        nfnl.queue_bind(qsock, queue, args.maxlen)
        delays[queue] = seconds
        fifos[queue] = collections.deque()
        rules.append((socket.if_nametoindex(ifname), queue))
    # Any socket asking for receive timestamps turns on skb timestamping
    # (net_enable_timestamp), so queued packets carry NFQA_TIMESTAMP.
    stamp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    stamp.setsockopt(socket.SOL_SOCKET, getattr(socket, "SO_TIMESTAMP", 29), 1)
    ctl = nfnl.NfnlSocket()
    nfnl.delete_table(ctl, TABLE)
    nfnl.install_queue_rules(ctl, TABLE, rules)
    print("ready", flush=True)
    try:
        os.close(1)
    except OSError:
        pass

    seq = 1
    held = released = 0
    # How late a timed wake-up is (scheduler latency, idle exit), as a moving
    # average: the next timed wait ends that much early, so that releases are
    # on time on average instead of always late by it.
    late = 0.0
    target = None
    qsock.sock.setblocking(False)
    try:
        while True:
            now = time.monotonic()
            if target is not None:
                late += (now - target - late) / 8
                late = min(max(late, 0.0), 0.001)
                target = None
            msgs = []
            wait = None
            for queue, fifo in fifos.items():
                due_before = now - delays[queue]
                last = None
                while fifo and fifo[0][0] <= due_before:
                    last = fifo.popleft()[1]
                    released += 1
                if last is not None:
                    seq += 1
                    msgs.append(nfnl.verdict_batch(queue, last, seq))
                if fifo:
                    w = fifo[0][0] + delays[queue] - now
                    wait = w if wait is None else min(wait, w)
            if msgs:
                try:
                    qsock.sock.send(b"".join(msgs))
                except OSError as e:
                    print(f"delayline: verdict: {e}", file=sys.stderr)
            timeout = None
            if wait is not None:
                timeout = max(wait - late, 0.0)
                target = now + timeout
            try:
                ready, _, _ = select.select([qsock], [], [], timeout)
            except InterruptedError:
                continue
            if not ready:
                continue
            target = None
            for _ in range(64):
                try:
                    data = qsock.sock.recv(1 << 20)
                except BlockingIOError:
                    break
                except OSError as e:
                    # ENOBUFS: the kernel could not queue some packets to us
                    # and dropped them, as a full switch buffer would.
                    print(f"delayline: recv: {e}", file=sys.stderr)
                    continue
                t = time.monotonic()
                mono_minus_real = t - time.time()
                for queue, pkt_id, arrival in nfnl.parse_packets(data):
                    fifo = fifos.get(queue)
                    if fifo is not None:
                        # Hold from the kernel's arrival time when it has one
                        # (it excludes our own wake-up), never from later than now.
                        t_in = t if arrival is None else min(t, arrival + mono_minus_real)
                        if fifo and t_in < fifo[-1][0]:
                            t_in = fifo[-1][0]  # FIFO: never release before an earlier one
                        fifo.append((t_in, pkt_id))
                        held += 1
    except _Stop:
        pass
    finally:
        # Let what is still held go on rather than be dropped with the queue.
        flush = []
        for queue, fifo in fifos.items():
            if fifo:
                seq += 1
                flush.append(nfnl.verdict_batch(queue, fifo[-1][1], seq))
        try:
            if flush:
                qsock.sock.send(b"".join(flush))
        except OSError:
            pass
        try:
            nfnl.delete_table(ctl, TABLE)
        except OSError:
            pass
        print(f"delayline: exit, held {held} released {released} wake_late_us {late * 1e6:.0f}",
              file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
