"""`up --sroced`: one sroced per host namespace.

Each host's daemon serves the host's only interface (HOST_IF, eth0) on a
control socket of its own in the run directory, PREFIX/sroced-HOST.sock, so
the daemons of the hosts never share a socket path (all namespaces see the
same file system). `exec HOST` exports SROCE_SOCKET=that path, which both the
provider and sroce-run honour, so `sroce-fabric exec h1 -- sroce-run --
ib_write_bw ...` finds h1's daemon without options.

The journal records the socket paths (state["sroced"]) and every daemon's pid
before it starts, so `down` stops them (SIGTERM: the daemon tells its clients
IBV_EVENT_DEVICE_FATAL and removes its socket) even after a failed `up`.

Environment: SROCE_FABRIC_SROCED overrides the binary; SROCE_FABRIC_SROCED_ARGS
adds arguments (split like a shell would); SROCE_FABRIC_SROCED_CONFIG is the
daemon's TOML file (default /dev/null: the documented defaults, whatever
/etc/sroce/sroced.toml says, so a fabric behaves the same on every machine).

`up --sroced --datapath dpdk[:VDEV]` runs the daemons on the DPDK datapath
(docs/dpdk.md): the af_xdp vdev (default; an XDP program steers UDP 4791 to
it, the kernel keeps ARP/ND) or af_packet on the host's eth0, without
hugepages, polling every 1 ms when idle so that two daemons and the programs
share a small machine."""

from __future__ import annotations

import os
import shlex
import socket
import subprocess
import time

from . import netns
from .topology import HOST_IF, Topology

# A daemon has this long to create its control socket (it binds 4791 and sets
# up io_uring first; on a loaded 2-core machine that can take a while).
STARTUP_TIMEOUT_S = 20.0
# sockaddr_un.sun_path is 108 bytes, NUL included.
MAX_SOCKET_PATH = 107


def sroced_path() -> str:
    explicit = os.environ.get("SROCE_FABRIC_SROCED")
    if explicit:
        return explicit
    return os.path.join(os.environ.get("SROCE_FABRIC_BIN_DIR", ""), "sroced")


def socket_path(run_dir: str, host: str) -> str:
    """The control socket of `host`'s daemon in a fabric whose run directory is `run_dir`."""
    return os.path.join(run_dir, f"sroced-{host}.sock")


DATAPATHS = ("udp", "dpdk", "dpdk:af_xdp", "dpdk:af_packet")


def datapath_args(datapath: str) -> list[str]:
    """sroced --set options selecting `datapath` (one of DATAPATHS)."""
    if datapath not in DATAPATHS:
        raise ValueError(f"--datapath {datapath!r}: expected one of {', '.join(DATAPATHS)}")
    if datapath == "udp":
        return []
    vdev = datapath.partition(":")[2] or "af_xdp"
    sets = ['datapath.kind="dpdk"', f'dpdk.vdev="{vdev}"', "dpdk.sleep_poll_us=1000",
            "dpdk.memory_mb=128", "dpdk.mbufs=8191"]
    return [a for s in sets for a in ("--set", s)]


def sroced_argv(binary: str, topo: Topology, host: str, sock: str,
                datapath: str = "udp") -> list[str]:
    """The daemon's command line on `host`: its GIDs are the addresses of the
    host's only interface; its control socket is `sock`. Extra flags come from
    SROCE_FABRIC_SROCED_ARGS. The environment also carries SROCE_FABRIC_HOST
    and SROCE_FABRIC_PREFIX."""
    topo.host(host)  # raises TopologyError for a name that is not a host
    config = os.environ.get("SROCE_FABRIC_SROCED_CONFIG") or "/dev/null"
    return ([binary, "--config", config, "--netdev", HOST_IF, "--socket", sock]
            + datapath_args(datapath)
            + shlex.split(os.environ.get("SROCE_FABRIC_SROCED_ARGS", "")))


def exec_env(state: dict, host: str) -> dict[str, str]:
    """Variables `exec HOST` adds for the daemon on HOST (none without --sroced)."""
    sock = state.get("sroced", {}).get(host)
    return {"SROCE_SOCKET": sock} if sock else {}


def _answers(path: str) -> bool:
    """True once the daemon accepts connections on `path` (the file alone may
    be a stale one; the daemon replaces those)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        s.settimeout(1.0)
        s.connect(path)
        return True
    except OSError:
        return False
    finally:
        s.close()


def _log_tail(path: str, lines: int = 6) -> str:
    """The end of a daemon's log, for an error message: a failed `up` removes
    the run directory, and the log with it."""
    try:
        with open(path, errors="replace") as f:
            tail = f.readlines()[-lines:]
    except OSError:
        return ""
    return "".join("\n  " + t.rstrip("\n") for t in tail)


def start_all(topo: Topology, rd, state: dict, datapath: str = "udp") -> bool:
    binary = sroced_path()
    if not (os.path.isfile(binary) and os.access(binary, os.X_OK)):
        print(f"sroce-fabric: --sroced: no sroced at {binary or '(SROCE_FABRIC_BIN_DIR unset)'}; "
              "build it (cmake --build BUILD --target sroced); the hosts run without it")
        return False
    hosts = [n for n in topo.nodes.values() if n.kind == "host"]
    socks = {h.name: socket_path(os.path.abspath(rd.path), h.name) for h in hosts}
    too_long = [p for p in socks.values() if len(p.encode()) > MAX_SOCKET_PATH]
    if too_long:
        raise RuntimeError(f"sroced socket path {too_long[0]} is longer than {MAX_SOCKET_PATH} "
                           "bytes; use a shorter SROCE_FABRIC_RUN_DIR or --name")
    state["sroced"] = socks
    state["sroced_datapath"] = datapath
    rd.save(state)
    procs = {}
    for node in hosts:
        log = open(rd.file(f"sroced-{node.name}.log"), "ab")
        argv = netns.ns_exec_argv(node.netns,
                                  sroced_argv(binary, topo, node.name, socks[node.name], datapath))
        env = dict(os.environ, SROCE_FABRIC_HOST=node.name, SROCE_FABRIC_PREFIX=topo.prefix)
        p = subprocess.Popen(argv, stdout=log, stderr=log, stdin=subprocess.DEVNULL, env=env,
                             start_new_session=True)
        log.close()
        state["pids"][f"sroced/{node.name}"] = p.pid
        rd.save(state)
        procs[node.name] = p
    # Ready means answering on its socket: only then can `exec ... sroce-run` use it.
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    waiting = set(procs)
    while waiting:
        dead = sorted(h for h in waiting if procs[h].poll() is not None)
        if dead:
            raise RuntimeError(f"sroced exited (status {procs[dead[0]].returncode}) on "
                               f"{', '.join(dead)}; sroced-{dead[0]}.log ends:"
                               + _log_tail(rd.file(f"sroced-{dead[0]}.log")))
        waiting = {h for h in waiting if not _answers(socks[h])}
        if waiting and time.monotonic() > deadline:
            h = sorted(waiting)[0]
            raise RuntimeError(f"sroced on {h} did not answer on {socks[h]} within "
                               f"{STARTUP_TIMEOUT_S:.0f} s; sroced-{h}.log ends:"
                               + _log_tail(rd.file(f"sroced-{h}.log")))
        if waiting:
            time.sleep(0.05)
    print(f"sroce-fabric: sroced ({datapath} datapath) running on {len(procs)} hosts "
          f"(sockets and logs in {rd.path})")
    return True
