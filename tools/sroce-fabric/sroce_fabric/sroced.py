"""`up --sroced`: one sroced per host namespace.

This is the hook for the daemon (issue 3): until build/bin/sroced exists it
says so and does nothing. When the daemon lands, adjust `sroced_argv` to its
command line; everything else (a log per host in the run directory, the pid
journalled so `down` stops it, a check that it stayed up) is in place.

Environment: SROCE_FABRIC_SROCED overrides the binary, SROCE_FABRIC_SROCED_ARGS
adds arguments (split like a shell would)."""

from __future__ import annotations

import os
import shlex
import subprocess
import time

from . import netns
from .topology import Topology

STARTUP_CHECK_S = 0.5


def sroced_path() -> str:
    explicit = os.environ.get("SROCE_FABRIC_SROCED")
    if explicit:
        return explicit
    return os.path.join(os.environ.get("SROCE_FABRIC_BIN_DIR", ""), "sroced")


def sroced_argv(binary: str, topo: Topology, host: str) -> list[str]:
    """The daemon's command line on `host` (its only port is HOST_IF); extra
    flags come from SROCE_FABRIC_SROCED_ARGS. The environment also carries
    SROCE_FABRIC_HOST and SROCE_FABRIC_PREFIX."""
    del topo, host
    return [binary] + shlex.split(os.environ.get("SROCE_FABRIC_SROCED_ARGS", ""))


def start_all(topo: Topology, rd, state: dict) -> bool:
    binary = sroced_path()
    if not (os.path.isfile(binary) and os.access(binary, os.X_OK)):
        print(f"sroce-fabric: --sroced: no sroced at {binary or '(SROCE_FABRIC_BIN_DIR unset)'} "
              "yet (issue 3 builds it); the hosts run without it")
        return False
    procs = {}
    for node in topo.nodes.values():
        if node.kind != "host":
            continue
        log = open(rd.file(f"sroced-{node.name}.log"), "ab")
        argv = netns.ns_exec_argv(node.netns, sroced_argv(binary, topo, node.name))
        env = dict(os.environ, SROCE_FABRIC_HOST=node.name, SROCE_FABRIC_PREFIX=topo.prefix)
        p = subprocess.Popen(argv, stdout=log, stderr=log, stdin=subprocess.DEVNULL, env=env,
                             start_new_session=True)
        log.close()
        state["pids"][f"sroced/{node.name}"] = p.pid
        rd.save(state)
        procs[node.name] = p
    time.sleep(STARTUP_CHECK_S)
    dead = [h for h, p in procs.items() if p.poll() is not None]
    if dead:
        raise RuntimeError(f"sroced exited at once on {', '.join(dead)}; see "
                           f"{rd.path}/sroced-{dead[0]}.log")
    print(f"sroce-fabric: sroced running on {len(procs)} hosts (logs in {rd.path})")
    return True
