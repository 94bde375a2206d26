#!/usr/bin/python3
"""The demo's report (tools/demo/demo.sh): reads what the demo saved in its
work directory, prints one screen (what ran and its figures, throughput per
QP, RoCE packets per spine, the daemons' counters) and writes the full tables
and an HTML report with its PNG charts (report_html.py) into OUT_DIR. Exit
status 1 if a program's output lacks its figures or reports invalid data.

    report.py WORKDIR OUT_DIR [--full]

WORKDIR holds: addrs ("H1 H2"); TAG.server / TAG.client (program outputs) for
TAG in pingpong, write_bw, write_lat; spines-TAG-before.json /
spines-TAG-after.json (`sroce-fabric status --json`); samples/HOST-T.json
(`sroce status --json` of HOST's daemon at time T, taken while ib_write_bw
ran); status-HOST.json (the same at the end). --full also prints the full
per-QP and per-lane tables (always written to OUT_DIR/tables.txt)."""

from __future__ import annotations

import glob
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


kRunSeconds = 3.0  # ib_write_bw -D 3 (demo.sh)


def samples(work: str, host: str) -> list[tuple[float, dict]]:
    """(time, `sroce status --json`) of HOST's daemon, oldest first."""
    out = []
    for path in glob.glob(os.path.join(work, "samples", f"{host}-*.json")):
        t = float(os.path.basename(path)[len(host) + 1:-len(".json")])
        try:
            with open(path) as f:
                out.append((t, json.load(f)))
        except (json.JSONDecodeError, OSError):
            continue  # a sample cut short by the end of the run
    return sorted(out, key=lambda s: s[0])


def per_qp(host_samples: list[tuple[float, dict]]) -> list[dict]:
    """One entry per QP seen in the samples: its last counters, its lanes, and
    its send rate over the samples that saw it (tx bytes between the first and
    the last such sample over their time apart), plus the rate series."""
    seen: dict[int, dict] = {}
    for t, st in host_samples:
        for q in st.get("qps", []):
            e = seen.setdefault(q["qpn"], {"first": (t, q), "series": []})
            e["last"] = (t, q)
            e["series"].append((t, q.get("tx_bytes", 0)))
    out = []
    for qpn, e in seen.items():
        (t0, q0), (t1, q1) = e["first"], e["last"]
        dt = t1 - t0
        if dt > 0 and q1.get("tx_bytes", 0) > q0.get("tx_bytes", 0):
            gbps, how = (q1.get("tx_bytes", 0) - q0.get("tx_bytes", 0)) * 8 / dt / 1e9, "sampled"
        else:
            # One sample only (a loaded machine samples slowly): the QP's bytes so far over
            # the run's length (ib_write_bw -D 3), a lower bound of its mean rate.
            gbps, how = q1.get("tx_bytes", 0) * 8 / kRunSeconds / 1e9, "mean"
        out.append({"qpn": qpn, "q": q1, "gbps": gbps, "how": how, "seconds": dt,
                    "series": e["series"]})
    return sorted(out, key=lambda e: -e["q"].get("tx_bytes", 0))


def fmt_table(head: list[str], rows: list[list[str]]) -> list[str]:
    w = [max(len(str(x)) for x in col) for col in zip(head, *rows)] if rows else [len(h) for h in head]
    return ["  ".join(str(x).ljust(n) for x, n in zip(r, w)).rstrip() for r in [head] + rows]


def full_tables(host: str, qps: list[dict], status: dict) -> list[str]:
    lines = [f"== {host}: every QP seen while ib_write_bw ran (last sample)"]
    rows = [[str(e["qpn"]), e["q"].get("type", "?"), e["q"].get("state", "?"), e["q"].get("mode", "-"),
             str(e["q"].get("dest_qpn", "?")), str(e["q"].get("tx_packets", 0)), str(e["q"].get("tx_bytes", 0)),
             str(e["q"].get("rx_packets", 0)), str(e["q"].get("retransmits", 0)),
             str(e["q"].get("timeouts", 0)), str(len(e["q"].get("lanes", []))), f"{e['gbps']:.2f}"]
            for e in qps]
    lines += fmt_table(["QPN", "TYPE", "STATE", "MODE", "DEST", "TX_PKTS", "TX_BYTES", "RX_PKTS", "RETX",
                        "TIMEOUTS", "LANES", "GBIT/S"], rows)
    lines += ["", f"== {host}: each lossy QP's lanes (UDP source ports)"]
    rows = [[str(e["qpn"]), str(la.get("sport")), "yes" if la.get("active") else "retired",
             str(la.get("tx_packets", 0)), str(la.get("retransmits", 0)), f"{la.get('srtt_us', 0):.1f}"]
            for e in qps for la in e["q"].get("lanes", [])]
    lines += fmt_table(["QPN", "SPORT", "ACTIVE", "TX_PKTS", "RETX", "SRTT_US"], rows)
    lines += ["", f"== {host}: every UDP source port the datapath sent from (whole demo)"]
    rows = [[str(la.get("sport")), str(la.get("local")), str(la.get("tx_packets", 0)),
             str(la.get("tx_bytes", 0)), str(la.get("tx_sends", 0))] for la in status.get("lanes", [])]
    lines += fmt_table(["SPORT", "LOCAL", "TX_PKTS", "TX_BYTES", "SENDS"], rows)
    return lines + [""]


def main() -> int:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    full = "--full" in sys.argv[1:]
    if len(args) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    work, out_dir = args
    os.makedirs(out_dir, exist_ok=True)
    ok = True
    h1, h2 = (read(work, "addrs").split() + ["?", "?"])[:2]
    fig: dict = {}
    lines = [f"fabric  h1 {h1} (leaf l1) -- 4 spines, ECMP on the UDP 5-tuple -- h2 {h2} (leaf l2);",
             "        one sroced per host; Debian's own programs via sroce-run, server h2, client h1", ""]
    try:
        pp = perftest_out.pingpong(read(work, "pingpong.client"))
        srv = perftest_out.pingpong(read(work, "pingpong.server"))
        fig["pingpong"] = pp
        lines.append(f"ibv_rc_pingpong  RC SEND 64 KiB x {srv['iters']}, data checked (-c): ok  "
                     f"{pp['mbps'] / 1000:.2f} Gbit/s, {pp['usec_per_iter']:.0f} us per round trip")
    except perftest_out.ParseError as e:
        ok = False
        lines.append(f"ibv_rc_pingpong  FAILED: {str(e).splitlines()[0]}")
    try:
        gbps = perftest_out.bw_gbps(read(work, "write_bw.client"))
        fig["write_bw_gbps"] = gbps
        lines.append(f"ib_write_bw      RDMA WRITE, 4 QPs, 64 KiB, 3 s:               {gbps:.2f} Gbit/s")
    except perftest_out.ParseError as e:
        ok = False
        lines.append(f"ib_write_bw      FAILED: {str(e).splitlines()[0]}")
    lat_samples = perftest_out.lat_samples_us(read(work, "write_lat.client"))
    try:
        lat = perftest_out.lat_us(read(work, "write_lat.client"))
        fig["write_lat"] = lat
        lines.append(f"ib_write_lat     64 B x 2000:                                   p50 {lat['p50']:.1f} us, "
                     f"p99 {lat['p99']:.1f} us (half the round trip)")
    except perftest_out.ParseError as e:
        ok = False
        lines.append(f"ib_write_lat     FAILED: {str(e).splitlines()[0]}")

    # The baseline: raw UDP through the same fabric, measured right after (demo.sh).
    try:
        raw = json.loads(read(work, "raw_udp.json").strip().splitlines()[-1])
        fig["raw_udp_gbps"] = raw["raw_udp_gbps"]
        fig["raw_pingpong_p50_us"] = raw["raw_pingpong_p50_us"]
        line = f"raw UDP          GSO/GRO, 4 KiB segments, same fabric, 3 s:  {raw['raw_udp_gbps']:.2f} Gbit/s"
        if "write_bw_gbps" in fig and raw["raw_udp_gbps"] > 0:
            fig["write_bw_of_raw"] = fig["write_bw_gbps"] / raw["raw_udp_gbps"]
            line += f"  (ib_write_bw: {fig['write_bw_of_raw']:.2f} of it)"
        lines.append(line)
        line = f"raw UDP          ping-pong 64 B, one way (half the round trip):  p50 {raw['raw_pingpong_p50_us'] / 2:.1f} us"
        if "write_lat" in fig and raw["raw_pingpong_p50_us"] > 0:
            fig["write_lat_ratio_p50"] = fig["write_lat"]["p50"] / (raw["raw_pingpong_p50_us"] / 2)
            line += f"  (ib_write_lat: {fig['write_lat_ratio_p50']:.1f}x)"
        lines.append(line)
    except (OSError, ValueError, KeyError, IndexError) as e:
        lines.append(f"raw UDP          not measured ({type(e).__name__}: {e})")

    # Per QP: the sender's (h1's) QPs during ib_write_bw, from its daemon's counters.
    s1 = samples(work, "h1")
    qps1 = [e for e in per_qp(s1) if e["q"].get("tx_bytes", 0) > 1 << 20]
    lines += ["", "per QP   (ib_write_bw, h1's daemon)   " + "   ".join(
        f"{e['qpn']}: {e['gbps']:.2f}{'' if e['how'] == 'sampled' else '*'} Gbit/s, {len(e['q'].get('lanes', [])) or 1} lane"
        f"{'s' if len(e['q'].get('lanes', [])) != 1 else ''}, retx {e['q'].get('retransmits', 0)}"
        for e in qps1[:2])]
    for i in range(2, len(qps1), 2):
        lines.append(" " * 39 + "   ".join(
            f"{e['qpn']}: {e['gbps']:.2f}{'' if e['how'] == 'sampled' else '*'} Gbit/s, {len(e['q'].get('lanes', [])) or 1} lanes, "
            f"retx {e['q'].get('retransmits', 0)}" for e in qps1[i:i + 2]))
    if not qps1:
        lines.append("         (no sample caught the QPs)")
    elif any(e["how"] != "sampled" for e in qps1):
        lines.append(" " * 9 + "* one sample only: bytes sent over the 3 s run (the machine sampled slowly)")

    spines: dict[str, dict[str, dict[str, int]]] = {}
    lines += ["", "per spine  RoCE packets entering each spine (the fabric's own counters)"]
    for tag, title in (("write_bw", "ib_write_bw"), ("pingpong", "ibv_rc_pingpong")):
        try:
            counts = roce_by_direction(work, tag)
        except (json.JSONDecodeError, KeyError) as e:
            ok = False
            lines.append(f"  {title}: no counters ({e})")
            continue
        spines[tag] = counts
        names = sorted(counts["h1>h2"], key=lambda s: int(s[1:]))
        used = [s for s in names if counts["h1>h2"].get(s, 0) > 0]
        for key in ("h1>h2", "h2>h1"):
            row = counts[key]
            lines.append(f"  {title:<16}{key.replace('>', ' -> '):<10}" +
                         "".join(f"{s} {row.get(s, 0):>7}  " for s in names) + f"total {sum(row.values())}")
        if tag == "write_bw" and not used:
            ok = False
            lines.append("  -> no RoCE packets crossed the spines: something is wrong")
        else:
            lines.append(f"  -> h1's requests crossed {len(used)} of {len(names)} spines")

    lines.append("")
    statuses = {}
    for h in ("h1", "h2"):
        try:
            st = json.loads(read(work, f"status-{h}.json"))
            statuses[h] = st
            e, d = st["engine"], st["datapath"]
            per_send = d["tx_packets"] / d["tx_sends"] if d.get("tx_sends") else 0
            lines.append(f"daemon {h}  tx {d['tx_packets']} pkts in {d['tx_sends']} sends (GSO x{per_send:.1f}), "
                         f"rx {d['rx_packets']}; retransmits {e['retransmits']}, timeouts {e['timeouts']}, "
                         f"dropped {e['rx_dropped']}, {len(st.get('lanes', []))} source ports")
        except (json.JSONDecodeError, KeyError) as ex:
            lines.append(f"daemon {h}  (no status: {ex})")

    tables: list[str] = []
    for h in ("h1", "h2"):
        tables += full_tables(h, per_qp(samples(work, h)), statuses.get(h, {}))
    with open(os.path.join(out_dir, "tables.txt"), "w") as f:
        f.write("\n".join(tables))
    html = None
    try:
        import report_html
        html = report_html.write(out_dir, fig, qps1, spines, lat_samples, lines, tables)
    except ImportError as e:  # matplotlib missing: the text report still stands
        lines.append(f"(no HTML report: {e})")
    lines += ["", f"full tables   {os.path.join(out_dir, 'tables.txt')}" + ("" if full else
              "   (SROCE_DEMO_FULL=1 prints them here)")]
    if html:
        lines.append(f"report        {html}  (throughput per QP, packets per spine, latency histogram)")
    print("\n".join(lines))
    if full:
        print("\n" + "\n".join(tables))
    print("\ndemo: " + ("all programs passed" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
