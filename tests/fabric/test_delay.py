#!/usr/bin/python3
"""Fixed one-way delay by the delay line (NFQUEUE + a user-space FIFO).

Round trips from 8 source ports, before and after a delay on the leaf->spine
directions of h1's leaf: 1 ms towards s1, 3 ms towards s2. Each port's
round trip grows by the delay of the spine its requests take (found from the
per-direction counters): no round trip is shorter than the delay, and how much
longer the fastest is (the delay line's overhead) is printed, not asserted;
paths with different delays are what the reordering experiments need."""

import statistics

from fabric_test import Fabric, PROBE, PY, check, main

PORTS = range(45000, 45008)
COUNT = 20
DELAY_MS = {"s1": 1.0, "s2": 3.0}
SLACK_MS = 0.5  # measured overhead of the delay line: +0.02..0.1 ms


def rtts(f: Fabric, dst: str) -> tuple[dict[int, list[float]], dict[int, str]]:
    """Per port: round trips in ms, and the spine its requests took."""
    out, spine = {}, {}
    for p in PORTS:
        names = [f"l1>{s}" for s in DELAY_MS]
        before = f.udp_on(names)
        r = f.probe_ping("h1", "--dst", dst, "--sports", f"{p}:{p + 1}", "--count", str(COUNT))
        check(r["lost"] == 0, f"port {p}: {r['lost']} round trips lost")
        after = f.udp_on(names)
        used = [n.split(">")[1] for n in names if after[n] - before[n] == COUNT]
        check(len(used) == 1, f"port {p}: requests not on one spine: {before} -> {after}")
        out[p] = [x / 1000 for x in r["rtt_us"][str(p)]]
        spine[p] = used[0]
    return out, spine


def test() -> None:
    with Fabric("delay", hosts=2, spines=2) as f:
        dst = f.addr("h2")
        f.spawn("h2", PY, PROBE, "echo", "--timeout", "300")
        base, spine0 = rtts(f, dst)
        for s, d in DELAY_MS.items():
            f.tool("impair", f"l1>{s}", "--delay", f"{d}ms")
        check(f.direction("l1>s2")["impair"]["delay"] == "3.0ms", "delay not recorded")
        slow, spine1 = rtts(f, dst)
        check(spine0 == spine1, f"delay changed the paths: {spine0} vs {spine1}")
        check(len(set(spine1.values())) == 2, f"all ports on one spine: {spine1}")
        for p in PORTS:
            want = DELAY_MS[spine1[p]]
            b, m = statistics.median(base[p]), statistics.median(slow[p])
            added = m - b
            print(f"port {p} via {spine1[p]}: rtt {b:.3f} -> {m:.3f} ms "
                  f"(+{added:.3f}, min {min(slow[p]):.3f}), delay {want} ms")
            # No round trip through the delay line is faster than its delay: an
            # absolute bound that load cannot break (load only adds time). The
            # difference of the two minima is not one: a loaded machine can hold
            # back every one of the 20 baseline round trips (a baseline minimum of
            # 0.2 ms once made a 1.115 ms round trip look 0.1 ms short).
            fastest = min(slow[p]) - min(base[p])
            check(min(slow[p]) >= want - 0.02,
                  f"port {p}: a round trip of {min(slow[p]):.3f} ms beat the {want} ms delay")
            # How close to the delay it comes is a figure, not an assertion:
            # on a loaded machine any round trip can be held back (docs/fabric.md).
            if fastest > want + SLACK_MS:
                print(f"note: port {p}: fastest round trip +{fastest:.3f} ms, delay {want} ms")

        f.tool("impair", "l1>s*", "--delay", "0")
        again, _ = rtts(f, dst)
        for p in PORTS:
            print(f"port {p}: fastest round trip after removal {min(again[p]):.3f} ms")
        check(not [k for k in f.status()["pids"] if k.startswith("delay/")],
              "delay lines still running after the delays were removed")


if __name__ == "__main__":
    main(test)
