"""The shape of a fabric: nodes, links, addresses and routes, computed from
(hosts, spines, hosts per leaf) without touching the system.

    h1 ── l1 ──┬── s1 ──┬── l2 ── h2        hosts hang off leaves,
               ├── s2 ──┤                   every leaf connects to every spine,
               ├── s3 ──┤                   leaves route to remote hosts over an
               └── s4 ──┘                   L4-hashed multipath default route.

Addresses (all /24 or /30, IPv4 only):
  host hI        10.1.I.2/24 on eth0, its leaf's side 10.1.I.1/24 on iface "hI"
  leaf lJ-spine sK   leaf side 10.2.J.(4K+1)/30 on iface "sK",
                     spine side 10.2.J.(4K+2)/30 on iface "lJ"
Interface names are the name of the node at the other end, so inside a
namespace `ip link` reads as a map of the neighbours.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import re

MAX_HOSTS = 254
MAX_LEAVES = 254
MAX_SPINES = 62  # 4K+2 must stay below 256 in the /30 plan above
PREFIX_RE = re.compile(r"^[a-z][a-z0-9]{0,11}$")
HOST_IF = "eth0"


class TopologyError(ValueError):
    pass


@dataclasses.dataclass(frozen=True)
class Node:
    name: str  # h1, l1, s1
    kind: str  # "host" | "leaf" | "spine"
    index: int
    netns: str  # PREFIX-name

    @property
    def router(self) -> bool:
        return self.kind != "host"


@dataclasses.dataclass(frozen=True)
class End:
    node: str
    ifname: str
    addr: str  # "10.1.1.2"
    plen: int


@dataclasses.dataclass(frozen=True)
class Link:
    name: str  # "h1-l1", "l1-s2": lower tier first
    a: End
    b: End

    def end(self, node: str) -> End:
        if node == self.a.node:
            return self.a
        if node == self.b.node:
            return self.b
        raise TopologyError(f"link {self.name} does not touch {node}")

    def other(self, node: str) -> End:
        return self.b if node == self.a.node else self.a


@dataclasses.dataclass(frozen=True)
class Direction:
    """One direction of a link: packets leave `src` and arrive at `dst`.
    Impairments act on the ingress of `dst` (loss, CE, delay) and on the
    egress qdisc of `src` (rate)."""

    link: str
    src: End
    dst: End

    @property
    def name(self) -> str:
        return f"{self.src.node}>{self.dst.node}"


@dataclasses.dataclass(frozen=True)
class Route:
    dst: str  # "default" or "10.1.2.0/24"
    via: tuple[tuple[str, str], ...]  # ((gateway, ifname), ...); >1 = multipath


class Topology:
    def __init__(self, prefix: str, hosts: int, spines: int, hosts_per_leaf: int = 1):
        if not PREFIX_RE.match(prefix):
            raise TopologyError(
                f"--name {prefix!r}: expected a lowercase letter then up to 11 lowercase "
                "letters or digits (it prefixes namespace names)")
        if not 1 <= hosts <= MAX_HOSTS:
            raise TopologyError(f"--hosts {hosts}: expected 1..{MAX_HOSTS}")
        if not 1 <= spines <= MAX_SPINES:
            raise TopologyError(f"--spines {spines}: expected 1..{MAX_SPINES}")
        if hosts_per_leaf < 1:
            raise TopologyError(f"--hosts-per-leaf {hosts_per_leaf}: expected >= 1")
        leaves = -(-hosts // hosts_per_leaf)
        if leaves > MAX_LEAVES:
            raise TopologyError(f"{leaves} leaves: expected at most {MAX_LEAVES}")
        self.prefix = prefix
        self.n_hosts = hosts
        self.n_spines = spines
        self.hosts_per_leaf = hosts_per_leaf
        self.n_leaves = leaves

        self.nodes: dict[str, Node] = {}
        for kind, letter, count in (("host", "h", hosts), ("leaf", "l", leaves),
                                    ("spine", "s", spines)):
            for i in range(1, count + 1):
                name = f"{letter}{i}"
                self.nodes[name] = Node(name, kind, i, f"{prefix}-{name}")

        self.links: dict[str, Link] = {}
        for h in range(1, hosts + 1):
            leaf = self.leaf_of(f"h{h}")
            self._add(Link(f"h{h}-{leaf}",
                           End(f"h{h}", HOST_IF, f"10.1.{h}.2", 24),
                           End(leaf, f"h{h}", f"10.1.{h}.1", 24)))
        for j in range(1, leaves + 1):
            for k in range(1, spines + 1):
                self._add(Link(f"l{j}-s{k}",
                               End(f"l{j}", f"s{k}", f"10.2.{j}.{4 * k + 1}", 30),
                               End(f"s{k}", f"l{j}", f"10.2.{j}.{4 * k + 2}", 30)))

    def _add(self, link: Link) -> None:
        self.links[link.name] = link

    # --- lookups -----------------------------------------------------------
    def leaf_of(self, host: str) -> str:
        h = self.node(host)
        if h.kind != "host":
            raise TopologyError(f"{host} is not a host")
        return f"l{(h.index - 1) // self.hosts_per_leaf + 1}"

    def node(self, name: str) -> Node:
        try:
            return self.nodes[name]
        except KeyError:
            raise TopologyError(
                f"no node {name!r}: hosts are h1..h{self.n_hosts}, leaves l1..l{self.n_leaves}, "
                f"spines s1..s{self.n_spines}") from None

    def host(self, name: str) -> Node:
        n = self.node(name)
        if n.kind != "host":
            raise TopologyError(f"{name} is a {n.kind}, expected a host (h1..h{self.n_hosts})")
        return n

    def host_addr(self, host: str) -> str:
        return self.links[f"h{self.host(host).index}-{self.leaf_of(host)}"].a.addr

    def link_at(self, node: str, ifname: str) -> Link:
        for lk in self.links_of(node):
            if lk.end(node).ifname == ifname:
                return lk
        raise TopologyError(f"{node} has no interface {ifname}")

    def links_of(self, node: str) -> list[Link]:
        return [lk for lk in self.links.values() if node in (lk.a.node, lk.b.node)]

    def resolve_links(self, spec: str) -> list[Direction]:
        """LINK spec -> directions. Accepted: "l1-s2" (both directions, either
        order), "l1>s2" (only packets from l1 to s2), a node name ("s2": every
        link of that node, both directions), "all", and shell patterns over
        those names ("l1>s*": l1 towards every spine; "l*-s2")."""
        if spec == "all":
            return [d for lk in self.links.values() for d in self._both(lk)]
        if any(c in spec for c in "*?["):
            # A pattern over direction names ("l1>s*") or link names ("l*-s2").
            every = [d for lk in self.links.values() for d in self._both(lk)]
            if ">" in spec:
                hits = [d for d in every if fnmatch.fnmatchcase(d.name, spec)]
            else:
                hits = [d for d in every if fnmatch.fnmatchcase(d.link, spec)
                        or fnmatch.fnmatchcase(f"{d.dst.node}-{d.src.node}", spec)]
            if not hits:
                raise TopologyError(f"no link matches {spec!r}")
            return hits
        if ">" in spec:
            src, dst = spec.split(">", 1)
            lk = self._find(src, dst, spec)
            return [Direction(lk.name, lk.end(src), lk.end(dst))]
        if "-" in spec:
            x, y = spec.split("-", 1)
            return self._both(self._find(x, y, spec))
        self.node(spec)
        return [d for lk in self.links_of(spec) for d in self._both(lk)]

    def _find(self, x: str, y: str, spec: str) -> Link:
        self.node(x)
        self.node(y)
        for name in (f"{x}-{y}", f"{y}-{x}"):
            if name in self.links:
                return self.links[name]
        raise TopologyError(f"no link {spec!r}: {x} and {y} are not neighbours")

    @staticmethod
    def _both(lk: Link) -> list[Direction]:
        return [Direction(lk.name, lk.a, lk.b), Direction(lk.name, lk.b, lk.a)]

    # --- routing -----------------------------------------------------------
    def routes(self, node: str) -> list[Route]:
        n = self.node(node)
        if n.kind == "host":
            leaf_end = self.links[f"{node}-{self.leaf_of(node)}"].b
            return [Route("default", ((leaf_end.addr, HOST_IF),))]
        if n.kind == "leaf":
            # Remote hosts over every spine; the kernel picks one nexthop per
            # flow by the L4 hash (fib_multipath_hash_policy=3, fields 0x37),
            # so a UDP source port (a lane) always takes the same spine.
            if self.n_leaves == 1:
                return []
            hops = tuple((self.links[f"{node}-s{k}"].b.addr, f"s{k}")
                         for k in range(1, self.n_spines + 1))
            return [Route("default", hops)]
        routes = []
        for h in range(1, self.n_hosts + 1):
            leaf = self.leaf_of(f"h{h}")
            down = self.links[f"{leaf}-{node}"].a
            routes.append(Route(f"10.1.{h}.0/24", ((down.addr, leaf),)))
        return routes

    def path_spine_ifaces(self) -> dict[str, list[str]]:
        """spine -> its interfaces (one per leaf), where per-spine traffic is counted."""
        return {f"s{k}": [f"l{j}" for j in range(1, self.n_leaves + 1)]
                for k in range(1, self.n_spines + 1)}

    def describe(self) -> dict:
        return {
            "prefix": self.prefix,
            "hosts": self.n_hosts,
            "leaves": self.n_leaves,
            "spines": self.n_spines,
            "hosts_per_leaf": self.hosts_per_leaf,
        }
