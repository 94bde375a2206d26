#!/usr/bin/python3
"""Write the seed corpora of the fuzz targets: a few valid packets each, built
here with struct (stdlib only), independent of proto/.

    /usr/bin/python3 tests/fuzz/gen_corpus.py [OUTDIR]   (default: tests/fuzz/corpus)

corpus/parse/    RoCEv2 UDP payloads (BTH .. ICRC) for fuzz_parse
corpus/icrc/     IPv4 / IPv6 packets (IP header .. end of RoCE payload, no ICRC)
corpus/headers/  48-byte header blobs for fuzz_headers
corpus/engine_rx/ records [qp][flags][len] + packet for fuzz_engine_rx (its QP table)
corpus/control/  records [len][flags] + message for fuzz_control
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


# fuzz_engine_rx's QPs, in its creation order: RC, UC, UD x RESET, INIT, RTR, RTS, SQD, ERR.
QP = {(t, st): i * 6 + j for i, t in enumerate(("rc", "uc", "ud"))
      for j, st in enumerate(("reset", "init", "rtr", "rts", "sqd", "err"))}
# Record flags: QPN, from the peer, R_Key, Q_Key, ICRC filled in.
EF = 1 | 2 | 8 | 16 | 32


def erec(qp, pkt, flags=EF):
    pkt = pkt + bytes(4)  # the ICRC, filled in by the harness (flag 32)
    return bytes([qp, flags]) + struct.pack("<H", len(pkt)) + pkt


def engine_rx_seeds():
    reth = lambda ln: struct.pack("!QII", 0x100, 0, ln)
    atm = struct.pack("!QIQQ", 0x200, 0, 1, 2)
    deth = struct.pack("!II", 0, 0x44)
    ack = lambda psn, syn=0x1F: roce(0x11, bytes([syn, 0, 0, 1]), psn=psn, ack=0)
    s = {
        "rc_send_rtr": erec(QP["rc", "rtr"], roce(0x04, payload=b"x" * 64, psn=100)),
        "rc_send_rts": erec(QP["rc", "rts"], roce(0x04, payload=b"y" * 200, psn=100)),
        "rc_write_only": erec(QP["rc", "rts"], roce(0x0A, reth(16), b"z" * 16, psn=100)),
        "rc_read_req": erec(QP["rc", "rts"], roce(0x0C, reth(64), psn=100)),
        "rc_cmp_swap": erec(QP["rc", "rts"], roce(0x13, atm, psn=100)),
        "rc_ack": erec(QP["rc", "rts"], ack(200)),
        "rc_nak_seq": erec(QP["rc", "rts"], ack(200, 0x60)),
        "rc_rnr_nak": erec(QP["rc", "rts"], ack(200, 0x21)),
        "rc_read_resp": erec(QP["rc", "rts"], roce(0x10, bytes([0x1F, 0, 0, 2]), bytes(256), psn=201, ack=0)),
        "rc_atomic_ack": erec(QP["rc", "rts"], roce(0x12, bytes([0x1F, 0, 0, 3]) + struct.pack("!Q", 7),
                                                    psn=202, ack=0)),
        "rc_send_sqd": erec(QP["rc", "sqd"], roce(0x04, payload=b"q" * 32, psn=100)),
        "rc_send_reset": erec(QP["rc", "reset"], roce(0x04, payload=b"r" * 32, psn=100)),
        "rc_send_init": erec(QP["rc", "init"], roce(0x04, payload=b"i" * 32, psn=100)),
        "rc_send_err": erec(QP["rc", "err"], roce(0x04, payload=b"e" * 32, psn=100)),
        "uc_send_rts": erec(QP["uc", "rts"], roce(0x24, payload=b"u" * 48, psn=100)),
        "uc_write_rtr": erec(QP["uc", "rtr"], roce(0x2A, reth(8), b"w" * 8, psn=100)),
        "ud_send_rtr": erec(QP["ud", "rtr"], roce(0x64, deth, b"d" * 40, psn=5)),
        "ud_send_rts": erec(QP["ud", "rts"], roce(0x65, deth + b"\0\0\0\7", b"d" * 40, psn=6)),
        "stranger": erec(QP["rc", "rts"], roce(0x04, payload=b"s" * 16, psn=100), EF & ~2),
        "trimmed": erec(QP["rc", "rts"], roce(0x04, payload=b"t" * 16, psn=100), EF | 4),
        "send_first_middle_last": (
            erec(QP["rc", "rts"], roce(0x00, payload=b"1" * 256, psn=100)) +
            erec(QP["rc", "rts"], roce(0x01, payload=b"2" * 256, psn=101)) +
            erec(QP["rc", "rts"], roce(0x02, payload=b"3" * 100, psn=102), EF | 64)),
    }
    out = {name: b"\0" + rec for name, rec in s.items()}  # compatible engine
    for name in ("rc_send_rts", "rc_write_only", "rc_ack", "send_first_middle_last"):
        out["lossy_" + name] = b"\1" + s[name]  # an engine that offers lossy mode
    return out


ABI_VERSION = 1


def crec(op, body=b"", flags=1):
    """A control record: framed (flag 1) with `op` (the harness maps byte b to op 1 + b)."""
    payload = bytes([op - 1]) + body if flags & 1 else body
    return struct.pack("<H", len(payload)) + bytes([flags]) + payload


def control_seeds():
    hello = crec(1, struct.pack("<II", ABI_VERSION, 0))
    return {
        "hello_pd_cq": hello + crec(5) + crec(9, struct.pack("<IIQ", 16, 0, 0x1234)),
        "hello_query": hello + crec(2) + crec(3, bytes([1]) + bytes(7)) + crec(4, struct.pack("<I", 0) + bytes(4)),
        "hello_channel_cq": hello + crec(21) + crec(9, struct.pack("<IIQ", 8, 1, 1)),
        "before_hello": crec(5) + hello + crec(6, struct.pack("<II", 1, 0)),
        "garbage": crec(0, b"\x01\x02\x03", flags=0) + hello + crec(0, bytes(24), flags=0),
        "hello_twice": hello + hello + crec(25, struct.pack("<II", 0, 0)),
        "stats": crec(23, struct.pack("<II", 0, 0)) + hello + crec(23, struct.pack("<II", 1, 0)),
    }


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
    for name, data in engine_rx_seeds().items():
        files[("engine_rx", name)] = data
    for name, data in control_seeds().items():
        files[("control", name)] = data
    for (target, name), data in sorted(files.items()):
        d = os.path.join(out, target)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, name), "wb") as f:
            f.write(data)
    print("gen_corpus: %d files under %s" % (len(files), out))


if __name__ == "__main__":
    main()
