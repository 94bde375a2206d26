#!/usr/bin/python3
"""The impair program on crafted packets (BPF_PROG_TEST_RUN), through the
same map interface the tool uses: what is dropped, what is marked, what is
never touched, that the IPv4 checksum stays valid after a CE mark, that the
match and header parsing (IP options, fragments) are right, and that the drop
probability matches the configured one."""

import os
import struct
import sys

from fabric_test import Fabric, binomial_bounds, check, main

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools",
                                "sroce-fabric"))
from sroce_fabric import bpfsys  # noqa: E402
from sroce_fabric.impair import ImpairProg, Impairment  # noqa: E402

TC_ACT_OK, TC_ACT_SHOT = 0, 2
UDP, TCP = 17, 6


def csum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def frame(tos=0, proto=UDP, dport=4791, options=b"", frag=0, ethertype=0x0800) -> bytes:
    eth = b"\x02\0\0\0\0\x02" + b"\x02\0\0\0\0\x01" + struct.pack("!H", ethertype)
    if ethertype != 0x0800:
        return eth + b"\0" * 28
    l4 = struct.pack("!HHHH", 50000, dport, 8 + 16, 0) + b"p" * 16
    ihl = 5 + len(options) // 4
    ip = struct.pack("!BBHHHBBH4s4s", 0x40 | ihl, tos, ihl * 4 + len(l4), 1, frag, 64, proto, 0,
                     bytes([10, 1, 1, 2]), bytes([10, 1, 2, 2])) + options
    ip = ip[:10] + struct.pack("!H", csum(ip)) + ip[12:]
    return eth + ip + l4


def run(prog: ImpairProg, pkt: bytes, repeat: int = 1) -> tuple[int, bytes]:
    return bpfsys.prog_test_run(prog.prog_fd, pkt, repeat)


def test() -> None:
    with Fabric("bpft", hosts=1, spines=1) as f:
        with ImpairProg(f.state()["bpf"]["h1/eth0"]) as prog:
            s0 = prog.stats()
            pkt = frame(tos=0x02)
            rc, out = run(prog, pkt)
            check(rc == TC_ACT_OK and out == pkt, f"clear config changed the packet: rc {rc}")
            s1 = prog.stats()
            for k in ("skbs", "packets", "ipv4_packets", "udp_packets", "roce_packets", "matched"):
                check(s1[k] - s0[k] == 1, f"{k}: {s0[k]} -> {s1[k]}")
            check(s1["bytes"] - s0["bytes"] == len(pkt), "bytes not counted")

            # Loss 100 %: IPv4 dropped, ARP never.
            prog.set(Impairment(loss=100))
            check(run(prog, frame())[0] == TC_ACT_SHOT, "loss 100 % passed an IPv4 packet")
            check(run(prog, frame(proto=TCP))[0] == TC_ACT_SHOT, "loss 100 % passed TCP")
            check(run(prog, frame(ethertype=0x0806))[0] == TC_ACT_OK, "loss dropped ARP")

            # Matches.
            prog.set(Impairment(loss=100, match="roce"))
            check(run(prog, frame(dport=4791))[0] == TC_ACT_SHOT, "match roce: 4791 passed")
            check(run(prog, frame(dport=5000))[0] == TC_ACT_OK, "match roce: 5000 dropped")
            check(run(prog, frame(proto=TCP, dport=4791))[0] == TC_ACT_OK, "match roce: TCP dropped")
            opts = b"\x01\x01\x01\x00"  # NOP NOP NOP EOL: IHL 6
            check(run(prog, frame(dport=4791, options=opts))[0] == TC_ACT_SHOT,
                  "match roce: the UDP header after IP options was not found")
            check(run(prog, frame(dport=4791, frag=100))[0] == TC_ACT_OK,
                  "match roce: a non-first fragment has no UDP header to match")
            prog.set(Impairment(loss=100, match="udp"))
            check(run(prog, frame(dport=5000))[0] == TC_ACT_SHOT, "match udp: UDP passed")
            check(run(prog, frame(proto=TCP))[0] == TC_ACT_OK, "match udp: TCP dropped")

            # CE marks.
            prog.set(Impairment(ce=100))
            for ecn in (1, 2):
                pkt = frame(tos=0xB8 | ecn)  # DSCP EF keeps its bits
                rc, out = run(prog, pkt)
                check(rc == TC_ACT_OK, f"ECT({2 - ecn}) marked packet dropped")
                check(out[15] == 0xB8 | 3, f"ECT({2 - ecn}): TOS {out[15]:#x}, expected {0xBB:#x}")
                check(csum(out[14:34]) == 0, "IPv4 checksum wrong after the CE mark")
                check(out[:15] + out[16:24] + out[26:] == pkt[:15] + pkt[16:24] + pkt[26:],
                      "CE mark changed more than TOS and checksum")
            s2 = prog.stats()
            rc, out = run(prog, frame(tos=0x03))
            check(rc == TC_ACT_OK and out == frame(tos=0x03), "a CE packet was changed")
            rc, out = run(prog, frame(tos=0x00))
            check(rc == TC_ACT_OK and out == frame(tos=0x00), "a non-ECT packet was marked")
            s3 = prog.stats()
            check(s3["ce_seen"] - s2["ce_seen"] == 1 and s3["not_ect"] - s2["not_ect"] == 1,
                  f"ce_seen/not_ect not counted: {s2} -> {s3}")
            prog.set(Impairment(ce=100, drop_not_ect=True))
            check(run(prog, frame(tos=0x00))[0] == TC_ACT_SHOT, "drop-not-ect passed non-ECT")
            check(run(prog, frame(tos=0x02))[0] == TC_ACT_OK, "drop-not-ect dropped ECT")

            # The probability: 20000 runs at 30 %.
            prog.set(Impairment(loss=30))
            n = 20000
            a = prog.stats()["dropped"]
            run(prog, frame(), repeat=n)
            dropped = prog.stats()["dropped"] - a
            lo, hi = binomial_bounds(n, 0.30)
            print(f"loss 30 %: {dropped} of {n} dropped, 5-sigma bound [{lo:.0f}, {hi:.0f}]")
            check(lo <= dropped <= hi, f"{dropped} of {n}: outside [{lo:.0f}, {hi:.0f}]")
            prog.set(Impairment())


if __name__ == "__main__":
    main(test)
