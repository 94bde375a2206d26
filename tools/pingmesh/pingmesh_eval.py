#!/usr/bin/python3
"""pingmesh on the namespace fabric: five scenarios, one JSON line (make pingmesh-eval).

A fabric of 4 hosts under 2 leaves over 4 spines, sroced on every host, and a
`sroce pingmesh agent` per host under sroce-run. After a clean baseline, in turn:

  clean       nothing changes                          expected: nothing blamed
  spine_loss  5 % loss both ways on l2-s3               expected: l2-s3/link
  dead_link   l1-s2 down                               expected: l1-s2/link
  slow_nic    h2's link shaped to 48 kbit/s (tbf)      expected: h2/host
  busy_host   h4's agent SIGSTOPped 400 ms of every 500 expected: h4/host_delay

Each fault lasts FAULT_S seconds, then is removed and the fabric rests
REST_S seconds (longer than the analyzer's window) before the next. One
`sroce pingmesh analyze --timeline` over all agents' JSON lines judges every
second; a scenario is correct when, within FAULT_S of the fault, the expected
element (and nothing else) was blamed. Prints one JSON line; --check exits 1
unless all_correct and no false blame in the clean run.

Needs root and build/bin/{sroce,sroced,sroce-run,sroce-fabric}."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

SKIP = 77
FAULT_S = 20.0
REST_S = 14.0
BASELINE_S = 12.0

SCENARIOS = [
    ("clean", None),
    ("spine_loss", "l2-s3/link"),
    ("dead_link", "l1-s2/link"),
    ("slow_nic", "h2/host"),
    ("busy_host", "h4/host_delay"),
]


def log(msg: str) -> None:
    print(f"[pingmesh-eval {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


class Run:
    def __init__(self, bindir: str, name: str, work: str):
        self.bin = bindir
        self.name = name
        self.work = work
        self.fabric = os.path.join(bindir, "sroce-fabric")
        self.agents: dict[str, subprocess.Popen] = {}
        self.pids: dict[str, int] = {}

    def tool(self, *args: str, check: bool = True, timeout: float = 120) -> str:
        p = subprocess.run([self.fabric, args[0], "--name", self.name, *args[1:]], text=True,
                           capture_output=True, timeout=timeout)
        if check and p.returncode != 0:
            raise RuntimeError(f"sroce-fabric {' '.join(args)}: {p.returncode}\n{p.stdout}{p.stderr}")
        return p.stdout

    def up(self) -> dict:
        self.tool("up", "--hosts", "4", "--spines", "4", "--hosts-per-leaf", "2", "--sroced",
                  timeout=300)
        status = json.loads(self.tool("status", "--json"))
        # Routers answer every TTL-limited probe: Linux's ICMP rate limit (1/s per
        # destination after a burst of 6) would starve the path traces of 4 agents.
        for node in sorted({lk[e]["node"] for lk in status["links"] for e in ("a", "b")}):
            if node[0] in "ls":
                subprocess.run(["ip", "netns", "exec", f"{self.name}-{node}", "sysctl", "-qw",
                                "net.ipv4.icmp_ratelimit=0"], check=True)
        with open(os.path.join(self.work, "topology.json"), "w") as f:
            json.dump(status, f)
        return status

    def pinglists(self) -> None:
        os.makedirs(os.path.join(self.work, "pl"), exist_ok=True)
        subprocess.run([os.path.join(self.bin, "sroce"), "pingmesh", "pinglist", "--topology",
                        os.path.join(self.work, "topology.json"), "--out-dir",
                        os.path.join(self.work, "pl"), "--timeout-ms", "2000"], check=True)

    def start_agents(self, hosts: list[str], duration: float) -> None:
        reg = os.path.join(self.work, "registry")
        os.makedirs(reg, exist_ok=True)
        for h in hosts:
            out = os.path.join(self.work, f"{h}.jsonl")
            argv = [self.fabric, "exec", "--name", self.name, h, "--",
                    os.path.join(self.bin, "sroce-run"), "--",
                    os.path.join(self.bin, "sroce"), "pingmesh", "agent",
                    "--pinglist", os.path.join(self.work, "pl", f"{h}.json"),
                    "--registry", reg, "--out", out,
                    "--metrics", os.path.join(self.work, f"{h}.prom"),
                    "--duration", str(duration)]
            err = open(os.path.join(self.work, f"{h}.err"), "w")
            self.agents[h] = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err)
        deadline = time.time() + 60
        while len(self.pids) < len(hosts) and time.time() < deadline:
            for h in hosts:
                if h in self.pids:
                    continue
                if self.agents[h].poll() is not None:
                    raise RuntimeError(f"agent on {h} exited {self.agents[h].returncode}: "
                                       f"{open(os.path.join(self.work, h + '.err')).read()}")
                try:
                    with open(os.path.join(self.work, f"{h}.jsonl")) as f:
                        first = f.readline()
                    if first:
                        self.pids[h] = json.loads(first)["pid"]
                except (FileNotFoundError, json.JSONDecodeError, KeyError):
                    pass
            time.sleep(0.2)
        if len(self.pids) < len(hosts):
            raise RuntimeError(f"agents did not start: {sorted(set(hosts) - set(self.pids))}")

    def ok_targets(self, h: str) -> set[str]:
        seen = set()
        with open(os.path.join(self.work, f"{h}.jsonl")) as f:
            for line in f:
                if '"status":"ok"' in line:
                    seen.add(json.loads(line)["dst"])
        return seen

    def stop_agents(self) -> None:
        for h, pid in self.pids.items():
            try:
                os.kill(pid, signal.SIGCONT)
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        for h, p in self.agents.items():
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

    def down(self) -> None:
        self.tool("down", check=False)


def busy_bursts(pid: int, seconds: float, stop_s: float = 0.4, run_s: float = 0.1) -> None:
    end = time.time() + seconds
    try:
        while time.time() < end:
            os.kill(pid, signal.SIGSTOP)
            time.sleep(stop_s)
            os.kill(pid, signal.SIGCONT)
            time.sleep(run_s)
    finally:
        try:
            os.kill(pid, signal.SIGCONT)
        except ProcessLookupError:
            pass


def judge(steps: list[dict], t0: float, t1: float, expected: str | None) -> dict:
    """blamed: every label named in [t0, t1]. A group naming the expected element among
    others ("l1-s3|l2-s3/link": the probes could not yet separate them) is listed under
    ambiguous, not counted as a wrong blame; anything else is wrong."""
    blamed: list[str] = []
    ambiguous: list[str] = []
    detect = None
    exp_elem, _, exp_kind = (expected or "").partition("/")
    for s in steps:
        if s["t"] < t0 or s["t"] > t1:
            continue
        for b in s["blames"]:
            label = f"{b['element']}/{b['kind']}"
            if expected and label != expected and b["kind"] == exp_kind and \
                    exp_elem in b["element"].split("|"):
                if label not in ambiguous:
                    ambiguous.append(label)
                continue
            if label not in blamed:
                blamed.append(label)
            if label == expected and detect is None:
                detect = round(s["t"] - t0, 1)
    if expected is None:
        correct = not blamed and not ambiguous
    else:
        correct = blamed == [expected] and detect is not None and detect <= FAULT_S
    return {"blamed": blamed, "ambiguous": ambiguous, "expected": expected or "nothing",
            "correct": correct, "detect_s": detect}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.path.join(os.path.dirname(__file__), "../../build/bin"))
    ap.add_argument("--check", action="store_true", help="exit 1 unless every scenario is correct")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    ap.add_argument("--only", help="comma-separated scenarios (default: all)")
    a = ap.parse_args()
    # A SIGTERM (ctest's timeout, a kill) unwinds through the finally below, which stops the
    # agents and removes the fabric, instead of leaving ten namespaces behind.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    bindir = os.path.abspath(a.bin)
    if os.geteuid() != 0:
        print("SKIP: needs root (network namespaces)")
        return SKIP
    missing = [b for b in ("sroce", "sroced", "sroce-run", "sroce-fabric")
               if not os.access(os.path.join(bindir, b), os.X_OK)]
    if missing:
        print(f"SKIP: {', '.join(missing)} not built in {bindir}")
        return SKIP
    scenarios = [s for s in SCENARIOS if not a.only or s[0] in a.only.split(",")]
    work = tempfile.mkdtemp(prefix="sroce-pingmesh-")
    run = Run(bindir, f"pm{os.getpid() % 1000000}", work)
    result: dict = {}
    rc = 1
    try:
        log(f"fabric {run.name} up (work dir {work})")
        run.up()
        run.pinglists()
        hosts = ["h1", "h2", "h3", "h4"]
        total = 30 + BASELINE_S + len(scenarios) * (FAULT_S + REST_S) + 30
        run.start_agents(hosts, total)
        # Warm-up: every agent answered by every peer, paths traced.
        deadline = time.time() + 30
        while time.time() < deadline and not all(len(run.ok_targets(h)) == 3 for h in hosts):
            time.sleep(1)
        time.sleep(3)
        b0 = time.time()
        log("baseline")
        time.sleep(BASELINE_S)
        b1 = time.time()
        marks = []
        for name, expected in scenarios:
            t0 = time.time()
            log(f"scenario {name}")
            if name == "spine_loss":
                run.tool("impair", "l2-s3", "--loss", "5")
            elif name == "dead_link":
                run.tool("impair", "l1-s2", "down")
            elif name == "slow_nic":
                run.tool("impair", "h2-l1", "--rate", "48kbit", "--queue", "4kb")
            if name == "busy_host":
                busy_bursts(run.pids["h4"], FAULT_S)
            else:
                time.sleep(max(0.0, FAULT_S - (time.time() - t0)))
            t1 = time.time()
            if name == "spine_loss":
                run.tool("impair", "l2-s3", "clear")
            elif name == "dead_link":
                run.tool("impair", "l1-s2", "up")
            elif name == "slow_nic":
                run.tool("impair", "h2-l1", "clear")
            marks.append((name, expected, t0, t1))
            time.sleep(REST_S)
        run.stop_agents()
        files = [os.path.join(work, f"{h}.jsonl") for h in hosts]
        p = subprocess.run([os.path.join(bindir, "sroce"), "pingmesh", "analyze", "--topology",
                            os.path.join(work, "topology.json"), "--timeline", "--json",
                            "--baseline-from", f"{b0:.3f}", "--baseline-to", f"{b1:.3f}",
                            "--from", f"{b1:.3f}", *files], text=True, capture_output=True,
                           timeout=600)
        if p.returncode != 0:
            raise RuntimeError(f"analyze failed: {p.stderr}")
        an = json.loads(p.stdout)
        steps = an["steps"]
        out = []
        for name, expected, t0, t1 in marks:
            j = judge(steps, t0, t0 + FAULT_S, expected)
            out.append({"scenario": name, **j})
        probes = ok = 0
        ts = set()
        for f in files:
            with open(f) as fh:
                for line in fh:
                    r = json.loads(line)
                    if r["type"] == "probe":
                        probes += 1
                        ok += r["status"] == "ok"
                    elif r["type"] == "start":
                        ts.add(r["timestamps"])
        clean = [o for o in out if o["scenario"] == "clean"]
        result = {"bench": "pingmesh-eval", "fabric": "4 hosts, 2 leaves, 4 spines",
                  "window_s": an["window_s"], "scenarios": out,
                  "probes": probes, "probes_ok": ok, "timestamps": sorted(ts),
                  "all_correct": all(o["correct"] for o in out),
                  "false_blames_clean": len(clean[0]["blamed"]) if clean else None}
        print(json.dumps(result), flush=True)
        rc = 0 if (not a.check or (result["all_correct"] and not result["false_blames_clean"])) else 1
    except Exception as e:  # noqa: BLE001 - report, clean up, fail
        log(f"FAILED: {e}")
        rc = 1
    finally:
        for h, pid in run.pids.items():
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
        for p in run.agents.values():
            if p.poll() is None:
                p.kill()
        run.down()
        if a.keep or rc != 0:
            log(f"work dir kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
