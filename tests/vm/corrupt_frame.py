#!/usr/bin/python3
"""Inject one corrupted RoCEv2 frame (the VM interop test, vm_interop.sh).

    corrupt_frame.py IFACE DST_IPV4 [TIMEOUT_S] [--arriving NETNS PEER_IFACE]

Waits for the first RoCEv2 frame (IPv4, UDP port 4791) that leaves IFACE for DST_IPV4,
flips one byte the ICRC covers (in the transport headers or payload, never in IP or
UDP), zeroes the UDP checksum (legal over IPv4, and masked in the ICRC: the receiving
UDP stack must hand the frame to RoCE so that its ICRC check is what drops it) and sends
the copy out of IFACE once. The original goes on unchanged, so the receiver's QP sees a
duplicate that only the ICRC can tell from the real one. Exit 0 once sent, 1 on timeout.

With --arriving, the frame is the first one that arrives on IFACE for DST_IPV4 (an address
of IFACE's), and the copy is sent out of PEER_IFACE, the other end of IFACE's veth, in the
network namespace NETNS (/run/netns/NETNS, `ip netns`), so that it arrives on IFACE again.
That is for a sender whose frames the packet taps of its own interface never see (DPDK's
af_xdp PMD transmits with dev_direct_xmit; vm_interop_dpdk.sh).
Standard library only (the VM has no scapy)."""
import ctypes
import os
import socket
import struct
import sys
import time

ETH_P_ALL = 0x0003
PACKET_HOST = 0
PACKET_OUTGOING = 4
CLONE_NEWNET = 0x40000000


def socket_in_netns(netns: str, iface: str) -> socket.socket:
    """A raw packet socket bound to IFACE in NETNS; this thread returns to its own namespace."""
    libc = ctypes.CDLL(None, use_errno=True)
    home = os.open("/proc/self/ns/net", os.O_RDONLY)
    there = os.open(f"/run/netns/{netns}", os.O_RDONLY)
    try:
        if libc.setns(there, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns {netns}")
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        s.bind((iface, 0))
        if libc.setns(home, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), "setns back")
        return s
    finally:
        os.close(home)
        os.close(there)


def main() -> int:
    args = sys.argv[1:]
    out_ns = out_if = None
    if "--arriving" in args:
        i = args.index("--arriving")
        out_ns, out_if = args[i + 1], args[i + 2]
        del args[i:i + 3]
    iface, dst = args[0], socket.inet_aton(args[1])
    deadline = time.monotonic() + (float(args[2]) if len(args) > 2 else 45.0)
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    s.bind((iface, 0))
    s.settimeout(1.0)
    tx = socket_in_netns(out_ns, out_if) if out_ns else s
    want = PACKET_HOST if out_ns else PACKET_OUTGOING
    while time.monotonic() < deadline:
        try:
            frame, addr = s.recvfrom(65535)
        except socket.timeout:
            continue
        if addr[2] != want or len(frame) < 14 + 20 + 8 + 12 + 4:
            continue
        if frame[12:14] != b"\x08\x00" or frame[14] != 0x45 or frame[14 + 9] != 17:
            continue
        if frame[14 + 16:14 + 20] != dst:
            continue
        udp = 14 + 20
        if struct.unpack("!H", frame[udp + 2:udp + 4])[0] != 4791:
            continue
        ip_len = struct.unpack("!H", frame[16:18])[0]
        end = 14 + ip_len  # without Ethernet padding
        bad = bytearray(frame[:end])
        bad[udp + 6:udp + 8] = b"\x00\x00"
        at = end - 4 - 1  # the last byte before the ICRC: payload, pad or a header
        bad[at] ^= 0x5A
        tx.send(bytes(bad))
        print(f"corrupt_frame: {out_if or iface} -> {args[1]}: opcode 0x{frame[udp + 8]:02x} "
              f"ip id 0x{struct.unpack('!H', frame[18:20])[0]:04x}, byte {at - udp - 8} of "
              f"{end - udp - 8} flipped, sent")
        return 0
    print(f"corrupt_frame: no RoCEv2 frame to {args[1]} on {iface}")
    return 1


if __name__ == "__main__":
    sys.exit(main())
