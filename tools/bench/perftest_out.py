"""Reading the text reports of unchanged RDMA programs: perftest (ib_*_bw,
ib_*_lat) and libibverbs' ibv_*_pingpong examples. Used by bench_e2e.py and
the demo (tools/demo). Every parser raises ValueError with the program's
output when the figures it expects are not there, so a run that failed never
turns into a number."""

from __future__ import annotations

import re

_SEP = re.compile(r"^-{20,}\s*$")


class ParseError(ValueError):
    pass


def _table(text: str, must: str) -> tuple[list[str], list[list[str]]]:
    """perftest's result table: the (last) header line containing `must`, then its
    data rows up to the next dashed separator."""
    lines = text.splitlines()
    found = None
    for i, line in enumerate(lines):
        if must in line and line.lstrip().startswith("#bytes"):
            # "99% percentile[usec]" and "99.9% percentile[usec]" are one column each.
            head = (line.replace("99.9% percentile[usec]", "p99.9")
                    .replace("99% percentile[usec]", "p99").split())
            rows = []
            for row in lines[i + 1:]:
                if _SEP.match(row) or not row.strip():
                    break
                # -H (--report-histogram) prints "#, usec" and one "N, value" line per
                # sample under a first copy of the header; the summary follows a second one.
                if "," in row:
                    continue
                rows.append(row.split())
            if rows:
                found = (head, rows)
    if found:
        return found
    raise ParseError(f"no perftest result table (header with {must!r}) in:\n{text}")


def bw_gbps(text: str) -> float:
    """Average bandwidth in Gbit/s of an ib_*_bw run made with --report_gbits
    (the last row, which with several sizes is the largest)."""
    head, rows = _table(text, "BW average[Gb/sec]")
    names = _columns(head)
    values = rows[-1]
    if len(values) < len(names):
        raise ParseError(f"short perftest row {values} for columns {names}:\n{text}")
    return float(values[names.index("BW average[Gb/sec]")])


def _columns(head: list[str]) -> list[str]:
    """Rejoins header words into column names: 'BW' + 'peak[Gb/sec]' ->
    'BW peak[Gb/sec]'; everything else is one word already."""
    out: list[str] = []
    pending = ""
    for w in head:
        if w == "BW":
            pending = "BW "
            continue
        out.append(pending + w)
        pending = ""
    return out


def lat_us(text: str) -> dict[str, float]:
    """An ib_*_lat report: {'p50', 'p99', 'p99.9', 'min', 'max', 'avg'} in
    microseconds, as perftest prints them. For send and write latency that is
    half the measured round trip (perftest's rtt_factor 2); for read and
    atomic latency the full one."""
    head, rows = _table(text, "t_typical[usec]")
    values = rows[-1]
    if len(values) < len(head):
        raise ParseError(f"short perftest row {values} for columns {head}:\n{text}")
    col = dict(zip(head, values))
    return {"p50": float(col["t_typical[usec]"]), "p99": float(col["p99"]),
            "p99.9": float(col["p99.9"]), "min": float(col["t_min[usec]"]),
            "max": float(col["t_max[usec]"]), "avg": float(col["t_avg[usec]"])}


_PP_BYTES = re.compile(r"^(\d+) bytes in ([\d.]+) seconds = ([\d.]+) Mbit/sec", re.M)
_PP_ITERS = re.compile(r"^(\d+) iters in ([\d.]+) seconds = ([\d.]+) usec/iter", re.M)


def pingpong(text: str) -> dict[str, float]:
    """An ibv_*_pingpong report: {'bytes', 'seconds', 'mbps', 'iters',
    'usec_per_iter'}. Raises when the program reported invalid data (-c)."""
    if "invalid data" in text:
        raise ParseError(f"ibv_*_pingpong reported invalid data:\n{text}")
    b, i = _PP_BYTES.search(text), _PP_ITERS.search(text)
    if not b or not i:
        raise ParseError(f"no ibv_*_pingpong summary in:\n{text}")
    return {"bytes": int(b.group(1)), "seconds": float(b.group(2)), "mbps": float(b.group(3)),
            "iters": int(i.group(1)), "usec_per_iter": float(i.group(3))}


_LAT_SAMPLE = re.compile(r"^\s*(\d+)\s*,\s*([\d.]+)\s*$", re.M)


def lat_samples_us(text: str) -> list[float]:
    """Every latency sample of an ib_*_lat run made with -H (--report-histogram: perftest
    prints "#, usec" and then one "N, value" line per iteration), in microseconds, as
    perftest prints them; [] when the run printed none."""
    return [float(m.group(2)) for m in _LAT_SAMPLE.finditer(text)]
