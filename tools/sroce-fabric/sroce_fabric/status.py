"""`sroce-fabric status`: links, impairments and counters, as a table or JSON.

Per-spine counters are what enters the spine: the sum over its interfaces of
the impair program's ingress counters (wire packets, so a GSO batch counts as
its segments) and of the kernel's rx_packets (skbs, plus ARP)."""

from __future__ import annotations

import json

from . import netns
from .fabric import load_up
from .impair import ImpairProg, Impairment


def collect(prefix: str) -> dict:
    rd, state, topo = load_up(prefix)
    kstats = {n.name: netns.link_stats(n.netns) for n in topo.nodes.values()}
    bpf: dict[str, dict] = {}
    for key, prog_id in state["bpf"].items():
        with ImpairProg(prog_id) as prog:
            bpf[key] = prog.stats()

    links = []
    for lk in topo.links.values():
        ka = kstats[lk.a.node].get(lk.a.ifname, {})
        kb = kstats[lk.b.node].get(lk.b.ifname, {})
        up = "UP" in ka.get("flags", []) and "UP" in kb.get("flags", [])
        dirs = {}
        for src, dst in ((lk.a, lk.b), (lk.b, lk.a)):
            name = f"{src.node}>{dst.node}"
            dirs[name] = {
                "impair": Impairment.from_json(state["impair"].get(name)).to_json(),
                "counters": bpf.get(f"{dst.node}/{dst.ifname}", {}),
                "tx_packets": kstats[src.node].get(src.ifname, {}).get("tx_packets", 0),
                "tx_dropped": kstats[src.node].get(src.ifname, {}).get("tx_dropped", 0),
            }
        links.append({
            "name": lk.name,
            "a": {"node": lk.a.node, "ifname": lk.a.ifname, "addr": lk.a.addr},
            "b": {"node": lk.b.node, "ifname": lk.b.ifname, "addr": lk.b.addr},
            "state": "up" if up else "down",
            "directions": dirs,
        })

    spines = {}
    for spine, ifaces in topo.path_spine_ifaces().items():
        agg = {"packets": 0, "udp_packets": 0, "roce_packets": 0, "bytes": 0, "dropped": 0,
               "ce_marked": 0, "rx_packets": 0}
        per_leaf = {}
        for ifname in ifaces:
            c = bpf.get(f"{spine}/{ifname}", {})
            for k in ("packets", "udp_packets", "roce_packets", "bytes", "dropped", "ce_marked"):
                agg[k] += c.get(k, 0)
            agg["rx_packets"] += kstats[spine].get(ifname, {}).get("rx_packets", 0)
            per_leaf[ifname] = c.get("udp_packets", 0)
        agg["udp_packets_from"] = per_leaf
        spines[spine] = agg

    hosts = {}
    for n in topo.nodes.values():
        if n.kind == "host":
            hosts[n.name] = {"addr": topo.host_addr(n.name), "netns": n.netns,
                             "leaf": topo.leaf_of(n.name)}
    return {
        "prefix": prefix,
        "status": state["status"],
        "run_dir": rd.path,
        "topology": topo.describe(),
        "options": state["options"],
        "hosts": hosts,
        "links": links,
        "spines": spines,
        "down_links": state.get("down_links", []),
        "pids": state.get("pids", {}),
    }


def impairment_text(imp: dict) -> str:
    parts = []
    if imp.get("loss"):
        parts.append(f"loss {imp['loss']:g}%")
    if imp.get("ce"):
        parts.append(f"ce {imp['ce']:g}%")
    if (imp.get("loss") or imp.get("ce")) and imp.get("match") != "ipv4":
        parts.append(f"match {imp['match']}")
    if imp.get("drop_not_ect"):
        parts.append("drop-not-ect")
    if imp.get("rate"):
        parts.append(f"rate {imp['rate']}" + (f" queue {imp['queue']}" if imp.get("queue") else ""))
    if imp.get("delay"):
        parts.append(f"delay {imp['delay']}")
    return ", ".join(parts) or "-"


def render(st: dict) -> str:
    t = st["topology"]
    out = [f"fabric {st['prefix']}: {t['hosts']} hosts, {t['leaves']} leaves, {t['spines']} spines"
           f" (mtu {st['options']['mtu']}, run dir {st['run_dir']})", "", "hosts:"]
    for h, info in st["hosts"].items():
        out.append(f"  {h:<4} {info['addr']:<12} netns {info['netns']:<16} leaf {info['leaf']}")
    out += ["", "links (counters at the receiving end, wire packets):",
            f"  {'direction':<10} {'state':<5} {'packets':>10} {'udp':>10} {'dropped':>8} "
            f"{'ce':>8} {'gso_skbs':>8}  impairments"]
    for lk in st["links"]:
        for name, d in lk["directions"].items():
            c = d["counters"]
            out.append(f"  {name:<10} {lk['state']:<5} {c.get('packets', 0):>10} "
                       f"{c.get('udp_packets', 0):>10} {c.get('dropped', 0):>8} "
                       f"{c.get('ce_marked', 0):>8} {c.get('gso_skbs', 0):>8}  "
                       f"{impairment_text(d['impair'])}")
    out += ["", "spines (everything entering the spine):",
            f"  {'spine':<6} {'packets':>10} {'udp':>10} {'roce':>10} {'bytes':>14} "
            f"{'rx_skbs':>10}"]
    for s, c in st["spines"].items():
        out.append(f"  {s:<6} {c['packets']:>10} {c['udp_packets']:>10} {c['roce_packets']:>10} "
                   f"{c['bytes']:>14} {c['rx_packets']:>10}")
    if st["pids"]:
        out += ["", "helpers: " + ", ".join(f"{k} (pid {v})" for k, v in sorted(st["pids"].items()))]
    return "\n".join(out)


def show(prefix: str, as_json: bool) -> int:
    st = collect(prefix)
    print(json.dumps(st, indent=1) if as_json else render(st))
    return 0
