"""Thin wrappers over iproute2 and the kernel for network namespaces, veth
pairs, sysctls and processes. Nothing here knows the fabric's shape."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time

NETNS_DIR = "/run/netns"


class CommandError(RuntimeError):
    pass


def run(argv: list[str], *, input_text: str | None = None, check: bool = True,
        capture: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(argv, input=input_text, text=True,
                          stdout=subprocess.PIPE if capture else None,
                          stderr=subprocess.PIPE if capture else None)
    if check and proc.returncode != 0:
        detail = (proc.stderr or proc.stdout or "").strip()
        shown = " ".join(argv)
        if input_text:
            shown += " <<< " + input_text.strip().replace("\n", "; ")[:400]
        raise CommandError(f"{shown}: exit {proc.returncode}: {detail}")
    return proc


def ip_batch(netns: str | None, lines: list[str]) -> None:
    """Runs `ip` commands in one process (ip -batch), inside `netns`."""
    if not lines:
        return
    argv = ["ip"] + (["-n", netns] if netns else []) + ["-batch", "-"]
    run(argv, input_text="\n".join(lines) + "\n")


def tc_batch(netns: str, lines: list[str]) -> None:
    if lines:
        run(["tc", "-n", netns, "-batch", "-"], input_text="\n".join(lines) + "\n")


def ns_exec_argv(netns: str, argv: list[str]) -> list[str]:
    return ["ip", "netns", "exec", netns] + argv


def sysctl(netns: str, settings: dict[str, str], optional: frozenset[str] = frozenset()) -> None:
    """Writes sysctls inside a namespace in one process (the namespace's own
    /proc/sys/net). A key in `optional` is skipped when this kernel lacks it;
    any other missing key is an error."""
    lines = []
    for k, v in settings.items():
        path = "/proc/sys/" + k.replace(".", "/")
        line = f"echo {v} > {path}"
        lines.append(f"if [ -e {path} ]; then {line}; fi" if k in optional else line)
    run(ns_exec_argv(netns, ["/bin/sh", "-e", "-c", "\n".join(lines)]))


def list_netns() -> list[str]:
    try:
        return sorted(os.listdir(NETNS_DIR))
    except FileNotFoundError:
        return []


def netns_exists(name: str) -> bool:
    return os.path.exists(os.path.join(NETNS_DIR, name))


def add_netns(name: str) -> None:
    run(["ip", "netns", "add", name])


def netns_pids(name: str) -> list[int]:
    proc = run(["ip", "netns", "pids", name], check=False)
    return [int(p) for p in proc.stdout.split()] if proc.returncode == 0 else []


def del_netns(name: str) -> None:
    """Deletes a namespace after ending every process still inside it (a
    process keeps the namespace, and so its veths, alive)."""
    kill_pids(netns_pids(name))
    run(["ip", "netns", "del", name], check=False)


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child still answers kill(0); reap it if it is ours.
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
        return done == 0
    except ChildProcessError:
        pass
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, IndexError):
        return False


def pid_cmdline(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
    except (FileNotFoundError, ProcessLookupError):
        return []


def kill_pids(pids: list[int], grace: float = 1.0) -> None:
    """SIGTERM, then SIGKILL what is left after `grace` seconds."""
    pids = [p for p in pids if p != os.getpid()]
    for p in pids:
        try:
            os.kill(p, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(pid_alive(p) for p in pids):
        time.sleep(0.02)
    for p in pids:
        if pid_alive(p):
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass


def link_stats(netns: str) -> dict[str, dict]:
    """ifname -> {"operstate", "rx_packets", "tx_packets", "rx_dropped", ...}."""
    out = run(["ip", "-n", netns, "-j", "-s", "link", "show"]).stdout
    result = {}
    for dev in json.loads(out or "[]"):
        s = dev.get("stats64", {})
        rx, tx = s.get("rx", {}), s.get("tx", {})
        result[dev["ifname"]] = {
            "operstate": dev.get("operstate", "UNKNOWN"),
            "flags": dev.get("flags", []),
            "rx_packets": rx.get("packets", 0),
            "rx_bytes": rx.get("bytes", 0),
            "rx_dropped": rx.get("dropped", 0),
            "tx_packets": tx.get("packets", 0),
            "tx_bytes": tx.get("bytes", 0),
            "tx_dropped": tx.get("dropped", 0),
        }
    return result


def tc_filter_prog_id(netns: str, ifname: str, hook: str = "ingress") -> int | None:
    out = run(["tc", "-n", netns, "-j", "filter", "show", "dev", ifname, hook]).stdout
    for f in json.loads(out or "[]"):
        prog = f.get("options", {}).get("prog")
        if prog and "id" in prog:
            return int(prog["id"])
    return None


_SIZE_RE = re.compile(r"^([0-9]*\.?[0-9]+)\s*([a-zA-Z]*)$")


def parse_scaled(text: str, units: dict[str, float], what: str) -> float:
    m = _SIZE_RE.match(text.strip())
    if not m or m.group(2).lower() not in units:
        raise ValueError(f"{what} {text!r}: expected a number with one of the units "
                         f"{', '.join(u for u in units if u) or '(none)'}")
    return float(m.group(1)) * units[m.group(2).lower()]


RATE_UNITS = {"bit": 1, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9, "tbit": 1e12,
              "bps": 8, "kbps": 8e3, "mbps": 8e6, "gbps": 8e9}
TIME_UNITS = {"s": 1.0, "sec": 1.0, "ms": 1e-3, "msec": 1e-3, "us": 1e-6, "usec": 1e-6}
SIZE_UNITS = {"": 1, "b": 1, "k": 1024, "kb": 1024, "kib": 1024, "m": 1 << 20, "mb": 1 << 20,
              "mib": 1 << 20}


def parse_rate_bps(text: str) -> float:
    """'10gbit' -> 1e10 bits/s (tc's units: 'bit' suffixes are bits, 'bps' bytes)."""
    return parse_scaled(text, RATE_UNITS, "rate")


def parse_time_s(text: str) -> float:
    return parse_scaled(text, TIME_UNITS, "time")


def parse_size_bytes(text: str) -> int:
    return int(parse_scaled(text, SIZE_UNITS, "size"))


def parse_percent(text: str, what: str) -> float:
    t = text.strip().rstrip("%")
    try:
        p = float(t)
    except ValueError:
        raise ValueError(f"{what} {text!r}: expected a percentage 0..100") from None
    if not 0.0 <= p <= 100.0:
        raise ValueError(f"{what} {text!r}: expected a percentage 0..100")
    return p
