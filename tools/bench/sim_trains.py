#!/usr/bin/python3
"""Lane trains against packet-by-packet spraying in the simulator's lossy scenarios
(issue 21, docs/lossy.md "Lane trains"); prints one JSON line per scenario and train
length, then a summary line with each figure's ratio to packet by packet.

    tools/bench/sim_trains.py [--sim build/bin/sroce-sim] [--trains 0,16384,32768,65536]
                              [--seed N] [--quick]

Scenarios (docs/results/lossy.md): loss-sweep (goodput of the sprayed QP at each loss
rate), reorder-only, spray-vs-ecmp (p99 FCT and fabric utilisation of 128 hosts),
lane-weights (one slow spine), path-failure (a spine black-holed mid-transfer).
Path balance of a single-QP scenario: the largest spine's share of the QP's packets
over the smallest's (from per_lane tx_packets and the spine each lane hashes to).
--quick runs the CI-sized settings of docs/results/lossy.md instead of full size.
Everything is a function of the seed: the simulator's time, not the wall clock's."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

QUICK = {
    "loss-sweep": ["--set", "bytes=2097152", "--set", "loss_pct_x100=0,100"],
    "reorder-only": ["--set", "bytes=2097152"],
    "path-failure": ["--set", "bytes=4194304"],
    "spray-vs-ecmp": ["--set", "hosts=32", "--set", "hosts_per_leaf=8", "--set", "bytes=1000000"],
    "lane-weights": [],
}


def run(sim: str, scenario: str, train: int, seed: int, quick: bool) -> dict:
    argv = [sim, "run", scenario, "--json", "-q", "--seed", str(seed),
            "--set", f"train_bytes={train}"] + (QUICK[scenario] if quick else [])
    p = subprocess.run(argv, capture_output=True, text=True, timeout=1800)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: exit {p.returncode}\n{p.stderr[-2000:]}")
    lines = [json.loads(x) for x in p.stdout.splitlines() if x.startswith("{")]
    return next(x for x in reversed(lines) if x.get("event") == "summary")


def balance(per_lane: list[dict]) -> float:
    """Largest spine's packets over the smallest's (1.0 = even)."""
    spines: dict[int, int] = {}
    for ln in per_lane:
        spines[ln["spine"]] = spines.get(ln["spine"], 0) + ln["tx_packets"]
    v = [x for x in spines.values()]
    return max(v) / min(v) if v and min(v) > 0 else float("inf")


def lane_balance(per_lane: list[dict]) -> float:
    """Largest lane's packets over the smallest active lane's."""
    v = [ln["tx_packets"] for ln in per_lane if ln["active"]]
    return max(v) / min(v) if v and min(v) > 0 else float("inf")


def figures(scenario: str, s: dict) -> dict:
    f: dict = {"ok": s.get("ok", False)}
    if scenario == "loss-sweep":
        for row in s["table"]:
            if row["mode"] == "lanes":
                f[f"goodput_gbps_{row['loss_pct']}pct"] = row["goodput_gbps"]
    elif scenario == "reorder-only":
        r = s["runs"]["lanes"]
        f.update(goodput_gbps=s["goodput_gbps_lanes"], spurious_retx=s["spurious_retx_lanes"],
                 max_reorder_depth=s["max_reorder_depth"], lane_balance=lane_balance(r["per_lane"]),
                 spine_balance=balance(r["per_lane"]))
    elif scenario == "spray-vs-ecmp":
        r = s["lanes"]
        f.update(p99_fct_us=s["p99_fct_us_lanes"], p50_fct_us=r["p50_fct_us"],
                 goodput_gbps=r["goodput_gbps"], util_fabric_max=s["util_fabric_max_lanes"],
                 util_fabric_mean=s["util_fabric_mean_lanes"],
                 fabric_balance=s["util_fabric_max_lanes"] / s["util_fabric_mean_lanes"],
                 retransmits=r["retransmits"], queue_p99_bytes=r["queue_p99_bytes"])
    elif scenario == "lane-weights":
        w = s["runs"]["weighted"]
        f.update(goodput_gbps_weighted=s["goodput_gbps_weighted"],
                 goodput_gbps_equal=s["goodput_gbps_equal"],
                 p99_fct_us_weighted=s["p99_fct_us_weighted"], p99_fct_us_equal=s["p99_fct_us_equal"],
                 slow_share_weighted=s["slow_share_weighted"], slow_share_equal=s["slow_share_equal"],
                 retx_weighted=s["retx_weighted"], lane_balance_weighted=lane_balance(w["per_lane"]))
    elif scenario == "path-failure":
        f.update(goodput_gbps=s["goodput_gbps"], goodput_gbps_nofailure=s["goodput_gbps_nofailure"],
                 detect_us=s["detect_us"], lost_wrs=s["lost_wrs"], lanes_retired=s["lanes_retired"],
                 lanes_retired_wrongly=s["lanes_retired_wrongly"],
                 spurious_retransmits=s["spurious_retransmits"], data_verified=s["data_verified"])
    return f


def main() -> int:
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sim", default=os.path.join(here, "..", "..", "build", "bin", "sroce-sim"))
    ap.add_argument("--trains", default="0,16384,32768,65536",
                    help="train_bytes values (0: packet by packet, the reference)")
    ap.add_argument("--scenarios", default=",".join(QUICK))
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    trains = [int(x) for x in a.trains.split(",")]
    summary: dict = {"event": "summary", "seed": a.seed, "quick": a.quick, "trains": trains,
                     "ratio_to_packet_by_packet": {}}
    ok = True
    for sc in a.scenarios.split(","):
        ref = None
        for t in trains:
            f = figures(sc, run(a.sim, sc, t, a.seed, a.quick))
            ok &= bool(f["ok"])
            print(json.dumps({"scenario": sc, "train_bytes": t, **f}), flush=True)
            if ref is None:
                ref = f
                continue
            summary["ratio_to_packet_by_packet"].setdefault(sc, {})[str(t)] = {
                k: round(v / ref[k], 4) for k, v in f.items()
                if isinstance(v, (int, float)) and not isinstance(v, bool) and ref.get(k)}
    summary["ok"] = ok
    print(json.dumps(summary))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
