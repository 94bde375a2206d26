"""Shared helpers of the fabric tests: run the built tool, bring a uniquely
named fabric up and down, run udp_probe.py on hosts, read counters.

Each test is a script run by ctest; it exits 0 on success, 1 with a message on
the first failed check, and 77 (ctest SKIP) when it cannot run here (not
root, tool not built)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PROBE = os.path.join(HERE, "udp_probe.py")
PY = "/usr/bin/python3"
SKIP = 77
RUN_ROOT = os.environ.get("SROCE_FABRIC_RUN_DIR", "/run/sroce-fabric")


class CheckFailed(AssertionError):
    pass


def check(cond: bool, msg: str) -> None:
    if not cond:
        raise CheckFailed(msg)


def tool() -> str:
    return os.environ.get("SROCE_FABRIC", "sroce-fabric")


def require_root() -> None:
    if os.geteuid() != 0:
        print("SKIP: needs root (network namespaces)")
        sys.exit(SKIP)
    t = tool()
    if os.sep in t and not os.access(t, os.X_OK):
        print(f"SKIP: {t} not built")
        sys.exit(SKIP)


def unique_name(tag: str) -> str:
    """A fabric name no concurrent test uses: tag + pid (lowercase, <= 12)."""
    return f"{tag[:5]}{os.getpid() % 10_000_000}"


def run_tool(*args: str, check_rc: bool = True, timeout: float = 120,
             env: dict | None = None) -> subprocess.CompletedProcess:
    p = subprocess.run([tool(), *args], text=True, capture_output=True, timeout=timeout,
                       env=env)
    if check_rc and p.returncode != 0:
        raise CheckFailed(f"sroce-fabric {' '.join(args)}: exit {p.returncode}\n"
                          f"{p.stdout}{p.stderr}")
    return p


def netns_with_prefix(prefix: str) -> list[str]:
    try:
        names = os.listdir("/run/netns")
    except FileNotFoundError:
        return []
    return sorted(n for n in names if n.startswith(prefix + "-"))


class Fabric:
    """`with Fabric("mp", hosts=2, spines=4) as f:` -> up on enter, down on exit."""

    def __init__(self, tag: str, *up_args: str, **opts):
        self.name = unique_name(tag)
        self.up_args = [f"--{k.replace('_', '-')}={v}" for k, v in opts.items()] + list(up_args)
        self.procs: list[subprocess.Popen] = []

    def __enter__(self) -> "Fabric":
        run_tool("up", "--name", self.name, *self.up_args)
        return self

    def __exit__(self, *exc) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        run_tool("down", "--name", self.name, check_rc=False)

    def tool(self, *args: str, **kw) -> subprocess.CompletedProcess:
        return run_tool(args[0], "--name", self.name, *args[1:], **kw)

    def state(self) -> dict:
        """The tool's journal (state.json) of this fabric."""
        with open(os.path.join(RUN_ROOT, self.name, "state.json")) as f:
            return json.load(f)

    def status(self) -> dict:
        return json.loads(self.tool("status", "--json").stdout)

    def addr(self, host: str) -> str:
        return self.tool("addr", host).stdout.strip()

    def exec(self, host: str, *argv: str, timeout: float = 120) -> str:
        return self.tool("exec", host, "--", *argv, timeout=timeout).stdout

    def spawn(self, host: str, *argv: str) -> subprocess.Popen:
        """Starts argv on host; waits for its "ready" line."""
        p = subprocess.Popen([tool(), "exec", "--name", self.name, host, "--", *argv],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.procs.append(p)
        line = p.stdout.readline()
        if line.strip() != "ready":
            p.kill()
            raise CheckFailed(f"{' '.join(argv)} on {host} did not start: {line}"
                              f"{p.stderr.read()}")
        return p

    def probe_recv(self, host: str, *args: str) -> subprocess.Popen:
        return self.spawn(host, PY, PROBE, "recv", *args)

    def probe_send(self, host: str, *args: str) -> dict:
        return json.loads(self.exec(host, PY, PROBE, "send", *args))

    def probe_ping(self, host: str, *args: str) -> dict:
        return json.loads(self.exec(host, PY, PROBE, "ping", *args))

    @staticmethod
    def finish(p: subprocess.Popen, timeout: float = 60) -> dict:
        out, err = p.communicate(timeout=timeout)
        check(p.returncode == 0, f"receiver failed: {err}")
        return json.loads(out.strip().splitlines()[-1])

    def spine_udp(self) -> dict[str, int]:
        return {s: c["udp_packets"] for s, c in self.status()["spines"].items()}

    def directions(self) -> dict[str, dict]:
        """Every link direction ("l1>s2") -> its impairment and counters, from one status."""
        return {n: d for lk in self.status()["links"] for n, d in lk["directions"].items()}

    def direction(self, name: str) -> dict:
        try:
            return self.directions()[name]
        except KeyError:
            raise CheckFailed(f"no direction {name} in status") from None

    def udp_on(self, names: list[str]) -> dict[str, int]:
        """UDP packets counted at the receiving end of each named direction."""
        dirs = self.directions()
        return {n: dirs[n]["counters"]["udp_packets"] for n in names}


def binomial_bounds(n: int, p: float, sigmas: float = 5.0) -> tuple[float, float]:
    """[lo, hi] for the count of successes of n Bernoulli(p) draws: mean +- k sd.
    At 5 sigma a correct implementation fails about once in 1.7 million runs."""
    mean = n * p
    sd = math.sqrt(n * p * (1 - p))
    return mean - sigmas * sd, mean + sigmas * sd


def main(fn) -> None:
    require_root()
    t0 = time.monotonic()
    try:
        fn()
    except CheckFailed as e:
        print(f"FAIL: {e}")
        sys.exit(1)
    print(f"PASS ({time.monotonic() - t0:.1f} s)")
    sys.exit(0)
