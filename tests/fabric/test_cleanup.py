#!/usr/bin/python3
"""`down` leaves nothing behind: no namespaces, veths, processes, BPF programs
or run directory; also after `up` is killed with SIGKILL half way, after
SIGTERM (the tool cleans up by itself), after a failure inside `up` (likewise),
and when `up` replaces a stale fabric of the same name."""

import json
import os
import re
import signal
import subprocess
import sys
import time

from fabric_test import (PROBE, PY, RUN_ROOT, Fabric, check, main, netns_with_prefix, run_tool,
                         tool, unique_name)

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tools", "sroce-fabric"))
from sroce_fabric import bpfsys  # noqa: E402


# The names a fabric gives its interfaces (topology.py: eth0 on hosts, h<N> / l<N> / s<N> on
# routers). Only these count as "appeared in the root namespace": other tests running beside
# this one (tests/e2e/hosts.sh) create their veth pairs in the root namespace and then move them,
# which a plain before/after diff caught once in a -j2 run.
FABRIC_IFNAME = re.compile(r"^(eth0|[hls][0-9]+)$")


def root_links() -> set[str]:
    out = subprocess.run(["ip", "-j", "link", "show"], capture_output=True, text=True).stdout
    return {d["ifname"] for d in json.loads(out) if FABRIC_IFNAME.match(d["ifname"])}


def state_of(name: str) -> dict | None:
    try:
        with open(os.path.join(RUN_ROOT, name, "state.json")) as f:
            return json.load(f)
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def wait_progs_gone(prog_ids, timeout: float = 10.0) -> bool:
    """Namespaces are destroyed asynchronously (cleanup_net), and with them
    the veths and the tc filters that hold the programs."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(bpfsys.prog_exists(p) for p in prog_ids):
        time.sleep(0.1)
    return not any(bpfsys.prog_exists(p) for p in prog_ids)


def assert_gone(name: str, prog_ids=(), pids=(), links_before=None) -> None:
    check(not netns_with_prefix(name), f"namespaces left: {netns_with_prefix(name)}")
    check(not os.path.exists(os.path.join(RUN_ROOT, name)), f"run directory of {name} left")
    check(wait_progs_gone(prog_ids),
          f"BPF programs still loaded: {[p for p in prog_ids if bpfsys.prog_exists(p)]}")
    alive = [p for p in pids if os.path.exists(f"/proc/{p}") and
             open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()[0] != "Z"]
    check(not alive, f"processes left: {alive}")
    if links_before is not None:
        extra = root_links() - links_before
        check(not extra, f"interfaces appeared in the root namespace: {extra}")


def test() -> None:
    links0 = root_links()

    # --- plain up/down, with a delay line and a stray process on a host --
    f = Fabric("clean", "--delay", "1ms", hosts=2, spines=2)
    f.__enter__()
    st = state_of(f.name)
    progs = list(st["bpf"].values())
    check(len(progs) == 2 * (2 + 2 * 2), f"expected one program per veth end, got {len(progs)}")
    check(all(bpfsys.prog_exists(p) for p in progs), "programs not loaded")
    helpers = list(st["pids"].values())
    check(len(helpers) >= 2, f"expected delay lines on leaves and spines, got {st['pids']}")
    stray = f.spawn("h2", PY, PROBE, "echo", "--timeout", "600")
    stray_pids = [int(x) for x in subprocess.run(["ip", "netns", "pids", f"{f.name}-h2"],
                                                 capture_output=True, text=True).stdout.split()]
    check(stray_pids, "the stray process is not in h2's namespace")
    run_tool("down", "--name", f.name)
    stray.wait(timeout=10)
    assert_gone(f.name, progs, helpers + stray_pids, links0)
    print("up/down: clean")

    # --- up over a stale fabric replaces it -------------------------------
    name = unique_name("stale")
    run_tool("up", "--name", name, "--hosts", "3", "--spines", "2")
    old = list(state_of(name)["bpf"].values())
    out = run_tool("up", "--name", name, "--hosts", "2", "--spines", "2").stdout
    check("cleaning it up first" in out, f"second up did not report the stale fabric: {out}")
    check(netns_with_prefix(name) == sorted(f"{name}-{n}" for n in
                                            ("h1", "h2", "l1", "l2", "s1", "s2")),
          f"after re-up: {netns_with_prefix(name)}")
    check(wait_progs_gone(old), "programs of the stale fabric left")
    run_tool("down", "--name", name)
    assert_gone(name, links_before=links0)
    print("stale up: replaced")

    # --- SIGKILL in the middle of up, then down ---------------------------
    name = unique_name("kill")
    p = subprocess.Popen([tool(), "up", "--name", name, "--hosts", "24", "--spines", "8"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and len(netns_with_prefix(name)) < 20:
        time.sleep(0.005)
    p.send_signal(signal.SIGKILL)
    p.wait()
    st = state_of(name)
    partial = netns_with_prefix(name)
    check(st is not None and st["status"] == "building",
          f"the kill came too late to test a partial fabric: {st and st['status']}")
    check(partial, "nothing was built before the kill")
    print(f"SIGKILL mid-up left {len(partial)} namespaces, "
          f"{len(st['bpf'])} programs recorded; running down")
    run_tool("down", "--name", name)
    assert_gone(name, list(st["bpf"].values()), links_before=links0)

    # --- SIGTERM in the middle of up: the tool removes its partial work ---
    name = unique_name("term")
    p = subprocess.Popen([tool(), "up", "--name", name, "--hosts", "24", "--spines", "8"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and len(netns_with_prefix(name)) < 20:
        time.sleep(0.005)
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=60)
    check(p.returncode != 0, "up survived SIGTERM")
    check("removing the partial fabric" in err, f"no cleanup message: {err}")
    assert_gone(name, links_before=links0)
    print("SIGTERM mid-up: cleaned by the tool itself")

    # --- a failure inside up (a broken BPF object): cleaned likewise ------
    name = unique_name("fail")
    env = dict(os.environ, SROCE_FABRIC_BPF_OBJ="/etc/hostname")
    r = run_tool("up", "--name", name, check_rc=False, env=env)
    check(r.returncode != 0, "up with a broken BPF object succeeded")
    check("removing the partial fabric" in r.stderr, f"no cleanup message: {r.stderr}")
    assert_gone(name, links_before=links0)
    print("failed up: cleaned by the tool itself")


if __name__ == "__main__":
    main(test)
