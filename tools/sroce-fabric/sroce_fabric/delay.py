"""Starting and stopping the delay line (delayline.py) of a node: one process
per namespace that has at least one delayed ingress interface, restarted
whenever that node's delays change."""

from __future__ import annotations

import os
import select
import subprocess
import sys
import time

from . import netns
from .impair import Impairment
from .netns import parse_time_s
from .topology import Topology

READY_TIMEOUT_S = 10.0


def _package_parent() -> str:
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def node_delays(topo: Topology, state: dict, node: str) -> list[tuple[str, float]]:
    """(ingress ifname, seconds) for every direction arriving at `node` with a delay."""
    out = []
    for lk in topo.links_of(node):
        end, other = lk.end(node), lk.other(node)
        imp = Impairment.from_json(state["impair"].get(f"{other.node}>{node}"))
        if imp.delay:
            out.append((end.ifname, parse_time_s(imp.delay)))
    return sorted(out)


def stop_node(state: dict, node: str) -> None:
    pid = state["pids"].pop(f"delay/{node}", None)
    if pid and netns.pid_alive(pid) and any("delayline" in a for a in netns.pid_cmdline(pid)):
        netns.kill_pids([pid], grace=2.0)


def configure_node(topo: Topology, rd, state: dict, node: str) -> None:
    stop_node(state, node)
    delays = node_delays(topo, state, node)
    if not delays:
        return
    ns = topo.node(node).netns
    argv = [sys.executable, "-m", "sroce_fabric.delayline"]
    for qnum, (ifname, seconds) in enumerate(delays, start=1):
        argv += ["--queue", f"{ifname}:{qnum}:{seconds:.9f}"]
    env = dict(os.environ, PYTHONPATH=_package_parent())
    log = open(rd.file(f"delay-{node}.log"), "ab")
    proc = subprocess.Popen(netns.ns_exec_argv(ns, argv), stdout=subprocess.PIPE, stderr=log,
                            stdin=subprocess.DEVNULL, env=env, start_new_session=True)
    log.close()
    # Journal the pid before waiting, so a kill now still leaves it findable.
    state["pids"][f"delay/{node}"] = proc.pid
    rd.save(state)
    deadline = time.monotonic() + READY_TIMEOUT_S
    line = b""
    while time.monotonic() < deadline and proc.poll() is None:
        r, _, _ = select.select([proc.stdout], [], [], 0.1)
        if r:
            line = proc.stdout.readline()
            break
    proc.stdout.close()
    if line.strip() != b"ready":
        netns.kill_pids([proc.pid])
        try:
            with open(rd.file(f"delay-{node}.log")) as f:
                tail = f.read()[-800:]
        except OSError:
            tail = ""
        raise RuntimeError(f"delay line of {node} did not start: {tail.strip()}")
