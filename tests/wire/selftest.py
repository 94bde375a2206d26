#!/usr/bin/python3
"""The checkers must be able to fail. Takes a good pcap + expect JSON (from
gen_pcap), confirms both checkers pass, then feeds them corrupted copies and
confirms each corruption is caught (and that a change to a field the ICRC
masks is not).

    selftest.py GOOD.pcap GOOD.json
"""
import json
import os
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
PY = "/usr/bin/python3"


def read_pcap(path):
    with open(path, "rb") as f:
        data = f.read()
    head, off, frames = data[:24], 24, []
    while off < len(data):
        ts_s, ts_us, incl, orig = struct.unpack_from("<IIII", data, off)
        frames.append(bytearray(data[off + 16:off + 16 + incl]))
        off += 16 + incl
    return head, frames


def write_pcap(path, head, frames):
    with open(path, "wb") as f:
        f.write(head)
        for i, fr in enumerate(frames):
            f.write(struct.pack("<IIII", 1700000000, i, len(fr), len(fr)))
            f.write(bytes(fr))


def ipv4_fix_checksum(fr):
    fr[24:26] = b"\0\0"
    s = sum(struct.unpack("!10H", bytes(fr[14:34])))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    fr[24:26] = struct.pack("!H", ~s & 0xFFFF)


def run(checker, pcap, *extra):
    r = subprocess.run([PY, os.path.join(HERE, checker), pcap] + list(extra),
                       capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr


def main():
    good_pcap, good_json = sys.argv[1], sys.argv[2]
    head, frames = read_pcap(good_pcap)
    with open(good_json) as f:
        expect = json.load(f)
    v4 = [i for i, fr in enumerate(frames) if fr[12:14] == b"\x08\x00"]
    v6 = [i for i, fr in enumerate(frames) if fr[12:14] == b"\x86\xdd"]
    assert v4 and v6, "need IPv4 and IPv6 frames"
    failures = []
    tmp = tempfile.mkdtemp(prefix="sroce-wire-selftest-")

    def case(name, mutate, checker, want_fail, expect_json=None):
        fr = [bytearray(x) for x in frames]
        mutate(fr)
        path = os.path.join(tmp, name + ".pcap")
        write_pcap(path, head, fr)
        extra = []
        if expect_json is not None:
            jp = os.path.join(tmp, name + ".json")
            with open(jp, "w") as f:
                json.dump(expect_json, f)
            extra = ["--expect", jp]
        rc, out = run(checker, path, *extra)
        ok = (rc != 0) == want_fail
        print("%-40s %-16s %s (exit %d)" % (name, checker, "ok" if ok else "WRONG", rc))
        if not ok:
            failures.append(name)
            print(out)

    case("unchanged", lambda f: None, "check_scapy.py", False)
    case("unchanged", lambda f: None, "check_tshark.py", False, expect)

    def flip_payload_v4(f):
        f[v4[0]][-6] ^= 0x01  # a payload/pad byte just before the ICRC

    def flip_payload_v6(f):
        f[v6[0]][-6] ^= 0x80

    def flip_icrc(f):
        f[v4[-1]][-1] ^= 0x10

    def flip_psn(f):
        f[v4[0]][14 + 20 + 8 + 11] ^= 0x01  # BTH PSN low byte

    def change_ttl(f):  # masked in the ICRC: must still verify
        f[v4[0]][14 + 8] = 3
        ipv4_fix_checksum(f[v4[0]])

    def change_hop_limit(f):
        f[v6[0]][14 + 7] = 1  # masked; the UDP checksum does not cover it either

    def set_resv8a(f):  # BTH byte 4 is masked too
        f[v4[0]][14 + 20 + 8 + 4] = 0x80

    def bad_ip_checksum(f):
        f[v4[0]][24] ^= 0xff

    def truncate_headers(f):
        # READ REQUEST (BTH + RETH) relabelled as CmpSwap (BTH + 28-byte AtomicETH).
        for fr in f:
            if fr[12:14] == b"\x08\x00" and fr[14 + 28] == 0x0C:
                fr[14 + 28] = 0x13
                return
        raise AssertionError("no READ request frame")

    case("payload byte flipped (IPv4)", flip_payload_v4, "check_scapy.py", True)
    case("payload byte flipped (IPv6)", flip_payload_v6, "check_scapy.py", True)
    case("ICRC byte flipped", flip_icrc, "check_scapy.py", True)
    case("PSN flipped", flip_psn, "check_scapy.py", True)
    case("TTL changed (masked)", change_ttl, "check_scapy.py", False)
    case("hop limit changed (masked)", change_hop_limit, "check_scapy.py", False)
    case("BTH Resv8a set (masked)", set_resv8a, "check_scapy.py", False)
    case("IPv4 header checksum wrong", bad_ip_checksum, "check_tshark.py", True)
    case("opcode relabelled, headers short", truncate_headers, "check_tshark.py", True)

    wrong_psn = [dict(e) for e in expect]
    wrong_psn[0]["psn"] = (wrong_psn[0]["psn"] + 1) & 0xFFFFFF
    case("expect: wrong PSN", lambda f: None, "check_tshark.py", True, wrong_psn)
    wrong_field = [dict(e) for e in expect]
    for e in wrong_field:
        if "infiniband.reth.va" in e.get("fields", {}):
            e["fields"] = dict(e["fields"])
            e["fields"]["infiniband.reth.va"] += 8
            break
    else:
        failures.append("expect JSON has no infiniband.reth.va field to corrupt")
    case("expect: wrong RETH VA", lambda f: None, "check_tshark.py", True, wrong_field)
    case("expect: one frame too many", lambda f: None, "check_tshark.py", True,
         expect + [expect[0]])

    print("selftest: %d wrong" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
