#!/usr/bin/python3
"""Recompute the ICRC of every RoCEv2 frame of a pcap with scapy's RoCE layer
(scapy.contrib.roce, code nobody here wrote) and check it equals the ICRC the
frame carries.

    check_scapy.py PCAP

scapy 2.5's BTH.compute_icrc implements IBA Annex A17.3.3 for IPv4 only (its
IPv6 branch is a TODO that returns 0). For IPv6 frames this script applies the
same recipe with scapy's own IPv6/UDP/BTH layers: copy the packet, set traffic
class, flow label, hop limit, UDP checksum and BTH FECN/BECN/Resv6 to all
ones, prepend 8 bytes of 0xff, zlib CRC-32 over everything but the ICRC,
store little-endian (BTH.pack_icrc). The counts say which path checked what.
Exit status 0 on success, 1 on any mismatch or non-RoCE frame.
"""
import sys
import zlib

from scapy.all import IP, UDP, IPv6, raw, rdpcap  # noqa: E402
from scapy.contrib.roce import BTH  # noqa: E402  (binds UDP dport 4791 -> BTH)


def icrc_ipv6(pkt):
    ip = pkt[IPv6].copy()
    ip.tc = 0xFF
    ip.fl = 0xFFFFF
    ip.hlim = 0xFF
    ip[UDP].chksum = 0xFFFF
    ip[BTH].fecn = 1
    ip[BTH].becn = 1
    ip[BTH].resv6 = 0x3F
    data = raw(ip)[:-4]  # the dissected ICRC field is rebuilt last; drop it
    return BTH.pack_icrc(zlib.crc32(b"\xff" * 8 + data) & 0xFFFFFFFF)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: check_scapy.py PCAP")
    frames = rdpcap(sys.argv[1])
    counts = {"frames": len(frames), "ipv4_ok": 0, "ipv6_ok": 0, "bad": 0}
    for n, pkt in enumerate(frames, 1):
        if UDP not in pkt or pkt[UDP].dport != 4791 or BTH not in pkt:
            print("FAIL frame %d: not RoCEv2 (UDP 4791 + BTH): %s" % (n, pkt.summary()),
                  file=sys.stderr)
            counts["bad"] += 1
            continue
        wire = raw(pkt[UDP].payload)[-4:]
        if IP in pkt:
            want = pkt[BTH].compute_icrc(None)
            kind = "ipv4_ok"
        elif IPv6 in pkt:
            want = icrc_ipv6(pkt)
            kind = "ipv6_ok"
        else:
            print("FAIL frame %d: neither IPv4 nor IPv6" % n, file=sys.stderr)
            counts["bad"] += 1
            continue
        bth = pkt[BTH]
        if want != wire:
            print("FAIL frame %d: opcode 0x%02x dqpn 0x%06x psn %d: ICRC on the wire %s, "
                  "scapy computes %s" % (n, bth.opcode, bth.dqpn, bth.psn, wire.hex(), want.hex()),
                  file=sys.stderr)
            counts["bad"] += 1
            continue
        counts[kind] += 1
        print("frame %3d: opcode 0x%02x dqpn 0x%06x psn %8d  ICRC %s ok" %
              (n, bth.opcode, bth.dqpn, bth.psn, wire.hex()))
    print("check_scapy: %(frames)d frames, %(ipv4_ok)d IPv4 ICRCs ok (scapy compute_icrc), "
          "%(ipv6_ok)d IPv6 ICRCs ok (scapy layers + zlib), %(bad)d bad" % counts)
    return 1 if counts["bad"] or not frames else 0


if __name__ == "__main__":
    sys.exit(main())
