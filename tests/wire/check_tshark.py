#!/usr/bin/python3
"""Decode a RoCEv2 pcap with tshark's InfiniBand dissector (a decoder nobody here
wrote) and check that every frame is RoCEv2 the way Wireshark understands it.

    check_tshark.py PCAP [--expect JSON]

For every frame: the protocol stack ends in "infiniband" (tshark decodes UDP
port 4791 as RoCEv2 by default: `tshark -G decodes` lists udp.port 4791
infiniband), no "malformed" marker and no expert info of severity error
anywhere in the tree, and IPv4 header / UDP checksums verify (checksum
validation is switched on; a zero UDP checksum over IPv4 is legal and shown as
"not present"). Prints opcode, destination QP and PSN per frame. With
--expect, a JSON list of {"opcode", "dqpn", "psn"} per frame must match; an
entry may also carry "fields": {tshark field name: integer}, e.g.
"infiniband.reth.va", each of which must be decoded with that value.

Application payload is opaque to RoCE, so the heuristic RPC-over-RDMA
sub-dissector is disabled: it would otherwise guess at arbitrary SEND payload
and report its own "malformed" on bytes that are not RPC at all.
Exit status 0 on success, 1 on any failure.
"""
import argparse
import json
import subprocess
import sys

EXPERT_ERROR = 0x00800000  # PI_ERROR in Wireshark's expert.h
TSHARK_ARGS = [
    "-o", "ip.check_checksum:TRUE",
    "-o", "udp.check_checksum:TRUE",
    "--disable-heuristic", "rpcrdma_infiniband",
]


def pairs_hook(pairs):
    # tshark's JSON repeats keys inside one object; keep every value.
    out = {}
    for k, v in pairs:
        out.setdefault(k, []).append(v)
    return out


def first(tree, key):
    v = tree.get(key)
    return v[0] if v else None


def walk(node, path=()):
    """Yield (key, value) for every key anywhere below node."""
    if isinstance(node, dict):
        for k, vs in node.items():
            for v in vs:
                yield k, v
                yield from walk(v, path + (k,))
    elif isinstance(node, list):
        for v in node:
            yield from walk(v, path)


def find(node, key):
    return [v for k, v in walk(node) if k == key]


def tshark_int(v):
    """tshark prints numbers as decimal, 0x-hex, or colon-separated bytes."""
    if ":" in v:
        return int(v.replace(":", ""), 16)
    return int(v, 0)


def run_tshark(pcap, extra):
    cmd = ["tshark", "-r", pcap] + TSHARK_ARGS + extra
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("check_tshark: %s failed (%d): %s" % (" ".join(cmd), r.returncode,
                                                       r.stderr.strip()))
    return r.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("pcap")
    ap.add_argument("--expect", help="JSON list of {opcode, dqpn, psn} per frame")
    args = ap.parse_args()

    frames = json.loads(run_tshark(args.pcap, ["-T", "json"]), object_pairs_hook=pairs_hook)
    info = run_tshark(args.pcap, ["-T", "fields", "-e", "_ws.col.Info"]).splitlines()
    expect = None
    if args.expect:
        with open(args.expect) as f:
            expect = json.load(f)

    errors = []
    decoded = []
    for n, fr in enumerate(frames, 1):
        layers = first(first(fr, "_source"), "layers")
        protos = first(first(layers, "frame"), "frame.protocols") or ""
        ib = first(layers, "infiniband")
        if protos.split(":")[-1] != "infiniband" and "infiniband" not in protos.split(":"):
            errors.append("frame %d: not decoded as InfiniBand (%s)" % (n, protos))
            decoded.append(None)
            continue
        if find(layers, "_ws.malformed"):
            errors.append("frame %d: tshark marks it malformed (%s)" % (n, protos))
        for sev in find(layers, "_ws.expert.severity"):
            if int(sev) >= EXPERT_ERROR:
                msgs = find(layers, "_ws.expert.message")
                errors.append("frame %d: expert error: %s" % (n, "; ".join(msgs)))
                break
        for status_key in ("ip.checksum.status", "udp.checksum.status"):
            for st in find(layers, status_key):
                # 0 bad, 1 good, 2 unverified/not present (zero UDP checksum over IPv4)
                if st == "0":
                    errors.append("frame %d: %s is bad" % (n, status_key))
        bth = first(ib, "infiniband.bth_tree")
        if bth is None:
            errors.append("frame %d: no BTH decoded" % n)
            decoded.append(None)
            continue
        opcode = int(first(bth, "infiniband.bth.opcode"))
        dqpn = int(first(bth, "infiniband.bth.destqp"), 0)
        psn = int(first(bth, "infiniband.bth.psn"))
        decoded.append({"opcode": opcode, "dqpn": dqpn, "psn": psn})
        text = info[n - 1].strip() if n - 1 < len(info) else ""
        print("frame %3d: opcode 0x%02x dqpn 0x%06x psn %8d  %s" % (n, opcode, dqpn, psn, text))

    if not frames:
        errors.append("no frames in %s" % args.pcap)
    if expect is not None:
        if len(expect) != len(frames):
            errors.append("expected %d frames, tshark decoded %d" % (len(expect), len(frames)))
        for n, (want, got) in enumerate(zip(expect, decoded), 1):
            if got is None:
                continue
            for k in ("opcode", "dqpn", "psn"):
                if int(want[k]) != got[k]:
                    errors.append("frame %d: %s is %d, expected %d" % (n, k, got[k], int(want[k])))
            # Optional: any other tshark field of the frame, by its filter name.
            ib = first(first(first(frames[n - 1], "_source"), "layers"), "infiniband")
            for field, value in want.get("fields", {}).items():
                seen = [tshark_int(v) for v in find(ib, field) if isinstance(v, str)]
                if int(value) not in seen:
                    errors.append("frame %d: %s is %s, expected %d" % (n, field, seen, int(value)))

    for e in errors:
        print("FAIL " + e, file=sys.stderr)
    print("check_tshark: %d frames, %d decoded as InfiniBand, %d errors" %
          (len(frames), sum(d is not None for d in decoded), len(errors)))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
