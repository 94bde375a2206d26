#!/usr/bin/python3
"""Lossy mode on the namespace fabric with real sroced and Debian's unchanged
ib_write_bw: the loss, reorder and failure cases of docs/results/lossy.md run
for real, each with lossy mode on (sroced config engine.lossy = true, the
default) and off (compatible go-back-N), beside a clean baseline.

  fabric_lossy.py --bin build/bin [--loss 1] [--size 65536] [--iters 2000]
                  [--cases clean,loss,reorder,failure,blackhole,blackhole0] [--modes lossy,compat]

For each case and mode: `sroce-fabric up --sroced` (2 hosts, 4 spines), the
impairment (`--loss` on every leaf-spine link direction; per-spine one-way
delays 0/100/200/300 us for reorder; for failure every link of spine s2 goes
down once the transfer is under way; blackhole: every link of s2 drops 100 %
of the RoCE packets (`impair s2 --loss 100 --match roce`: routes stay, so only
the transport can steer around it; TCP, which perftest uses to exchange the
QP numbers, still passes) once the transfer is under way; blackhole0: the same
from before the start), then `ib_write_bw -F --report_gbits -q 1` (h2 server,
h1 client, both through sroce-run) and `sroce-fabric down`. In the blackhole
cases `ibv_rc_pingpong -c` (the server checks the data) then runs across the
same blackhole: `data_ok`.
Reported per run: goodput (Gbit/s, perftest's average), RoCE packets that
entered each spine from leaf l1 (lanes spread a QP over the spines; one QP in
compatible mode uses one), h1's engine retransmissions and timeouts, the
wall time. Prints one JSON line at the end; progress goes to stderr.

Needs root, the fabric tool, sroced, sroce-run and sroce in --bin, and
ib_write_bw on PATH. The fabric's name is unique to this process."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import perftest_out  # noqa: E402

SPINES = 4
PORT = 18900
REORDER_DELAY_US = [0, 100, 200, 300]  # one-way, per spine (both directions of its links)


def log(msg: str) -> None:
    print(f"[fabric-lossy] {msg}", file=sys.stderr, flush=True)


class Run:
    def __init__(self, bindir: str, name: str, mode: str):
        self.bindir = bindir
        self.fab = os.path.join(bindir, "sroce-fabric")
        self.name = name
        self.cfg = tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False)
        self.cfg.write(f"[engine]\nlossy = {'false' if mode == 'compat' else 'true'}\n")
        # The variants of lossy mode docs/results/lossy.md compares against.
        if mode == "lossy-fixcap":  # the reorder window capped at 50 us (before path skew)
            self.cfg.write("reorder_timeout_max_us = 0\n")
        if mode == "lossy-noweights":  # equal round robin over the lanes
            self.cfg.write("lane_weights = false\n")
        self.cfg.close()
        self.env = dict(os.environ, SROCE_FABRIC_SROCED_CONFIG=self.cfg.name)
        self.procs: list[subprocess.Popen] = []

    def tool(self, *args: str, timeout: float = 180, check: bool = True) -> str:
        p = subprocess.run([self.fab, args[0], "--name", self.name, *args[1:]], text=True,
                           capture_output=True, timeout=timeout, env=self.env)
        if check and p.returncode != 0:
            raise RuntimeError(f"sroce-fabric {' '.join(args)}: exit {p.returncode}\n"
                               f"{p.stdout}{p.stderr}")
        return p.stdout

    def wait_listening(self, port: int, server: subprocess.Popen) -> None:
        """Until the server on h2 listens on TCP `port` (not a sleep a loaded machine can
        outlast); fails if it exits first or takes over 60 s."""
        deadline = time.monotonic() + 60
        while not self.tool("exec", "h2", "--", "ss", "-Hltn", f"sport = :{port}").strip():
            if server.poll() is not None or time.monotonic() > deadline:
                server.kill()
                raise RuntimeError(f"the server did not listen on h2:{port}: "
                                   f"{server.communicate()[0]}")
            time.sleep(0.1)

    def up(self, *extra: str) -> None:
        self.tool("up", "--hosts", "2", "--spines", str(SPINES), "--sroced", *extra)

    def down(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        self.tool("down", check=False)
        os.unlink(self.cfg.name)

    def into_spines(self) -> dict[str, int]:
        st = json.loads(self.tool("status", "--json"))
        dirs = {n: d for lk in st["links"] for n, d in lk["directions"].items()}
        return {n.split(">")[1]: d["counters"].get("roce_packets", 0)
                for n, d in dirs.items() if n.startswith("l1>s")}

    def engine(self, host: str) -> dict:
        out = self.tool("exec", host, "--", os.path.join(self.bindir, "sroce"), "status",
                        "--json", timeout=60)
        return json.loads(out)["engine"]

    def write_bw(self, size: int, iters: int, timeout: float,
                 during=None) -> tuple[float, float, str]:
        """ib_write_bw h1 -> h2; `during` runs on a thread once the client started.
        Returns (Gbit/s, wall seconds, client output)."""
        run = os.path.join(self.bindir, "sroce-run")
        bw = ["timeout", "-k", "5", str(int(timeout)), run, "--", "ib_write_bw", "-F", "-x", "0",
              "--report_gbits", "-p", str(PORT), "-s", str(size), "-n", str(iters), "-q", "1"]
        server = subprocess.Popen([self.fab, "exec", "--name", self.name, "h2", "--", *bw],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                  env=self.env)
        self.procs.append(server)
        self.wait_listening(PORT, server)
        addr = self.tool("addr", "h2").strip()
        t0 = time.monotonic()
        client = subprocess.Popen([self.fab, "exec", "--name", self.name, "h1", "--", *bw, addr],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                  env=self.env)
        self.procs.append(client)
        th = None
        if during:
            th = threading.Thread(target=during, daemon=True)
            th.start()
        out = client.communicate(timeout=timeout + 30)[0]
        wall = time.monotonic() - t0
        sout = server.communicate(timeout=30)[0]
        if th:
            th.join(timeout=60)
        if client.returncode != 0 or server.returncode != 0:
            raise RuntimeError(f"ib_write_bw: client {client.returncode}, server "
                               f"{server.returncode}\n{out}\n--- server:\n{sout}")
        return perftest_out.bw_gbps(out), wall, out

    def pingpong(self, port: int, iters: int, size: int, timeout: float = 120) -> bool:
        """ibv_rc_pingpong -c h1 -> h2: both exit 0, the server found the client's pattern in
        every page (it prints "invalid data" otherwise) and reports every iteration."""
        run = os.path.join(self.bindir, "sroce-run")
        pp = ["timeout", "-k", "5", str(int(timeout)), run, "--", "ibv_rc_pingpong", "-g", "0",
              "-p", str(port), "-s", str(size), "-n", str(iters), "-c"]
        server = subprocess.Popen([self.fab, "exec", "--name", self.name, "h2", "--", *pp],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                  env=self.env)
        self.procs.append(server)
        self.wait_listening(port, server)
        addr = self.tool("addr", "h2").strip()
        c = subprocess.run([self.fab, "exec", "--name", self.name, "h1", "--", *pp, addr],
                           capture_output=True, text=True, timeout=timeout + 30, env=self.env)
        sout = server.communicate(timeout=timeout + 30)[0]
        ok = (c.returncode == 0 and server.returncode == 0 and "invalid data" not in sout
              and f"\n{iters} iters in" in sout)
        if not ok:
            log(f"pingpong failed: client {c.returncode} server {server.returncode}\n"
                f"{c.stdout}{c.stderr}\n--- server:\n{sout}")
        return ok


def one(args, case: str, mode: str) -> dict:
    name = f"sfl{os.getpid() % 100000}"
    r = Run(args.bin, name, mode)
    res: dict = {"case": case, "mode": mode}
    try:
        r.up(*(["--loss", str(args.loss)] if case == "loss" else []))
        if case == "reorder":
            for s, d in enumerate(REORDER_DELAY_US, start=1):
                if d:
                    r.tool("impair", f"s{s}", "--delay", f"{d}us")
        before = r.into_spines()
        eng0 = r.engine("h1")
        during = None
        blackhole = ["impair", "s2", "--loss", "100", "--match", "roce"]
        if case == "blackhole0":
            r.tool(*blackhole)
        if case in ("failure", "blackhole"):
            def during():
                time.sleep(args.fail_after)
                r.tool(*(blackhole if case == "blackhole" else ["impair", "s2", "down"]))
                res["failed_at_s"] = args.fail_after
        # A compatible QP hashed onto the blackholed spine never completes:
        # its retries run out (or perftest waits); a shorter bound then.
        lossy = mode != "compat"
        tmo = args.timeout if not case.startswith("blackhole") or lossy else 60
        try:
            gbps, wall, _ = r.write_bw(args.size, args.iters, tmo, during)
        except (RuntimeError, subprocess.TimeoutExpired) as e:
            if not case.startswith("blackhole") or lossy:
                raise
            res.update({"completed": False, "error": str(e)[-600:]})
            gbps, wall = 0.0, 0.0
        if case.startswith("blackhole"):
            res["data_ok"] = r.pingpong(PORT + 1, 100, 65536) if lossy else None
        after = r.into_spines()
        eng = r.engine("h1")
        res.update({
            "gbps": round(gbps, 3), "wall_s": round(wall, 2),
            "spine_packets": {s: after[s] - before.get(s, 0) for s in sorted(after)},
            "retransmits": eng["retransmits"] - eng0["retransmits"],
            "timeouts": eng["timeouts"] - eng0["timeouts"],
        })
        res.setdefault("completed", True)
        # A blackhole may defeat compatible mode (the reference); lossy mode
        # must complete, with correct data.
        res["ok"] = res["completed"] or not lossy
        if res.get("data_ok") is False:
            res["ok"] = False
    except (RuntimeError, subprocess.TimeoutExpired, ValueError, KeyError) as e:
        res.update({"ok": False, "error": str(e)[-2000:]})
    finally:
        r.down()
    log(json.dumps(res))
    return res


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", default="build/bin")
    ap.add_argument("--loss", type=float, default=1.0, help="%% per leaf-spine link direction")
    ap.add_argument("--size", type=int, default=65536)
    ap.add_argument("--iters", type=int, default=2000)
    ap.add_argument("--timeout", type=float, default=180, help="per ib_write_bw run (s)")
    ap.add_argument("--fail-after", type=float, default=1.0, help="failure case: s2 down after (s)")
    ap.add_argument("--cases", default="clean,loss,reorder,failure,blackhole,blackhole0")
    ap.add_argument("--modes", default="lossy,compat",
                    help="of lossy, compat, lossy-fixcap (reorder window capped at 50 us), "
                    "lossy-noweights (equal round robin)")
    args = ap.parse_args()
    if os.geteuid() != 0:
        log("needs root (network namespaces)")
        return 77
    for f in ("sroce-fabric", "sroced", "sroce-run", "sroce"):
        if not os.access(os.path.join(args.bin, f), os.X_OK):
            log(f"{f} not in {args.bin}")
            return 77
    if not shutil.which("ib_write_bw"):
        log("needs ib_write_bw (perftest)")
        return 77
    runs = [one(args, c, m) for c in args.cases.split(",") for m in args.modes.split(",")]
    by = {(x["case"], x["mode"]): x for x in runs}
    summary: dict = {"bench": "fabric-lossy", "size": args.size, "iters": args.iters,
                     "loss_pct": args.loss, "reorder_delay_us": REORDER_DELAY_US,
                     "ok": all(x["ok"] for x in runs), "runs": runs}
    for c in args.cases.split(","):
        lo, co = by.get((c, "lossy")), by.get((c, "compat"))
        if lo and lo["ok"] and c.startswith("blackhole"):
            summary[f"{c}_gbps_lossy"] = lo["gbps"]
            summary[f"{c}_data_ok"] = lo.get("data_ok")
            if co:
                summary[f"{c}_gbps_compat"] = co["gbps"]
                summary[f"{c}_compat_completed"] = co.get("completed")
            continue
        if lo and co and lo["ok"] and co["ok"] and co["gbps"] > 0:
            summary[f"{c}_gbps_lossy"] = lo["gbps"]
            summary[f"{c}_gbps_compat"] = co["gbps"]
            summary[f"{c}_lossy_over_compat"] = round(lo["gbps"] / co["gbps"], 3)
        for v in ("lossy-fixcap", "lossy-noweights"):
            x = by.get((c, v))
            if x and x["ok"]:
                k = v.replace("-", "_")
                summary[f"{c}_gbps_{k}"] = x["gbps"]
                summary[f"{c}_retransmits_{k}"] = x["retransmits"]
        if lo and lo["ok"]:
            summary[f"{c}_retransmits_lossy"] = lo["retransmits"]
    print(json.dumps(summary), flush=True)
    return 0 if summary["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
