#!/usr/bin/python3
"""Loss emulation by the tc BPF program.

1. 10 % loss on every leaf->spine direction of l1: 5000 datagrams spread over
   8 source ports (so over the spines). The drop count is within the binomial
   5-sigma bound around 500, and every datagram that was not dropped arrives:
   received == sent - dropped, exactly.
2. --loss 100 on one spine direction is a blackhole: the ports hashed to that
   spine lose everything, the others lose nothing.
3. --match roce limits the loss to UDP port 4791: other ports are untouched.
"""

from fabric_test import Fabric, binomial_bounds, check, main

N = 5000
P = 0.10


def dropped_on(f: Fabric, names: list[str]) -> int:
    dirs = f.directions()
    return sum(dirs[n]["counters"]["dropped"] for n in names)


def test() -> None:
    with Fabric("loss", hosts=2, spines=4) as f:
        dst = f.addr("h2")
        ups = [f"l1>s{k}" for k in range(1, 5)]

        # --- 1. 10 % on l1 -> every spine ---------------------------------
        f.tool("impair", "l1>s*", "--loss", "10")
        for n in ups:
            check(f.direction(n)["impair"]["loss"] == 10.0, f"{n}: impairment not recorded")
        rx = f.probe_recv("h2", "--expect", str(N), "--timeout", "300", "--idle", "2")
        sent = f.probe_send("h1", "--dst", dst, "--sports", "41000:41008",
                            "--count", str(N // 8))["sent"]
        got = Fabric.finish(rx)
        dropped = dropped_on(f, ups)
        lo, hi = binomial_bounds(sent, P)
        print(f"loss 10 %: sent {sent}, dropped {dropped} ({dropped / sent:.2%}), "
              f"received {got['received']}, 5-sigma bound [{lo:.0f}, {hi:.0f}]")
        check(sent == N, f"sent {sent} of {N}")
        check(lo <= dropped <= hi, f"dropped {dropped} of {sent}: outside [{lo:.0f}, {hi:.0f}]")
        check(got["received"] == sent - dropped,
              f"received {got['received']} != sent {sent} - dropped {dropped}: the fabric "
              "lost or invented packets besides the emulated loss")
        check(got["dups"] == 0 and got["bad"] == 0, f"receiver: {got}")
        dirs = f.directions()
        spine_dropped = [dirs[n]["counters"]["dropped"] for n in ups]
        check(sum(1 for d in spine_dropped if d) >= 2,
              f"loss should hit every spine carrying traffic: {spine_dropped}")

        # --- 2. blackhole one spine -----------------------------------------
        f.tool("impair", "l1>s*", "clear")
        f.tool("impair", "l1>s2", "--loss", "100")
        black0 = f.direction("l1>s2")["counters"]["dropped"]
        rx = f.probe_recv("h2", "--expect", str(16 * 20), "--timeout", "300", "--idle", "2")
        f.probe_send("h1", "--dst", dst, "--sports", "42000:42016", "--count", "20")
        got = Fabric.finish(rx)
        black = f.direction("l1>s2")["counters"]["dropped"] - black0
        lost_ports = [p for p in range(42000, 42016) if str(p) not in got["by_sport"]]
        print(f"blackhole l1>s2: {len(lost_ports)} of 16 ports lost everything")
        check(all(c == 20 for c in got["by_sport"].values()),
              f"ports not on s2 must lose nothing: {got['by_sport']}")
        check(lost_ports, "no port hashed to s2: the blackhole was not exercised")
        check(black == 20 * len(lost_ports),
              f"s2 dropped {black}, expected {20 * len(lost_ports)}")

        # --- 3. --match roce ----------------------------------------------
        f.tool("impair", "l1>s*", "clear")
        f.tool("impair", "l1>s*", "--loss", "100", "--match", "roce")
        rx = f.probe_recv("h2", "--port", "5000", "--expect", "160", "--timeout", "300",
                          "--idle", "2")
        f.probe_send("h1", "--dst", dst, "--port", "5000", "--sports", "43000:43008",
                     "--count", "20")
        got = Fabric.finish(rx)
        check(got["received"] == 160, f"--match roce dropped non-RoCE traffic: {got['received']}")
        rx = f.probe_recv("h2", "--expect", "1", "--timeout", "300")
        d0 = sum(f.directions()[n]["counters"]["dropped"] for n in ups)
        f.probe_send("h1", "--dst", dst, "--sports", "43000:43008", "--count", "5")
        d1 = sum(f.directions()[n]["counters"]["dropped"] for n in ups)
        check(d1 - d0 == 40, f"--loss 100 --match roce dropped {d1 - d0} of 40 RoCE datagrams")
        # Then one datagram with the loss cleared ends the receiver: it must
        # be the only one it got.
        f.tool("impair", "l1>s*", "clear")
        f.probe_send("h1", "--dst", dst, "--sports", "43100:43101", "--count", "1")
        got = Fabric.finish(rx)
        check(got["by_sport"] == {"43100": 1},
              f"--loss 100 --match roce let RoCE datagrams through: {got['by_sport']}")

if __name__ == "__main__":
    main(test)
