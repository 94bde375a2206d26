#!/usr/bin/python3
"""Checks the ICRC of every RoCEv2 frame in a pcap, with the IP header the frame carries.

    check_icrc_pcap.py CAPTURE.pcap [--sroce ADDR]...

The ICRC (IBA Annex A17.3.3) is CRC-32 (zlib's: init all ones, final complement) over
8 bytes of 0xff, the IP header with its variant fields set to ones (IPv4: TOS, TTL,
header checksum; IPv6: traffic class, flow label, hop limit), the UDP header with its
checksum set to ones, the BTH with byte 4 set to ones, and the rest up to the ICRC, which
follows little-endian. Written here from the spec with the standard library only, so it
shares no code with sroce or rxe. The IPv4 identification is covered as the frame carries
it: a frame that left a UDP GSO send with the ICRC of id 0 but a kernel-given id i > 0
fails here (docs/wire.md, "UDP GSO and the IPv4 identification").

Prints one JSON line (frames, ICRC good/bad, per source address, frames with a non-zero
IPv4 id per source); exits 1 if any frame's ICRC is wrong, or if --sroce names an address
that sent no IPv4 frame with a non-zero id (its GSO segments were not seen)."""

import argparse
import json
import struct
import sys
import zlib


def frames(path):
    with open(path, "rb") as f:
        hdr = f.read(24)
        if len(hdr) < 24:
            return
        magic = struct.unpack("<I", hdr[:4])[0]
        if magic in (0xA1B2C3D4, 0xA1B23C4D):
            end = "<"
        elif magic in (0xD4C3B2A1, 0x4D3CB2A1):
            end = ">"
        else:
            raise SystemExit(f"{path}: not a pcap file (magic {magic:#x}; pcapng is not read)")
        linktype = struct.unpack(end + "I", hdr[20:24])[0]
        if linktype != 1:
            raise SystemExit(f"{path}: link type {linktype}, expected Ethernet (1)")
        while True:
            rec = f.read(16)
            if len(rec) < 16:
                return
            _, _, incl, orig = struct.unpack(end + "IIII", rec)
            data = f.read(incl)
            if len(data) < incl:
                return
            yield data, orig


def roce(frame):
    """(src address, ipv4 id or None, masked ICRC input, ICRC) of a RoCEv2 frame, else None."""
    off = 12
    etype = struct.unpack(">H", frame[off:off + 2])[0]
    off += 2
    while etype in (0x8100, 0x88A8):  # VLAN tags
        etype = struct.unpack(">H", frame[off + 2:off + 4])[0]
        off += 4
    ip = frame[off:]
    if etype == 0x0800 and len(ip) >= 20 and ip[0] >> 4 == 4:
        ihl = (ip[0] & 0xF) * 4
        total = struct.unpack(">H", ip[2:4])[0]
        if ip[9] != 17 or total > len(ip) or total < ihl + 8:
            return None
        ip = bytearray(ip[:total])
        src = ".".join(str(b) for b in ip[12:16])
        ip_id = struct.unpack(">H", ip[4:6])[0]
        ip[1] = ip[8] = ip[10] = ip[11] = 0xFF
        hl = ihl
    elif etype == 0x86DD and len(ip) >= 48 and ip[0] >> 4 == 6:
        total = 40 + struct.unpack(">H", ip[4:6])[0]
        if ip[6] != 17 or total > len(ip):
            return None
        ip = bytearray(ip[:total])
        src = ":".join(f"{ip[8 + i]:02x}{ip[9 + i]:02x}" for i in range(0, 16, 2))
        ip_id = None
        ip[0] |= 0x0F
        ip[1] = ip[2] = ip[3] = ip[7] = 0xFF
        hl = 40
    else:
        return None
    if struct.unpack(">H", ip[hl + 2:hl + 4])[0] != 4791 or len(ip) < hl + 8 + 12 + 4:
        return None
    ip[hl + 6] = ip[hl + 7] = 0xFF  # UDP checksum
    ip[hl + 8 + 4] = 0xFF           # BTH Resv8a
    icrc = struct.unpack("<I", bytes(ip[-4:]))[0]
    return src, ip_id, b"\xff" * 8 + bytes(ip[:-4]), icrc


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("pcap")
    ap.add_argument("--sroce", action="append", default=[],
                    help="an address of sroce's: its IPv4 frames must include non-zero ids (GSO segments)")
    a = ap.parse_args()
    out = {"frames": 0, "truncated": 0, "good": 0, "bad": 0, "by_src": {}, "nonzero_id": {}, "bad_examples": []}
    for frame, orig in frames(a.pcap):
        if len(frame) < orig:  # cut by the snap length: its ICRC is not in the capture
            out["truncated"] += 1
            continue
        r = roce(frame)
        if r is None:
            continue
        src, ip_id, data, icrc = r
        out["frames"] += 1
        s = out["by_src"].setdefault(src, {"good": 0, "bad": 0})
        ok = zlib.crc32(data) == icrc
        s["good" if ok else "bad"] += 1
        out["good" if ok else "bad"] += 1
        if ip_id:
            out["nonzero_id"][src] = out["nonzero_id"].get(src, 0) + 1
        if not ok and len(out["bad_examples"]) < 5:
            out["bad_examples"].append({"src": src, "ip_id": ip_id, "len": len(frame)})
    print(json.dumps(out))
    rc = 0
    if out["bad"]:
        print(f"check_icrc_pcap: {out['bad']} frames with a wrong ICRC", file=sys.stderr)
        rc = 1
    for s in a.sroce:
        if not out["nonzero_id"].get(s):
            print(f"check_icrc_pcap: no IPv4 frame from {s} with a non-zero id (no GSO segment seen)",
                  file=sys.stderr)
            rc = 1
    if out["frames"] == 0:
        print("check_icrc_pcap: no RoCEv2 frame", file=sys.stderr)
        rc = 1
    return rc


if __name__ == "__main__":
    sys.exit(main())
