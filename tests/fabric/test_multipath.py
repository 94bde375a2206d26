#!/usr/bin/python3
"""Multipath: 2 hosts over 4 spines; 16 UDP source ports (lanes) to port 4791
of the other host. Every datagram arrives, at least 3 of the 4 spines carry
traffic, and each source port always takes the same spine (sent twice,
compared), read from the per-spine counters of `sroce-fabric status`."""

import subprocess

from fabric_test import Fabric, check, main

PORTS = range(40000, 40016)
PER_PORT = 25


def spine_of_port(f: Fabric, dst: str, sport: int, seq_base: int) -> str:
    """Sends PER_PORT datagrams from one source port; the spine whose UDP
    counter grew by exactly that many is the port's path. Nothing else sends
    UDP in the fabric, so every other spine must not move at all."""
    before = f.spine_udp()
    sent = f.probe_send("h1", "--dst", dst, "--sports", f"{sport}:{sport + 1}",
                        "--count", str(PER_PORT), "--seq-base", str(seq_base))
    check(sent["sent"] == PER_PORT, f"sender sent {sent}")
    after = f.spine_udp()
    delta = {s: after[s] - before[s] for s in after}
    carriers = [s for s, d in delta.items() if d]
    check(len(carriers) == 1 and delta[carriers[0]] == PER_PORT,
          f"port {sport}: expected all {PER_PORT} datagrams on one spine, got {delta}")
    return carriers[0]


ROUTER_SYSCTLS = {
    "net/ipv4/ip_forward": "1",
    "net/ipv4/fib_multipath_hash_policy": "3",
    "net/ipv4/fib_multipath_hash_fields": str(0x37),
    "net/ipv4/conf/all/rp_filter": "0",
}


def sysctls(netns: str) -> dict[str, str]:
    out = subprocess.run(["ip", "netns", "exec", netns, "sh", "-c",
                          "for k in " + " ".join(ROUTER_SYSCTLS) + "; do cat /proc/sys/$k; done"],
                         capture_output=True, text=True).stdout.split()
    return dict(zip(ROUTER_SYSCTLS, out))


def test() -> None:
    with Fabric("mp", hosts=2, spines=4) as f:
        st = f.status()
        check(st["topology"]["leaves"] == 2, "2 hosts must sit on 2 leaves (traffic crosses spines)")
        for node in ("l1", "l2", "s1", "s4"):
            got = sysctls(f"{f.name}-{node}")
            check(got == ROUTER_SYSCTLS, f"{node}: sysctls {got}, expected {ROUTER_SYSCTLS}")
        dst = f.addr("h2")
        check(dst == st["hosts"]["h2"]["addr"], "addr and status disagree")
        total = 2 * len(PORTS) * PER_PORT
        rx = f.probe_recv("h2", "--expect", str(total), "--timeout", "300")

        first = {p: spine_of_port(f, dst, p, 0) for p in PORTS}
        second = {p: spine_of_port(f, dst, p, PER_PORT) for p in PORTS}

        got = Fabric.finish(rx)
        check(got["received"] == total and got["dups"] == 0 and got["bad"] == 0,
              f"receiver: expected {total} distinct datagrams, got {got}")
        for p in PORTS:
            check(got["by_sport"].get(str(p)) == 2 * PER_PORT,
                  f"port {p}: {got['by_sport'].get(str(p))} of {2 * PER_PORT} arrived")
        moved = {p: (first[p], second[p]) for p in PORTS if first[p] != second[p]}
        check(not moved, f"source ports changed spine between rounds: {moved}")
        used = sorted(set(first.values()))
        check(len(used) >= 3, f"16 ports used only spines {used}: {first}")

        # Counters agree with the kernel's view: every UDP packet the impair
        # programs counted entering the spines is one the interfaces received.
        spines = f.status()["spines"]
        check(sum(c["udp_packets"] for c in spines.values()) == total,
              f"spines counted {[c['udp_packets'] for c in spines.values()]}, sent {total}")
        for s, c in spines.items():
            check(c["rx_packets"] >= c["udp_packets"], f"{s}: rx_packets < udp packets: {c}")
        per_spine = {s: sum(1 for v in first.values() if v == s) for s in spines}
        print(f"ports per spine: {per_spine}")


if __name__ == "__main__":
    main(test)
