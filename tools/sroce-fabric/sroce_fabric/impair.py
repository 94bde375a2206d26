"""Impairments of one link direction and how each is realised on this kernel
(no netem, fq, gact or matchall):

  loss, CE marks  the tc BPF program ebpf/impair/impair.bpf.c on the clsact
                  ingress of the receiving interface; probabilities are map
                  values written here (no reload), drawn per packet with
                  bpf_get_prandom_u32().
  rate, queue     a tbf qdisc on the sending interface's egress (token bucket
                  at `rate`, a byte limit standing for the switch queue).
  delay           a fixed one-way delay by a user-space delay line
                  (delayline.py): an nftables prerouting rule on the receiving
                  namespace queues the direction's packets to NFQUEUE and the
                  delay line accepts each one `delay` after it arrived.
  down / up       both veth ends administratively down: the leaf's multipath
                  route drops that nexthop at once, like a fabric whose
                  failure detection is instant. A silent blackhole, where
                  routing keeps using the path, is `--loss 100`.
"""

from __future__ import annotations

import dataclasses
import os
import struct

from . import bpfsys
from .netns import parse_rate_bps, parse_size_bytes, parse_time_s

MATCHES = {"ipv4": 0, "udp": 1, "roce": 2}  # enum impair_match in impair.h
F_DROP_NOT_ECT = 1  # IMPAIR_F_DROP_NOT_ECT

CONFIG_FMT = "<QQII"  # struct impair_config
STATS_FIELDS = ("skbs", "packets", "bytes", "ipv4_packets", "udp_packets", "roce_packets",
                "dropped", "ce_marked", "ce_seen", "not_ect", "gso_skbs", "matched")
STATS_FMT = f"<{len(STATS_FIELDS)}Q"  # struct impair_stats
PROG_NAME = "impair"


@dataclasses.dataclass
class Impairment:
    """What is set on one direction of a link. Percentages are 0..100."""

    loss: float = 0.0
    ce: float = 0.0
    match: str = "ipv4"
    drop_not_ect: bool = False
    rate: str | None = None  # tc rate string, e.g. "1gbit"
    queue: str | None = None  # bytes ("256kb") or time ("2ms") of queue at `rate`
    delay: str | None = None  # fixed one-way delay, e.g. "500us"

    def to_json(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, d: dict | None) -> "Impairment":
        return cls(**(d or {}))

    def is_clear(self) -> bool:
        return self == Impairment()

    def validate(self) -> None:
        if self.match not in MATCHES:
            raise ValueError(f"--match {self.match!r}: expected one of {', '.join(MATCHES)}")
        if self.rate is not None:
            if parse_rate_bps(self.rate) < 8000:
                raise ValueError(f"--rate {self.rate}: expected at least 8kbit")
        if self.queue is not None:
            queue_limit_bytes(self.queue, 1e9)
        if self.delay is not None:
            d = parse_time_s(self.delay)
            if not 0 <= d <= 10:
                raise ValueError(f"--delay {self.delay}: expected 0..10s")
            if d == 0:
                self.delay = None


def threshold(pct: float) -> int:
    """Probability in percent -> the bpf_get_prandom_u32() threshold; 100 %
    becomes 2^32, above every u32, so it always fires."""
    return round(pct / 100.0 * (1 << 32))


class ImpairProg:
    """The impair program attached at one interface, found by its id."""

    def __init__(self, prog_id: int):
        self.fds: list[int] = []
        fd = bpfsys.prog_fd_by_id(prog_id)
        self.fds.append(fd)
        self.prog_fd = fd
        info = bpfsys.prog_info(fd)
        if info["name"] != PROG_NAME:
            self.close()
            raise bpfsys.BpfError(0, f"program {prog_id} is {info['name']!r}, not {PROG_NAME!r}")
        self.config_fd = self.stats_fd = -1
        self.stats_size = 0
        for mid in info["map_ids"]:
            mfd = bpfsys.map_fd_by_id(mid)
            self.fds.append(mfd)
            mi = bpfsys.map_info(mfd)
            if mi["name"] == "impair_config":
                self.config_fd = mfd
            elif mi["name"] == "impair_stats":
                self.stats_fd = mfd
                self.stats_size = (mi["value_size"] + 7) // 8 * 8
        if self.config_fd < 0 or self.stats_fd < 0:
            self.close()
            raise bpfsys.BpfError(0, f"program {prog_id} lacks the impair maps")

    def close(self) -> None:
        for fd in self.fds:
            os.close(fd)
        self.fds = []

    def __enter__(self) -> "ImpairProg":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def set(self, imp: Impairment) -> None:
        flags = F_DROP_NOT_ECT if imp.drop_not_ect else 0
        value = struct.pack(CONFIG_FMT, threshold(imp.loss), threshold(imp.ce),
                            MATCHES[imp.match], flags)
        bpfsys.map_update(self.config_fd, struct.pack("<I", 0), value)

    def stats(self) -> dict[str, int]:
        ncpu = bpfsys.possible_cpus()
        raw = bpfsys.map_lookup(self.stats_fd, struct.pack("<I", 0), self.stats_size * ncpu)
        total = [0] * len(STATS_FIELDS)
        for c in range(ncpu):
            vals = struct.unpack_from(STATS_FMT, raw, c * self.stats_size)
            total = [a + b for a, b in zip(total, vals)]
        return dict(zip(STATS_FIELDS, total))


def queue_limit_bytes(queue: str | None, rate_bps: float, burst: int = 0) -> int:
    """tbf's byte limit: the queue (a size as given, or a time's worth of
    bytes at the rate) on top of the bucket."""
    if queue is None:
        queue = "2ms"
    try:
        limit = int(rate_bps / 8 * parse_time_s(queue))
    except ValueError:
        try:
            limit = parse_size_bytes(queue)
        except ValueError:
            raise ValueError(f"--queue {queue!r}: expected a size (256kb) or a time at "
                             "the rate (2ms)") from None
    if limit <= 0:
        raise ValueError(f"--queue {queue}: expected a positive size or time")
    # tbf's limit counts the bucket too (tc-tbf(8): latency = (limit - burst) / rate).
    return limit + burst


def tbf_command(ifname: str, imp: Impairment, mtu: int) -> str:
    """tc line that shapes `ifname`'s egress, or deletes the shaper."""
    if imp.rate is None:
        return f"qdisc del dev {ifname} root"
    rate_bps = parse_rate_bps(imp.rate)
    # Tokens for 1 ms at the rate, and never less than a few frames, or tbf
    # would drop every frame larger than its bucket.
    burst = max(int(rate_bps / 8 / 1000), 4 * (mtu + 14), 16384)
    limit = queue_limit_bytes(imp.queue, rate_bps, burst)
    return f"qdisc replace dev {ifname} root tbf rate {int(rate_bps)}bit burst {burst} limit {limit}"
