"""sroce-fabric: hosts and a multipath leaf/spine fabric on one machine.

  sroce-fabric up [--hosts N] [--spines S] [--rate R] [--delay D] [--loss P] [--name PREFIX]
                  [--sroced [--datapath udp|dpdk|dpdk:af_packet]]
  sroce-fabric exec HOST -- CMD...          (with up --sroced: SROCE_SOCKET is HOST's daemon)
  sroce-fabric impair LINK [--loss P] [--ce P] [--rate R] [--delay D] [down|up|clear]
  sroce-fabric addr HOST
  sroce-fabric status [--json]
  sroce-fabric down

See docs/fabric.md."""

from __future__ import annotations

import argparse
import os
import sys

from . import fabric, impair, netns, sroced, status
from .state import RunDir, run_root
from .topology import TopologyError

# The MTU with --datapath dpdk: veth runs XDP only on frames of one page, and
# DPDK's mbufs without hugepages hold RoCE MTU 2048 (docs/dpdk.md).
DPDK_MTU = 3000


def _percent(what: str):
    def conv(text: str) -> float:
        try:
            return netns.parse_percent(text, what)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from None
    return conv


def _parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--name", default=os.environ.get("SROCE_FABRIC_NAME", fabric.DEFAULT_PREFIX),
                        help="fabric name: prefixes its namespaces (PREFIX-h1, ...) and names "
                        "its run directory (default $SROCE_FABRIC_NAME or %(default)s)")
    ap = argparse.ArgumentParser(prog="sroce-fabric", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)

    p = sub.add_parser("up", parents=[common], help="create the fabric (replacing a stale one)")
    p.add_argument("--hosts", type=int, default=2)
    p.add_argument("--spines", type=int, default=4)
    p.add_argument("--hosts-per-leaf", type=int, default=1,
                   help="hosts under one leaf (default 1: every host pair crosses the spines)")
    p.add_argument("--rate", help="rate of every leaf-spine link direction (tbf), e.g. 10gbit")
    p.add_argument("--queue", help="queue of those links at --rate: bytes (256kb) or time (2ms)")
    p.add_argument("--delay", help="one-way delay of every leaf-spine link direction, e.g. 200us "
                   "(a host-to-host path crosses two: leaf>spine, spine>leaf)")
    p.add_argument("--loss", type=_percent("--loss"), default=0.0,
                   help="random loss %% of every leaf-spine link direction")
    p.add_argument("--ce", type=_percent("--ce"), default=0.0,
                   help="random CE-mark %% of every leaf-spine link direction")
    p.add_argument("--mtu", type=int, default=None,
                   help=f"MTU of every veth (default {fabric.DEFAULT_MTU}: RoCE MTU 4096 fits; "
                   f"{DPDK_MTU} with --datapath dpdk: XDP on veth takes frames of one page)")
    p.add_argument("--keep-gso", action="store_true",
                   help="let routers forward GSO batches whole (faster; loss and counters "
                   "then act per batch)")
    p.add_argument("--hash-seed", type=lambda x: int(x, 0), default=fabric.DEFAULT_HASH_SEED,
                   help="multipath hash seed of every router (0: random per namespace); fixed "
                   "by default so a source port takes the same spine on every run")
    p.add_argument("--sroced", action="store_true",
                   help="start sroced on every host (exec then sets SROCE_SOCKET to its socket)")
    p.add_argument("--datapath", default="udp", choices=sroced.DATAPATHS,
                   help="sroced's datapath with --sroced: the UDP sockets (default) or DPDK "
                   "(af_xdp vdev, or dpdk:af_packet) on each host's eth0")

    sub.add_parser("down", parents=[common], help="remove the fabric and everything it started")

    p = sub.add_parser("exec", parents=[common], help="run CMD in HOST's namespace",
                       usage="sroce-fabric exec [--name PREFIX] HOST -- CMD...")
    p.add_argument("host")

    p = sub.add_parser("addr", parents=[common], help="print HOST's address")
    p.add_argument("host")

    p = sub.add_parser("status", parents=[common], help="links, impairments, per-spine counters")
    p.add_argument("--json", action="store_true")

    sub.add_parser("list", help="fabrics with a run directory")

    p = sub.add_parser("impair", parents=[common], help="change the impairments of links",
                       description="LINK is 'l1-s2' (both directions), 'l1>s2' (one direction), "
                       "a node ('s2': all its links) or 'all'. Options not given keep their "
                       "value; 'clear' resets all of them first.")
    p.add_argument("link")
    p.add_argument("actions", nargs="*", metavar="down|up|clear")
    p.add_argument("--loss", type=_percent("--loss"), help="random loss %%")
    p.add_argument("--ce", type=_percent("--ce"), help="CE-mark %% of ECN-capable packets")
    p.add_argument("--match", choices=sorted(impair.MATCHES),
                   help="packets loss and CE apply to (default ipv4: all but ARP)")
    p.add_argument("--drop-not-ect", action=argparse.BooleanOptionalAction, default=None,
                   help="drop instead of pass a non-ECT packet picked for a CE mark")
    p.add_argument("--rate", help="egress rate (tbf), 'none' to remove")
    p.add_argument("--queue", help="queue at --rate: bytes (256kb) or time (2ms)")
    p.add_argument("--delay", help="fixed one-way delay, '0' to remove")
    return ap


def _cmd_up(a) -> int:
    base = impair.Impairment(loss=a.loss, ce=a.ce, rate=a.rate, queue=a.queue, delay=a.delay)
    if a.mtu is None:
        a.mtu = DPDK_MTU if a.datapath.startswith("dpdk") else fabric.DEFAULT_MTU
    elif a.datapath.startswith("dpdk") and a.mtu > DPDK_MTU:
        raise ValueError(f"--mtu {a.mtu} with --datapath {a.datapath}: at most {DPDK_MTU} (an XDP "
                         "program on veth takes frames that fit one page, and the af_xdp and "
                         "af_packet vdevs run without hugepages: docs/dpdk.md)")
    if a.mtu < 1280 or a.mtu > 65535:
        raise ValueError(f"--mtu {a.mtu}: expected 1280..65535")
    if not 0 <= a.hash_seed < 1 << 32:
        raise ValueError(f"--hash-seed {a.hash_seed}: expected a 32-bit value")
    if a.datapath != "udp" and not a.sroced:
        raise ValueError(f"--datapath {a.datapath} needs --sroced")
    return fabric.up(a.name, a.hosts, a.spines, a.hosts_per_leaf, a.mtu, a.keep_gso, base,
                     a.sroced, a.hash_seed, a.datapath)


def _cmd_impair(a) -> int:
    for act in a.actions:
        if act not in ("down", "up", "clear"):
            raise ValueError(f"impair: unknown action {act!r}: expected down, up or clear")
    rd, state, topo = fabric.load_up(a.name)
    rd.lock()
    try:
        state = rd.load()
        directions = topo.resolve_links(a.link)

        def update(old: impair.Impairment) -> impair.Impairment:
            new = impair.Impairment() if "clear" in a.actions else impair.Impairment(**old.to_json())
            for field in ("loss", "ce", "match", "drop_not_ect", "queue"):
                if getattr(a, field) is not None:
                    setattr(new, field, getattr(a, field))
            if a.rate is not None:
                new.rate = None if a.rate == "none" else a.rate
            if a.delay is not None:
                new.delay = None if a.delay in ("0", "none") else a.delay
            return new

        fabric.apply_impairments(topo, rd, state, directions, update)
        for act in a.actions:
            if act in ("down", "up"):
                for link in sorted({d.link for d in directions}):
                    fabric.set_link_admin(topo, rd, state, link, act == "up")
        for d in directions:
            imp = state["impair"].get(d.name, {})
            down = " (link down)" if d.link in state.get("down_links", []) else ""
            print(f"{d.name:<8} {status.impairment_text(imp)}{down}")
    finally:
        rd.unlock()
    return 0


def _cmd_exec(a, argv: list[str]) -> int:
    if not argv:
        raise ValueError("exec: expected HOST -- CMD...")
    _rd, state, topo = fabric.load_up(a.name)
    node = topo.host(a.host)
    os.environ["SROCE_FABRIC_HOST"] = node.name
    os.environ["SROCE_FABRIC_PREFIX"] = a.name
    # With `up --sroced`: SROCE_SOCKET names this host's daemon, for the
    # provider and sroce-run (it replaces an inherited value, which would
    # name some other daemon).
    os.environ.update(sroced.exec_env(state, node.name))
    sys.stdout.flush()
    os.execvp("ip", netns.ns_exec_argv(node.netns, argv))
    return 127  # not reached


def _cmd_addr(a) -> int:
    _rd, _state, topo = fabric.load_up(a.name)
    print(topo.host_addr(a.host))
    return 0


def _cmd_list(_a) -> int:
    try:
        names = sorted(n for n in os.listdir(run_root()) if not n.startswith("."))
    except FileNotFoundError:
        names = []
    for n in names:
        st = RunDir(n).load() or {}
        t = st.get("topology", {})
        print(f"{n:<14} {st.get('status', '?'):<9} hosts {t.get('hosts', '?')} "
              f"spines {t.get('spines', '?')}")
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # `exec HOST -- CMD...`: everything after the first "--" is the command,
    # options of its own included.
    cmd_argv: list[str] = []
    if argv[:1] == ["exec"] and "--" in argv:
        i = argv.index("--")
        argv, cmd_argv = argv[:i], argv[i + 1:]
    a = _parser().parse_args(argv)
    if os.geteuid() != 0 and a.cmd not in ("list",):
        print("sroce-fabric: must run as root (it creates network namespaces)", file=sys.stderr)
        return 1
    try:
        if a.cmd == "up":
            return _cmd_up(a)
        if a.cmd == "down":
            return fabric.down(a.name)
        if a.cmd == "exec":
            return _cmd_exec(a, cmd_argv)
        if a.cmd == "addr":
            return _cmd_addr(a)
        if a.cmd == "status":
            return status.show(a.name, a.json)
        if a.cmd == "impair":
            return _cmd_impair(a)
        if a.cmd == "list":
            return _cmd_list(a)
    except fabric.Interrupted as e:
        return 128 + e.signum
    except BrokenPipeError:
        # Output cut short by a reader that left (`| head`): not an error of ours.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except (TopologyError, fabric.FabricError, netns.CommandError, ValueError, TimeoutError,
            OSError, RuntimeError) as e:
        print(f"sroce-fabric: error: {e}", file=sys.stderr)
        return 1
    return 2


__all__ = ["main"]
