#!/usr/bin/python3
"""The demo's report (tools/demo/demo.sh): reads what the demo saved in its
work directory and prints what ran, the figures, the RoCE packets per spine
and the daemons' own counters. Exit status 1 if a program's output lacks its
figures or reports invalid data.

    report.py WORKDIR

WORKDIR holds: addrs ("H1 H2"); TAG.server / TAG.client (program outputs) for
TAG in pingpong, write_bw, write_lat; spines-TAG-before.json /
spines-TAG-after.json (`sroce-fabric status --json`); qps-HOST.txt (`sroce
qps` sampled during ib_write_bw); lanes-HOST.txt; status-HOST.json."""

from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))
import perftest_out  # noqa: E402


def read(work: str, name: str) -> str:
    try:
        with open(os.path.join(work, name)) as f:
            return f.read()
    except FileNotFoundError:
        return ""


def roce_by_direction(work: str, tag: str) -> dict[str, dict[str, int]]:
    """RoCE packets (UDP to 4791) that entered each spine during run TAG, by
    direction: 'h1>h2' from leaf l1 (h1's side), 'h2>h1' from leaf l2."""
    def per_dir(st: dict) -> dict[str, int]:
        out = {}
        for lk in st["links"]:
            for name, d in lk["directions"].items():
                src, dst = name.split(">")
                if src.startswith("l") and dst.startswith("s"):
                    out[name] = d["counters"].get("roce_packets", 0)
        return out

    before = per_dir(json.loads(read(work, f"spines-{tag}-before.json")))
    after = per_dir(json.loads(read(work, f"spines-{tag}-after.json")))
    res: dict[str, dict[str, int]] = {"h1>h2": {}, "h2>h1": {}}
    for name in sorted(after, key=lambda n: (n.split(">")[1][1:].zfill(3), n)):
        leaf, spine = name.split(">")
        key = "h1>h2" if leaf == "l1" else "h2>h1"
        res[key][spine] = after[name] - before.get(name, 0)
    return res


def spine_lines(title: str, counts: dict[str, dict[str, int]]) -> tuple[list[str], int]:
    spines = sorted(counts["h1>h2"], key=lambda s: int(s[1:]))
    out = [f"  {title}",
           "    " + f"{'':<22}" + "".join(f"{s:>10}" for s in spines) + f"{'total':>10}"]
    for key, label in (("h1>h2", "h1 -> h2"), ("h2>h1", "h2 -> h1")):
        row = counts[key]
        out.append("    " + f"{label:<22}" + "".join(f"{row.get(s, 0):>10}" for s in spines)
                   + f"{sum(row.values()):>10}")
    used = [s for s in spines if counts["h1>h2"].get(s, 0) > 0]
    return out, len(used)


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    work = sys.argv[1]
    ok = True
    h1, h2 = (read(work, "addrs").split() + ["?", "?"])[:2]
    lines = [f"fabric   h1 {h1} and h2 {h2}, each on its own leaf, 4 spines between the leaves;",
             "         Linux multipath hashes the UDP 5-tuple, so one UDP source port (a sroce",
             "         lane) keeps one spine; a QP in lossy mode sprays its packets over",
             "         8 lanes (docs/lossy.md). One sroced per host; every program below is",
             "         Debian's own binary, run with `sroce-fabric exec HOST -- sroce-run -- ...`",
             "         (server on h2, client on h1).", ""]
    try:
        pp = perftest_out.pingpong(read(work, "pingpong.client"))
        srv = perftest_out.pingpong(read(work, "pingpong.server"))
        lines += [f"ibv_rc_pingpong   -s 65536 -n 500 -c (RC SEND/RECV, MTU 4096): ok, "
                  f"{srv['iters']} iterations; -c: the server found the client's",
                  "                  pattern in every 4 KiB page of its receive buffer",
                  f"                  {pp['mbps'] / 1000:.2f} Gbit/s, "
                  f"{pp['usec_per_iter']:.1f} us per iteration (a 64 KiB message each way)"]
    except perftest_out.ParseError as e:
        ok = False
        lines.append(f"ibv_rc_pingpong   FAILED: {e}")
    try:
        gbps = perftest_out.bw_gbps(read(work, "write_bw.client"))
        lines.append(f"ib_write_bw       -q 4 -s 65536 -m 4096 -D 3 (RDMA WRITE, 4 QPs): "
                     f"{gbps:.2f} Gbit/s")
    except perftest_out.ParseError as e:
        ok = False
        lines.append(f"ib_write_bw       FAILED: {e}")
    try:
        lat = perftest_out.lat_us(read(work, "write_lat.client"))
        lines.append(f"ib_write_lat      -s 64 -n 2000: p50 {lat['p50']:.2f} us, p99 "
                     f"{lat['p99']:.2f} us (perftest: half the round trip)")
    except perftest_out.ParseError as e:
        ok = False
        lines.append(f"ib_write_lat      FAILED: {e}")

    lines += ["", "multipath: RoCE packets (UDP port 4791) entering each spine, from the fabric's "
              "own counters"]
    for tag, title in (("write_bw", "during ib_write_bw (4 QPs; h2 -> h1 is only ACKs):"),
                       ("pingpong", "during ibv_rc_pingpong (1 QP; messages both ways):")):
        try:
            counts = roce_by_direction(work, tag)
        except (json.JSONDecodeError, KeyError) as e:
            ok = False
            lines.append(f"  {title} no counters ({e})")
            continue
        body, used = spine_lines(title, counts)
        lines += body
        if tag == "write_bw":
            if used > 1:
                lines.append(f"    -> the 4 QPs' requests crossed {used} of 4 spines at once")
            elif used == 1:
                lines.append("    -> all 4 QPs' lanes hashed to one spine this time (lanes are "
                             "UDP source ports drawn at random per QP)")
            else:
                ok = False
                lines.append("    -> no RoCE packets crossed the spines: something is wrong")
        else:
            lines.append(f"    -> one QP: its lanes (UDP source ports) carried h1's packets over "
                         f"{used} spine{'s' if used != 1 else ''} (compatible mode: one port, one "
                         "spine)")

    for h in ("h1", "h2"):
        lines += ["", f"sroce qps on {h} (sampled while ib_write_bw ran):"]
        lines += ["  " + x for x in (read(work, f"qps-{h}.txt").rstrip() or
                                     "(no sample caught the QPs)").splitlines()]
    for h in ("h1", "h2"):
        lines += ["", f"sroce lanes on {h} (every UDP source port the daemon sent from):"]
        lanes = read(work, f"lanes-{h}.txt").rstrip() or "(none)"
        lines += ["  " + x for x in lanes.splitlines()]
        try:
            st = json.loads(read(work, f"status-{h}.json"))
            e, d = st["engine"], st["datapath"]
            lines.append(f"  daemon {h}: tx {d['tx_packets']} packets in {d['tx_sends']} sends "
                         f"(GSO), rx {d['rx_packets']} in {d['rx_batches']} batches (GRO); "
                         f"retransmits {e['retransmits']}, timeouts {e['timeouts']}, "
                         f"dropped {e['rx_dropped']}")
        except (json.JSONDecodeError, KeyError) as ex:
            lines.append(f"  (no status from {h}'s daemon: {ex})")
    print("\n".join(lines))
    print("\ndemo: " + ("all programs passed" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
