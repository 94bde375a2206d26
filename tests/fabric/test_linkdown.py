#!/usr/bin/python3
"""`impair LINK down` / `up`: a leaf-spine link taken down leaves the leaf's
multipath route at once; the source ports that used it move to the other
spines and lose nothing; brought back up, the route has all its nexthops
again and every port returns to its original spine."""

import json
import subprocess

from fabric_test import Fabric, check, main

PORTS = range(47000, 47008)
COUNT = 10


def spines_of(f: Fabric, dst: str) -> dict[int, str]:
    """Per port, the spine its h1 -> h2 datagrams take (from the l1>sK counters)."""
    ups = [f"l1>s{k}" for k in range(1, 5)]
    rx = f.probe_recv("h2", "--expect", str(len(PORTS) * COUNT), "--timeout", "300")
    out = {}
    for p in PORTS:
        before = f.udp_on(ups)
        f.probe_send("h1", "--dst", dst, "--sports", f"{p}:{p + 1}", "--count", str(COUNT))
        after = f.udp_on(ups)
        moved = [d for d in ups if after[d] != before[d]]
        check(len(moved) == 1 and after[moved[0]] - before[moved[0]] == COUNT,
              f"port {p}: {before} -> {after}")
        out[p] = moved[0].split(">")[1]
    got = Fabric.finish(rx)
    check(got["received"] == len(PORTS) * COUNT,
          f"received {got['received']} of {len(PORTS) * COUNT}: {got['by_sport']} {out}\n"
          + f.tool("status").stdout)
    return out


def nexthops(f: Fabric) -> list[str]:
    routes = json.loads(subprocess.run(["ip", "-n", f"{f.name}-l1", "-j", "route", "show",
                                        "default"], capture_output=True, text=True).stdout)
    return sorted(n["dev"] for n in routes[0].get("nexthops", [])
                  if "dead" not in n.get("flags", []))


def test() -> None:
    with Fabric("ldown", hosts=2, spines=4) as f:
        dst = f.addr("h2")
        before = spines_of(f, dst)
        victim = max(set(before.values()), key=lambda s: list(before.values()).count(s))
        f.tool("impair", f"l1-{victim}", "down")
        st = f.status()
        check([lk["state"] for lk in st["links"] if lk["name"] == f"l1-{victim}"] == ["down"],
              "status does not show the link down")
        check(victim not in nexthops(f), f"{victim} still a live nexthop: {nexthops(f)}")
        during = spines_of(f, dst)
        check(victim not in during.values(), f"traffic still on {victim}: {during}")
        unaffected = {p: s for p, s in before.items() if s != victim}
        moved = [p for p in before if before[p] == victim]
        print(f"{victim} down: {len(moved)} ports moved to "
              f"{sorted(set(during[p] for p in moved))}")
        f.tool("impair", f"l1-{victim}", "up")
        check(nexthops(f) == ["s1", "s2", "s3", "s4"], f"nexthops after up: {nexthops(f)}")
        after = spines_of(f, dst)
        check(after == before, f"ports did not return to their spines: {before} vs {after}")
        check(unaffected, "every port was on the downed spine")


if __name__ == "__main__":
    main(test)
