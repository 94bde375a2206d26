#!/usr/bin/python3
"""Unit tests of sroce-fabric's pure parts (no root, no namespaces): the
address and routing plan, LINK specs, impairment parsing and encoding, the
tbf parameters and the netlink encoding."""

import os
import struct
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools",
                                "sroce-fabric"))

from sroce_fabric import cli, impair, nfnl  # noqa: E402
from sroce_fabric.topology import Topology, TopologyError  # noqa: E402


class TopologyTest(unittest.TestCase):
    def test_two_hosts_cross_the_spines(self):
        t = Topology("sf", 2, 4)
        self.assertEqual((t.n_leaves, len(t.links)), (2, 2 + 2 * 4))
        self.assertEqual(t.leaf_of("h1"), "l1")
        self.assertEqual(t.leaf_of("h2"), "l2")
        self.assertEqual(t.host_addr("h2"), "10.1.2.2")
        self.assertEqual(t.node("s3").netns, "sf-s3")

    def test_hosts_per_leaf(self):
        t = Topology("sf", 5, 2, hosts_per_leaf=2)
        self.assertEqual(t.n_leaves, 3)
        self.assertEqual([t.leaf_of(f"h{i}") for i in range(1, 6)], ["l1", "l1", "l2", "l2", "l3"])

    def test_addresses_are_unique_and_links_share_a_subnet(self):
        t = Topology("sf", 20, 8, hosts_per_leaf=3)
        addrs = [e.addr for lk in t.links.values() for e in (lk.a, lk.b)]
        self.assertEqual(len(addrs), len(set(addrs)))
        for lk in t.links.values():
            mask = (0xFFFFFFFF << (32 - lk.a.plen)) & 0xFFFFFFFF
            a = struct.unpack(">I", bytes(int(x) for x in lk.a.addr.split(".")))[0]
            b = struct.unpack(">I", bytes(int(x) for x in lk.b.addr.split(".")))[0]
            self.assertEqual(a & mask, b & mask, lk.name)
            self.assertNotIn(a & ~mask & 0xFFFFFFFF, (0, ~mask & 0xFFFFFFFF), lk.name)

    def test_interface_names_fit_and_name_the_neighbour(self):
        t = Topology("sf", 254, 62)
        for lk in t.links.values():
            for end, other in ((lk.a, lk.b), (lk.b, lk.a)):
                self.assertLessEqual(len(end.ifname), 15)
                if t.node(end.node).router:
                    self.assertEqual(end.ifname, other.node)

    def test_routes(self):
        t = Topology("sf", 3, 4)
        (leaf_default,) = t.routes("l1")
        self.assertEqual(leaf_default.dst, "default")
        self.assertEqual([dev for _, dev in leaf_default.via], ["s1", "s2", "s3", "s4"])
        spine = t.routes("s2")
        self.assertEqual([r.dst for r in spine], ["10.1.1.0/24", "10.1.2.0/24", "10.1.3.0/24"])
        self.assertEqual(spine[2].via, (("10.2.3.9", "l3"),))  # l3's side of l3-s2
        (host,) = t.routes("h1")
        self.assertEqual(host.via, (("10.1.1.1", "eth0"),))
        self.assertEqual(Topology("sf", 2, 2, hosts_per_leaf=2).routes("l1"), [])

    def test_link_specs(self):
        t = Topology("sf", 2, 4)
        self.assertEqual([d.name for d in t.resolve_links("l1-s2")], ["l1>s2", "s2>l1"])
        self.assertEqual([d.name for d in t.resolve_links("s2-l1")], ["l1>s2", "s2>l1"])
        (d,) = t.resolve_links("s2>l1")
        self.assertEqual((d.src.ifname, d.dst.ifname, d.link), ("l1", "s2", "l1-s2"))
        self.assertEqual(sorted(d.name for d in t.resolve_links("l1>s*")),
                         ["l1>s1", "l1>s2", "l1>s3", "l1>s4"])
        self.assertEqual(len(t.resolve_links("s3")), 4)
        self.assertEqual(len(t.resolve_links("all")), 2 * len(t.links))
        for bad in ("h1-s1", "x9", "l3-s1", "q*"):
            with self.assertRaises(TopologyError):
                t.resolve_links(bad)

    def test_rejects(self):
        for args in (("Bad", 2, 2), ("sf", 0, 2), ("sf", 2, 63), ("toolongprefix1", 2, 2)):
            with self.assertRaises(TopologyError):
                Topology(*args)


class ImpairTest(unittest.TestCase):
    def test_threshold(self):
        self.assertEqual(impair.threshold(0), 0)
        self.assertEqual(impair.threshold(100), 1 << 32)  # above every u32: always
        self.assertEqual(impair.threshold(10), round(0.1 * (1 << 32)))

    def test_validate(self):
        for bad in (dict(match="tcp"), dict(rate="fast"), dict(delay="20s"), dict(queue="lots")):
            with self.assertRaises(ValueError):
                impair.Impairment(**bad).validate()
        imp = impair.Impairment(delay="0ms")
        imp.validate()
        self.assertTrue(imp.is_clear())

    def test_config_layout_matches_impair_h(self):
        # struct impair_config is 24 bytes, struct impair_stats 12 u64s (impair.h).
        self.assertEqual(struct.calcsize(impair.CONFIG_FMT), 24)
        self.assertEqual(struct.calcsize(impair.STATS_FMT), 12 * 8)
        with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                               "ebpf", "impair", "impair.h")) as f:
            header = f.read()
        body = header[header.index("struct impair_stats {"):]
        body = body[:body.index("};")]
        fields = [ln.split()[1].rstrip(";") for ln in body.splitlines() if ln.strip().startswith("__u64")]
        self.assertEqual(tuple(fields), impair.STATS_FIELDS)

    def test_tbf(self):
        line = impair.tbf_command("s1", impair.Impairment(rate="80mbit", queue="2ms"), 9000)
        self.assertIn("rate 80000000bit", line)
        burst = int(line.split("burst ")[1].split()[0])
        limit = int(line.split("limit ")[1].split()[0])
        self.assertGreaterEqual(burst, 4 * 9014)
        self.assertEqual(limit, 20000 + burst)  # 2 ms at 80 Mbit/s = 20000 bytes, plus a bucket
        self.assertEqual(impair.tbf_command("s1", impair.Impairment(), 1500), "qdisc del dev s1 root")
        line = impair.tbf_command("s1", impair.Impairment(rate="1gbit", queue="256kb"), 1500)
        self.assertIn(f"limit {256 * 1024 + 125000}", line)


class NetlinkTest(unittest.TestCase):
    def test_attr_is_padded(self):
        a = nfnl.attr(1, b"abc")
        self.assertEqual(len(a), 8)
        self.assertEqual(struct.unpack("=HH", a[:4]), (7, 1))

    def test_message_header(self):
        m = nfnl.message(0x0A06, 5, 9, 2, 3, b"xxxx")
        ln, typ, flags, seq, _ = struct.unpack("=IHHII", m[:16])
        self.assertEqual((ln, typ, flags, seq, len(m)), (24, 0x0A06, 5, 9, 24))
        self.assertEqual(m[16:20], bytes([2, 0, 0, 3]))  # family, version, res_id (BE)

    def test_parse_packets(self):
        hdr = nfnl.attr(nfnl.NFQA_PACKET_HDR, struct.pack(">IHB", 77, 0x0800, 0))
        ts = nfnl.attr(nfnl.NFQA_TIMESTAMP, struct.pack(">QQ", 10, 500000))
        msg = nfnl.message((nfnl.NFNL_SUBSYS_QUEUE << 8) | nfnl.NFQNL_MSG_PACKET, 0, 0, 2, 4,
                           hdr + ts)
        self.assertEqual(list(nfnl.parse_packets(msg + msg)), [(4, 77, 10.5)] * 2)


class CliTest(unittest.TestCase):
    def test_parser(self):
        a = cli._parser().parse_args(["up", "--hosts", "3", "--loss", "1.5%", "--name", "x1"])
        self.assertEqual((a.hosts, a.loss, a.name, a.spines), (3, 1.5, "x1", 4))
        with self.assertRaises(SystemExit):
            cli._parser().parse_args(["up", "--loss", "101"])


if __name__ == "__main__":
    unittest.main()
