#!/usr/bin/python3
"""Rate limiting by tbf on the sending interface: with one spine, h1 offers
many times the shaped rate for 2 s; the receiver's arrival rate in wire bytes
(datagram plus UDP, IPv4 and Ethernet headers, which is what tbf counts), from
the first to the last datagram, is the shaped rate within 15 %, and the excess
is dropped by the queue, not delivered late."""

import json
import subprocess

from fabric_test import Fabric, check, main

RATE_MBIT = 20
SIZE = 1400
WIRE = SIZE + 8 + 20 + 14  # UDP, IPv4, Ethernet headers: what tbf counts


def test() -> None:
    with Fabric("rate", hosts=2, spines=1) as f:
        dst = f.addr("h2")
        f.tool("impair", "l1>s1", "--rate", f"{RATE_MBIT}mbit", "--queue", "20ms")
        qd = json.loads(subprocess.run(["tc", "-n", f"{f.name}-l1", "-j", "qdisc", "show", "dev",
                                        "s1", "root"], capture_output=True, text=True).stdout)
        check(qd and qd[0]["kind"] == "tbf", f"no tbf on l1's s1 egress: {qd}")
        # For 2 s, 50 datagrams per ms at most (577 Mbit/s): whatever a loaded
        # machine makes of that, it is many times the shaped rate.
        rx = f.probe_recv("h2", "--expect", "1000000", "--timeout", "300", "--idle", "1")
        sent = f.probe_send("h1", "--dst", dst, "--sports", "46000:46001", "--duration", "2",
                            "--size", str(SIZE), "--pace", "50")["sent"]
        got = Fabric.finish(rx)
        check(got["received"] > 100 and got["span_s"] > 0.5, f"too little arrived: {got}")
        goodput = got["received"] * WIRE * 8 / got["span_s"] / 1e6
        print(f"rate {RATE_MBIT} Mbit/s: {got['received']} of {sent} arrived over "
              f"{got['span_s']:.2f} s = {goodput:.1f} Mbit/s on the wire")
        offered = sent * WIRE * 8 / 2 / 1e6
        check(offered > 2 * RATE_MBIT, f"offered only {offered:.0f} Mbit/s")
        check(got["received"] < sent, "nothing was dropped: the offered load did not exceed the rate")
        check(abs(goodput - RATE_MBIT) <= 0.15 * RATE_MBIT,
              f"goodput {goodput:.1f} Mbit/s, shaped to {RATE_MBIT}")
        # A 20 ms queue: nothing arrives long after the sender stopped.
        check(got["span_s"] < 2.5, f"arrivals spread over {got['span_s']:.2f} s for a 2 s send")

        f.tool("impair", "l1>s1", "--rate", "none")
        qd = json.loads(subprocess.run(["tc", "-n", f"{f.name}-l1", "-j", "qdisc", "show", "dev",
                                        "s1", "root"], capture_output=True, text=True).stdout)
        check(not qd or qd[0]["kind"] != "tbf", f"tbf still there after --rate none: {qd}")


if __name__ == "__main__":
    main(test)
