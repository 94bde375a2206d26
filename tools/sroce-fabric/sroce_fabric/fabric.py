"""Bringing a fabric up and down: namespaces, veth pairs, addresses, routes,
sysctls, the impair programs, and the journal that makes `down` complete."""

from __future__ import annotations

import os
import re
import signal
import sys
import time

from . import delay, impair, netns, sroced
from .state import RunDir
from .topology import Topology

# Every router namespace. Why each one:
ROUTER_SYSCTLS = {
    # forwarding on: leaves and spines are routers.
    "net.ipv4.ip_forward": "1",
    # Policy 3 = hash the fields chosen below, for forwarded and local traffic
    # alike. Policy 1 (L4) would hash a locally generated flow by its socket's
    # random txhash instead of its ports; 3 hashes the real 5-tuple, so a UDP
    # source port (a sroce lane) maps to one spine, every time, on every run.
    "net.ipv4.fib_multipath_hash_policy": "3",
    # 0x37 = source IP | destination IP | IP protocol | source port | destination port.
    "net.ipv4.fib_multipath_hash_fields": "0x37",
    # net.ipv4.fib_multipath_hash_seed (kernel >= 6.11) is set from --hash-seed
    # in _build: a fixed seed makes the port -> spine map the same on every
    # run, so experiments repeat; 0 leaves the kernel's random per-namespace seed.
    # A nexthop whose link lost carrier is skipped, as a switch would.
    "net.ipv4.conf.all.ignore_routes_with_linkdown": "1",
    "net.ipv4.conf.default.ignore_routes_with_linkdown": "1",
}
COMMON_SYSCTLS = {
    # No IPv6: no router solicitations or neighbour discovery muddying the
    # per-spine counters; the fabric is IPv4 (RoCEv2 over IPv4 UDP).
    "net.ipv6.conf.all.disable_ipv6": "1",
    "net.ipv6.conf.default.disable_ipv6": "1",
    # rp_filter off: with multipath, a reply may legitimately arrive on another
    # spine than the one the request left by; strict reverse-path filtering
    # would drop it. The kernel uses max(all, iface), so both are cleared.
    "net.ipv4.conf.all.rp_filter": "0",
    "net.ipv4.conf.default.rp_filter": "0",
}

# Absent when the kernel is built without IPv6: nothing to disable then.
OPTIONAL_SYSCTLS = frozenset({"net.ipv6.conf.all.disable_ipv6",
                              "net.ipv6.conf.default.disable_ipv6"})

DEFAULT_PREFIX = "sf"
DEFAULT_MTU = 9000
DEFAULT_HASH_SEED = 0x73726F63  # "sroc"


class FabricError(RuntimeError):
    pass


def bpf_object() -> str:
    path = os.environ.get("SROCE_FABRIC_BPF_OBJ", "")
    if not path or not os.path.exists(path):
        raise FabricError(f"impair BPF object not found ({path or 'SROCE_FABRIC_BPF_OBJ unset'}); "
                          "build it: cmake --build BUILD --target sroce_fabric (and run "
                          "BUILD/bin/sroce-fabric)")
    return path


def ns_pattern(prefix: str) -> re.Pattern:
    return re.compile(rf"^{re.escape(prefix)}-[hls][0-9]+$")


def topology_from_state(state: dict) -> Topology:
    t = state["topology"]
    return Topology(t["prefix"], t["hosts"], t["spines"], t["hosts_per_leaf"])


def load_up(prefix: str) -> tuple[RunDir, dict, Topology]:
    rd = RunDir(prefix)
    state = rd.load()
    if state is None:
        raise FabricError(f"no fabric {prefix!r} (no {rd.state_path}); run `sroce-fabric up "
                          f"--name {prefix}` first")
    if state.get("status") != "up":
        raise FabricError(f"fabric {prefix!r} is {state.get('status')!r}, not up; run "
                          f"`sroce-fabric down --name {prefix}` and bring it up again")
    return rd, state, topology_from_state(state)


# --- teardown ------------------------------------------------------------------

def teardown(prefix: str, rd: RunDir, state: dict | None, log=print) -> list[str]:
    """Removes everything `up` may have created for `prefix`, whatever state
    it was left in. Returns the namespaces it deleted."""
    names = set((state or {}).get("namespaces", []))
    pat = ns_pattern(prefix)
    names |= {n for n in netns.list_netns() if pat.match(n)}
    # Helper processes first (they live inside the namespaces, and would keep
    # a deleted namespace, and its veths, alive until they exit).
    for pid in (state or {}).get("pids", {}).values():
        if netns.pid_alive(pid) and any("sroce" in a for a in netns.pid_cmdline(pid)):
            netns.kill_pids([pid])
    deleted = []
    for n in sorted(names):
        if netns.netns_exists(n):
            netns.del_netns(n)
            deleted.append(n)
    rd.remove()
    if deleted:
        log(f"sroce-fabric: removed {len(deleted)} namespaces of fabric {prefix!r}")
    return deleted


def down(prefix: str) -> int:
    rd = RunDir(prefix)
    rd.lock()
    try:
        teardown(prefix, rd, rd.load())
    finally:
        rd.unlock(remove=True)
    return 0


# --- bring-up ------------------------------------------------------------------

class Interrupted(BaseException):
    """A signal during `up`; BaseException so that no handler on the way
    swallows it before the partial fabric is removed."""

    def __init__(self, signum: int):
        super().__init__(f"signal {signal.Signals(signum).name}")
        self.signum = signum


def _raise_on_signal(signum, _frame):
    raise Interrupted(signum)


def up(prefix: str, hosts: int, spines: int, hosts_per_leaf: int, mtu: int, keep_gso: bool,
       base: impair.Impairment, start_sroced: bool, hash_seed: int = DEFAULT_HASH_SEED,
       datapath: str = "udp") -> int:
    topo = Topology(prefix, hosts, spines, hosts_per_leaf)
    base.validate()
    obj = bpf_object()
    rd = RunDir(prefix)
    rd.lock()
    failed = False
    try:
        if rd.exists() or any(ns_pattern(prefix).match(n) for n in netns.list_netns()):
            print(f"sroce-fabric: fabric {prefix!r} exists: cleaning it up first")
            teardown(prefix, rd, rd.load())
        state = {
            "version": 1,
            "status": "building",
            "created": time.time(),
            "topology": topo.describe(),
            "options": {"mtu": mtu, "keep_gso": keep_gso, "hash_seed": hash_seed},
            # The journal: every name before it exists (see state.py).
            "namespaces": [n.netns for n in topo.nodes.values()],
            "bpf": {},
            "impair": {},
            "down_links": [],
            "pids": {},
        }
        rd.save(state)
        # Any failure or signal from here on removes what was built. SIGKILL
        # cannot be caught: then `down` (or the next `up`) uses the journal.
        old = {s: signal.signal(s, _raise_on_signal)
               for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
        try:
            _build(topo, rd, state, obj, mtu, keep_gso, hash_seed)
            if not base.is_clear():
                # up's --rate/--delay/--loss/--ce: every leaf-spine direction.
                apply_impairments(topo, rd, state, topo.resolve_links("l*-s*"), base)
            if start_sroced:
                sroced.start_all(topo, rd, state, datapath)
            state["status"] = "up"
            rd.save(state)
        except BaseException as e:
            print(f"sroce-fabric: up failed ({e}); removing the partial fabric", file=sys.stderr)
            for s in old:
                signal.signal(s, signal.SIG_IGN)
            teardown(prefix, rd, state, log=lambda m: print(m, file=sys.stderr))
            failed = True
            raise
        finally:
            for s, h in old.items():
                signal.signal(s, h)
    finally:
        rd.unlock(remove=failed)
    print(f"sroce-fabric: fabric {prefix!r} up: {topo.n_hosts} hosts, {topo.n_leaves} leaves, "
          f"{topo.n_spines} spines")
    for h in range(1, topo.n_hosts + 1):
        print(f"  h{h}  {topo.host_addr(f'h{h}')}  (netns {prefix}-h{h}, leaf {topo.leaf_of(f'h{h}')})")
    return 0


def _build(topo: Topology, rd: RunDir, state: dict, obj: str, mtu: int, keep_gso: bool,
           hash_seed: int) -> None:
    for node in topo.nodes.values():
        netns.add_netns(node.netns)
    seed_key = "net.ipv4.fib_multipath_hash_seed"
    have_seed = os.path.exists("/proc/sys/" + seed_key.replace(".", "/"))
    if hash_seed and not have_seed:
        print("sroce-fabric: this kernel has no fib_multipath_hash_seed; the port -> spine "
              "map is random per run", file=sys.stderr)
    for node in topo.nodes.values():
        settings = dict(COMMON_SYSCTLS)
        if node.router:
            settings.update(ROUTER_SYSCTLS)
            if have_seed:
                settings[seed_key] = str(hash_seed)
        netns.sysctl(node.netns, settings, optional=OPTIONAL_SYSCTLS)

    # veth pairs, created directly in their two namespaces: nothing ever
    # appears in the root namespace, so concurrent fabrics never collide.
    by_creator: dict[str, list[str]] = {}
    for lk in topo.links.values():
        peer_ns = topo.node(lk.b.node).netns
        by_creator.setdefault(topo.node(lk.a.node).netns, []).append(
            f"link add {lk.a.ifname} type veth peer name {lk.b.ifname} netns {peer_ns}")
    for ns, lines in by_creator.items():
        netns.ip_batch(ns, lines)

    for node in topo.nodes.values():
        lines = ["link set dev lo up"]
        for lk in topo.links_of(node.name):
            end = lk.end(node.name)
            lines.append(f"addr add {end.addr}/{end.plen} dev {end.ifname}")
            # Routers segment GSO batches on egress (gso_max_segs 1 forces
            # software GSO), so that past the first hop every skb is one wire
            # packet: loss, marks and counters are then per packet, as in a
            # switch. --keep-gso skips it for raw throughput.
            segs = " gso_max_segs 1" if node.router and not keep_gso else ""
            lines.append(f"link set dev {end.ifname} mtu {mtu}{segs} up")
        netns.ip_batch(node.netns, lines)

    for node in topo.nodes.values():
        lines = []
        for r in topo.routes(node.name):
            hops = " ".join(f"nexthop via {gw} dev {dev}" for gw, dev in r.via)
            if len(r.via) == 1:
                hops = f"via {r.via[0][0]} dev {r.via[0][1]}"
            lines.append(f"route add {r.dst} {hops}")
        netns.ip_batch(node.netns, lines)

    # One impair program (own maps) on the ingress of every interface: the
    # per-direction counters, and the hook for loss and CE marks.
    for node in topo.nodes.values():
        ifaces = [lk.end(node.name).ifname for lk in topo.links_of(node.name)]
        lines = []
        for ifname in ifaces:
            lines.append(f"qdisc add dev {ifname} clsact")
            lines.append(f"filter add dev {ifname} ingress pref 1 bpf da obj {obj} sec tc")
        netns.tc_batch(node.netns, lines)
        for ifname in ifaces:
            pid = netns.tc_filter_prog_id(node.netns, ifname)
            if pid is None:
                raise FabricError(f"{node.netns}/{ifname}: impair program not attached")
            state["bpf"][f"{node.name}/{ifname}"] = pid
    rd.save(state)


# --- impairments ----------------------------------------------------------------

def apply_impairments(topo: Topology, rd: RunDir, state: dict, directions, imp_or_fn) -> None:
    """Sets the impairment of each direction. `imp_or_fn` is an Impairment,
    or a function old -> new for partial updates."""
    mtu = state["options"]["mtu"]
    tc_lines: dict[str, list[str]] = {}
    delay_changed = set()
    for d in directions:
        old = impair.Impairment.from_json(state["impair"].get(d.name))
        new = imp_or_fn(old) if callable(imp_or_fn) else imp_or_fn
        new.validate()
        with impair.ImpairProg(state["bpf"][f"{d.dst.node}/{d.dst.ifname}"]) as prog:
            prog.set(new)
        if (new.rate, new.queue) != (old.rate, old.queue):
            tc_lines.setdefault(topo.node(d.src.node).netns, []).append(
                impair.tbf_command(d.src.ifname, new, mtu))
        if new.delay != old.delay:
            delay_changed.add(d.dst.node)
        if new.is_clear():
            state["impair"].pop(d.name, None)
        else:
            state["impair"][d.name] = new.to_json()
    for ns, lines in tc_lines.items():
        for line in lines:
            # `qdisc del` of a root that is already the default fails; ignore that only.
            proc = netns.run(["tc", "-n", ns] + line.split(), check=False)
            if proc.returncode != 0 and not line.startswith("qdisc del"):
                raise FabricError(f"tc -n {ns} {line}: {proc.stderr.strip()}")
    rd.save(state)
    for node in sorted(delay_changed):
        try:
            delay.configure_node(topo, rd, state, node)
        except BaseException:
            # No delay line runs for `node` now: record no delay there either.
            for name, imp in list(state["impair"].items()):
                if name.endswith(f">{node}") and imp.get("delay"):
                    imp["delay"] = None
                    if impair.Impairment.from_json(imp).is_clear():
                        del state["impair"][name]
            rd.save(state)
            raise
    rd.save(state)


def set_link_admin(topo: Topology, rd: RunDir, state: dict, link: str, up_: bool) -> None:
    lk = topo.links[link]
    for end in (lk.a, lk.b):
        netns.run(["ip", "-n", topo.node(end.node).netns, "link", "set", "dev", end.ifname,
                   "up" if up_ else "down"])
    downs = set(state.get("down_links", []))
    (downs.discard if up_ else downs.add)(link)
    state["down_links"] = sorted(downs)
    if up_:
        # The kernel removed the multipath nexthops of the downed device;
        # bringing the device back does not restore them: re-add the routes.
        for node in (lk.a.node, lk.b.node):
            lines = []
            for r in topo.routes(node):
                hops = [(gw, dev) for gw, dev in r.via
                        if topo.link_at(node, dev).name not in downs]
                if len(hops) > 1:
                    lines.append(f"route replace {r.dst} "
                                 + " ".join(f"nexthop via {gw} dev {dev}" for gw, dev in hops))
                elif hops:
                    lines.append(f"route replace {r.dst} via {hops[0][0]} dev {hops[0][1]}")
            netns.ip_batch(topo.node(node).netns, lines)
    rd.save(state)
