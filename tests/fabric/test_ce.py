#!/usr/bin/python3
"""ECN CE marking by the tc BPF program, checked at the receiver (IP_RECVTOS).

1. 25 % CE on l2>h2 (the last hop), 4000 ECT(0) datagrams: the CE count the
   receiver sees is within the binomial 5-sigma bound, equals the program's
   ce_marked counter, every datagram arrives (the IPv4 checksum fix is right,
   or the receiving stack would drop them), and the rest keep ECT(0).
2. Non-ECT datagrams are never marked; the program counts the picks as not_ect.
3. --drop-not-ect: a non-ECT packet picked for a mark is dropped instead (RED
   behaviour), at the CE probability.
"""

from fabric_test import Fabric, binomial_bounds, check, main

CE, ECT0, NOT_ECT = 3, 2, 0
P = 0.25


def test() -> None:
    with Fabric("ce", hosts=2, spines=2) as f:
        dst = f.addr("h2")
        f.tool("impair", "l2>h2", "--ce", "25")

        # --- 1. ECT(0) traffic gets CE at 25 % ---------------------------
        n = 4000
        c0 = f.direction("l2>h2")["counters"]
        rx = f.probe_recv("h2", "--expect", str(n), "--timeout", "300", "--idle", "2")
        f.probe_send("h1", "--dst", dst, "--sports", "44000:44004", "--count", str(n // 4),
                     "--tos", "0x02")
        got = Fabric.finish(rx)
        c1 = f.direction("l2>h2")["counters"]
        tos = {int(k): v for k, v in got["tos"].items()}
        marked = tos.get(CE, 0)
        lo, hi = binomial_bounds(n, P)
        print(f"ce 25 %: {marked} of {got['received']} arrived CE "
              f"(counter {c1['ce_marked'] - c0['ce_marked']}), 5-sigma bound [{lo:.0f}, {hi:.0f}]")
        check(got["received"] == n, f"received {got['received']} of {n}: marking broke packets")
        check(set(tos) <= {CE, ECT0}, f"unexpected TOS values {tos}")
        check(lo <= marked <= hi, f"{marked} CE of {n}: outside [{lo:.0f}, {hi:.0f}]")
        check(marked == c1["ce_marked"] - c0["ce_marked"],
              f"receiver saw {marked} CE, program marked {c1['ce_marked'] - c0['ce_marked']}")

        # --- 2. non-ECT is never marked ----------------------------------
        n2 = 2000
        rx = f.probe_recv("h2", "--expect", str(n2), "--timeout", "300", "--idle", "2")
        f.probe_send("h1", "--dst", dst, "--sports", "44100:44102", "--count", str(n2 // 2),
                     "--tos", "0")
        got = Fabric.finish(rx)
        c2 = f.direction("l2>h2")["counters"]
        picks = c2["not_ect"] - c1["not_ect"]
        lo, hi = binomial_bounds(n2, P)
        check(got["received"] == n2 and got["tos"] == {str(NOT_ECT): n2},
              f"non-ECT traffic changed: {got}")
        check(lo <= picks <= hi, f"{picks} not_ect picks of {n2}: outside [{lo:.0f}, {hi:.0f}]")

        # --- 3. --drop-not-ect -------------------------------------------
        f.tool("impair", "l2>h2", "--drop-not-ect")
        rx = f.probe_recv("h2", "--expect", str(n2), "--timeout", "300", "--idle", "2")
        f.probe_send("h1", "--dst", dst, "--sports", "44200:44202", "--count", str(n2 // 2),
                     "--tos", "0")
        got = Fabric.finish(rx)
        c3 = f.direction("l2>h2")["counters"]
        dropped = c3["dropped"] - c2["dropped"]
        print(f"drop-not-ect: dropped {dropped} of {n2}, received {got['received']}")
        check(lo <= dropped <= hi, f"dropped {dropped} of {n2}: outside [{lo:.0f}, {hi:.0f}]")
        check(got["received"] == n2 - dropped,
              f"received {got['received']} != {n2} - {dropped}")


if __name__ == "__main__":
    main(test)
