#!/usr/bin/python3
"""Write the seed corpora of the fuzz targets: a few valid packets each, built
here with struct (stdlib only), independent of proto/.

    /usr/bin/python3 tests/fuzz/gen_corpus.py [OUTDIR]   (default: tests/fuzz/corpus)

corpus/parse/    RoCEv2 UDP payloads (BTH .. ICRC) for fuzz_parse
corpus/icrc/     IPv4 / IPv6 packets (IP header .. end of RoCE payload, no ICRC)
corpus/headers/  48-byte header blobs for fuzz_headers
"""
import os
import struct
import sys
import zlib


def bth(opcode, pad=0, dqpn=0x11, psn=0x100, ack=1, resv8a=0):
    return struct.pack("!BBHB", opcode, 0x40 | (pad << 4), 0xFFFF, resv8a) + \
        dqpn.to_bytes(3, "big") + bytes([ack << 7]) + psn.to_bytes(3, "big")


def roce(opcode, ext=b"", payload=b"", **kw):
    pad = (-len(payload)) & 3
    return bth(opcode, pad=pad, **kw) + ext + payload + b"\0" * pad


RETH = struct.pack("!QII", 0x7F0000001000, 0xC0FFEE, 700)
AETH_ACK = bytes([0x1F, 0, 0, 2])
ATMETH = struct.pack("!QIQQ", 0x7F0000002000, 0xC0FFEE, 1, 2)
DETH = struct.pack("!II", 0x11111111, 0x44)

PACKETS = {
    "rc_send_only": roce(0x04, payload=b"hello, sroce!"),
    "rc_write_first": roce(0x06, RETH, bytes(range(256))),
    "rc_write_only_imm": roce(0x0B, RETH + b"\x12\x34\x56\x78", b"abcdefg"),
    "rc_read_request": roce(0x0C, RETH),
    "rc_read_resp_middle": roce(0x0E, payload=bytes(64)),
    "rc_ack": roce(0x11, AETH_ACK, ack=0),
    "rc_nak_seq": roce(0x11, bytes([0x60, 0, 0, 2]), ack=0),
    "rc_cmp_swap": roce(0x13, ATMETH),
    "rc_atomic_ack": roce(0x12, AETH_ACK + struct.pack("!Q", 0x2222), ack=0),
    "rc_send_only_inv": roce(0x17, b"\x00\xab\xcd\xef", b"xyz"),
    "uc_write_last": roce(0x28, payload=b"tail"),
    "ud_send_only_imm": roce(0x65, DETH + b"\0\0\0\7", b"datagram"),
    "cnp": bth(0x81, psn=0, ack=0, resv8a=0x40) + bytes(16),
}


def ipv4(payload, sport=0xC123):
    udp_len = 8 + len(payload) + 4
    h = struct.pack("!BBHHHBBH4s4s", 0x45, 0x02, 20 + udp_len, 0, 0x4000, 64, 17, 0,
                    bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2]))
    s = sum(struct.unpack("!10H", h))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    h = h[:10] + struct.pack("!H", ~s & 0xFFFF) + h[12:]
    return h + struct.pack("!HHHH", sport, 4791, udp_len, 0) + payload


def ipv6(payload, sport=0xD00D):
    udp_len = 8 + len(payload) + 4
    src = bytes.fromhex("fd000000000000000000000000000001")
    dst = bytes.fromhex("fd000000000000000000000000000002")
    h = struct.pack("!IHBB", (6 << 28) | (0x68 << 20) | 0x3A5C1, udp_len, 17, 64) + src + dst
    return h + struct.pack("!HHHH", sport, 4791, udp_len, 0) + payload


def icrc(ip_packet):
    m = bytearray(ip_packet)
    if m[0] >> 4 == 4:
        m[1] = m[8] = m[10] = m[11] = 0xFF
        n = 20
    else:
        m[0] |= 0x0F
        m[1] = m[2] = m[3] = m[7] = 0xFF
        n = 40
    m[n + 6] = m[n + 7] = 0xFF
    m[n + 12] = 0xFF
    return struct.pack("<I", zlib.crc32(b"\xff" * 8 + bytes(m)) & 0xFFFFFFFF)


def int_hop(node_port, qlen, ts, tx, sb=0, mbps=100000):
    """One 24-byte INT hop record (proto/int.h, docs/wire.md "INT")."""
    return (struct.pack(">IB", node_port, sb) + mbps.to_bytes(3, "big") +
            struct.pack(">I", qlen) + ts.to_bytes(6, "big") + tx.to_bytes(6, "big"))


def int_shim(hops, remaining=8):
    """The INT shim in front of a request, with `hops` (newest first)."""
    return bytes([0xE1, 0x10, 6, remaining - len(hops), len(hops), 0, 0, 0]) + b"".join(hops)


def int_echo(hops, flags=0):
    """An ACK's INT echo trailer: the records, then the 4-byte footer."""
    return b"".join(hops) + bytes([len(hops), 6, flags, 0xE1])


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(
        os.path.abspath(__file__)), "corpus")
    files = {}
    for name, r in PACKETS.items():
        # The parse corpus carries the real ICRC, as received.
        files[("parse", name)] = r + icrc(ipv4(r))
        files[("headers", name)] = (r + bytes(48))[:48]
    for name in ("rc_send_only", "rc_write_first", "rc_ack", "ud_send_only_imm", "cnp"):
        files[("icrc", name + "_v4")] = ipv4(PACKETS[name])
    for name in ("rc_send_only", "rc_atomic_ack", "ud_send_only_imm"):
        files[("icrc", name + "_v6")] = ipv6(PACKETS[name])
    # fuzz_int: shimmed requests (no hop, two hops) and ACKs with an echo.
    h1 = int_hop(0x00030001, 0, 1000000, 4200)
    h2 = int_hop(0x00040002, 400000, 1100000, 8400, sb=1)
    req = PACKETS["rc_send_only"] + icrc(ipv4(PACKETS["rc_send_only"]))
    files[("int", "shim_empty")] = int_shim([]) + req
    files[("int", "shim_two_hops")] = int_shim([h2, h1]) + req
    ack = PACKETS["rc_ack"]
    files[("int", "ack_echo_two")] = ack + int_echo([h2, h1]) + bytes(4)
    files[("int", "ack_echo_exceeded")] = ack + int_echo([h1], flags=1) + bytes(4)
    for (target, name), data in sorted(files.items()):
        d = os.path.join(out, target)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, name), "wb") as f:
            f.write(data)
    print("gen_corpus: %d files under %s" % (len(files), out))


if __name__ == "__main__":
    main()
