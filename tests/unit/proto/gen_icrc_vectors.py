#!/usr/bin/python3
"""Print the ICRC test vectors baked into test_icrc.cc, computed with Python's
zlib.crc32 (an implementation nobody here wrote) over packets assembled by hand
with struct.pack, independently of proto/.

    /usr/bin/python3 tests/unit/proto/gen_icrc_vectors.py

zlib.crc32 is the standard CRC-32 (reflected 0xEDB88320, init ~0, final ~), so
per IBA Annex A17.3.3 the ICRC is zlib.crc32(8 x 0xff + masked IP/UDP/BTH + rest).
"""
import struct
import zlib


def ipv4_checksum(h):
    s = sum(struct.unpack("!10H", h))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return (~s) & 0xFFFF


def bth(opcode, se, mig, pad, pkey, resv8a, dqpn, ack_req, psn):
    b1 = (se << 7) | (mig << 6) | (pad << 4)  # TVer 0
    return struct.pack("!BBHB", opcode, b1, pkey, resv8a) + dqpn.to_bytes(3, "big") + \
        struct.pack("!B", ack_req << 7) + psn.to_bytes(3, "big")


def icrc(masked):
    return zlib.crc32(b"\xff" * 8 + masked) & 0xFFFFFFFF


def vector_ipv4():
    payload = b"sroce ICRC test vector"  # 22 bytes -> 2 bytes of pad
    pad = (-len(payload)) & 3
    roce = bth(0x04, 0, 1, pad, 0xFFFF, 0x00, 0x000011, 1, 0x000123) + payload + b"\0" * pad
    udp_len = 8 + len(roce) + 4
    udp = struct.pack("!HHHH", 0xC000, 4791, udp_len, 0)
    tot = 20 + udp_len
    src, dst = bytes([192, 168, 1, 1]), bytes([192, 168, 1, 2])
    ip = struct.pack("!BBHHHBBH", 0x45, 0x02, tot, 0, 0x4000, 64, 17, 0) + src + dst
    ip = ip[:10] + struct.pack("!H", ipv4_checksum(ip)) + ip[12:]
    pkt = ip + udp + roce
    # Masks: TOS, TTL, IP checksum, UDP checksum, BTH Resv8a.
    m = bytearray(pkt)
    m[1] = 0xFF
    m[8] = 0xFF
    m[10:12] = b"\xff\xff"
    m[20 + 6:20 + 8] = b"\xff\xff"
    m[28 + 4] = 0xFF
    return pkt, icrc(bytes(m))


def vector_ipv6():
    payload = bytes([1, 2, 3, 4, 5])  # 5 bytes -> 3 bytes of pad
    pad = (-len(payload)) & 3
    reth = struct.pack("!QII", 0x00007F0000001000, 0x00001234, len(payload))
    roce = bth(0x0A, 1, 0, pad, 0x8001, 0x00, 0xABCDEF, 1, 0xFFFFFF) + reth + payload + \
        b"\0" * pad
    udp_len = 8 + len(roce) + 4
    udp = struct.pack("!HHHH", 0xD123, 4791, udp_len, 0)
    src = bytes.fromhex("fe800000000000000000000000000001")
    dst = bytes.fromhex("fe800000000000000000000000000002")
    ip = struct.pack("!IHBB", (6 << 28) | (0x60 << 20) | 0x12345, udp_len, 17, 64) + src + dst
    pkt = ip + udp + roce
    # Masks: traffic class, flow label, hop limit, UDP checksum, BTH Resv8a.
    m = bytearray(pkt)
    m[0] |= 0x0F
    m[1:4] = b"\xff\xff\xff"
    m[7] = 0xFF
    m[40 + 6:40 + 8] = b"\xff\xff"
    m[48 + 4] = 0xFF
    return pkt, icrc(bytes(m))


def c_bytes(b):
    rows = []
    for i in range(0, len(b), 12):
        rows.append("\t" + " ".join("0x%02x," % x for x in b[i:i + 12]))
    return "\n".join(rows)


for name, (pkt, crc) in (("kZlibIpv4", vector_ipv4()), ("kZlibIpv6", vector_ipv6())):
    print("// %s: %d bytes, ICRC 0x%08x" % (name, len(pkt), crc))
    print("const uint8_t %sPacket[] = {\n%s\n};" % (name, c_bytes(pkt)))
    print("const uint32_t %sIcrc = 0x%08x;" % (name, crc))
