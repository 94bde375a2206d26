#!/usr/bin/python3
"""Congestion control in sroced ([engine.cc], docs/sroced.md) on the namespace fabric.

The fabric has no INT and no queue-driven ECN, so the delay-based controller
(docs/cc/delay.md) is the one it can feed: the RTT of every acknowledged
packet. Two hosts over one spine, the last hop l2>h2 shaped by tbf to RATE with
a deep queue (QUEUE); unchanged ib_write_bw -q 4 from h1 to h2 through sroced,
run twice on fresh fabrics:

* engine.cc.algorithm = "none": the four QPs fill the tbf queue (the engine's
  window is the only bound), the queue overflows and drops;
* engine.cc.algorithm = "delay" with a 5 ms target: the queue the flows build
  stays near the target.

Checks: the "delay" transfer completes (ib_write_bw exits 0 on both ends;
without cc it may not: its QPs can exhaust their retries behind the full
queue); with "delay" the mean and peak tbf backlog sampled during the
transfer are below a third of the "none" ones, the peak below 3 x the
target's bytes at RATE, and tbf dropped fewer packets; h1's QPs ran the
controller (a window is reported) and their smoothed RTT is lower than without it.

Then LTP (docs/cc/ltp.md): engine.cc.algorithm = "ltp" with the same delay
settings (its fallback's) under the same bottleneck. Checked: h1's daemon
reports "ltp" as every QP's controller and MIs decided (by the policy or the
fallback), the transfer completes (ib_write_bw exits 0 on both ends) and a
data-checked ibv_rc_pingpong -c follows on the same fabric; its throughput and
queue are printed (docs/cc/ltp.md, "On the namespace fabric": it failed in
every run until the ACK timer and the learned base RTT of issue 17).

Then DCQCN: engine.cc.algorithm = "dcqcn" on both daemons, no shaping, the
tc BPF program CE-marks 50 % of ECN-capable packets on l2>h2 (test_ce.py): h1's
requests are ECT(0), h2's notification point answers marks with CNPs, h1's
QPs count CNPs received and the lowest rate their controllers set
(cc_rate_min_bps, kept by the engine) is below 90 % of the line rate (each CNP
cuts it; the timers bring it back within milliseconds, so a sampled current
rate can miss the cuts: that check failed 1 run in 4 here).

Needs root, build/bin/sroced and ib_write_bw; SKIP (77) otherwise. About 40-60 s."""

import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time

from fabric_test import SKIP, CheckFailed, Fabric, check, main, run_tool, tool
from test_sroced import PROGRAM_TIMEOUT, bin_dir, daemon_logs, pingpong, wait_listening

PORT = 18830
RATE_MBIT = 200
QUEUE = "40ms"           # tbf limit: 1 MB at 200 Mbit/s, below perftest's 67 ms ACK timeout
MSG = 65536
ITERS = 128              # per QP: 4 x 128 x 64 KiB = 32 MiB, 1.4 s at 200 Mbit/s
TARGET_US = 5000         # the delay controller's base target (room for a loaded host)
LINE_MBIT = 1000         # engine.cc.line_rate_mbps (the flows' maximum)
CE_PCT = 50              # DCQCN run: CE marks on l2>h2 (of ECT packets)

CC_SETS = {
    "none": [],
    "delay": ['engine.cc.algorithm="delay"', f"engine.cc.line_rate_mbps={LINE_MBIT}",
              "engine.cc.base_rtt_us=500", f"engine.cc.delay_target_us={TARGET_US}",
              "engine.cc.delay_per_hop_bytes=0"],
    # LTP (docs/cc/ltp.md) with the delay settings: they configure its fallback, the delay
    # rule that decides while its inputs are missing.
    "ltp": ['engine.cc.algorithm="ltp"', f"engine.cc.line_rate_mbps={LINE_MBIT}",
            "engine.cc.base_rtt_us=500", f"engine.cc.delay_target_us={TARGET_US}",
            "engine.cc.delay_per_hop_bytes=0"],
    "dcqcn": ['engine.cc.algorithm="dcqcn"', f"engine.cc.line_rate_mbps={LINE_MBIT}",
              "engine.cc.base_rtt_us=500"],
}


def tbf(f: Fabric) -> dict:
    """l2's egress qdisc towards h2: {"backlog": bytes, "drops": packets}."""
    out = subprocess.run(["tc", "-n", f"{f.name}-l2", "-s", "-j", "qdisc", "show", "dev", "h2",
                          "root"], capture_output=True, text=True, check=True).stdout
    q = json.loads(out)[0]
    return {"kind": q.get("kind"), "backlog": q.get("backlog", 0), "drops": q.get("drops", 0)}


class Sampler(threading.Thread):
    """Samples the tbf backlog (every 50 ms, from the host) and h1's RC QPs
    (`sroce qps --json` in a loop inside h1, every 20 ms) while the transfer
    runs; backlog samples count from when h1's QPs exist (the transfer, not
    the connection setup) to the transfer's end."""

    def __init__(self, f: Fabric, shaped: bool):
        super().__init__(daemon=True)
        self.f, self.shaped = f, shaped
        self.stop = threading.Event()
        self.tbf: list[tuple[float, int]] = []
        self.backlog: list[int] = []
        self.qp_samples: list[list[dict]] = []
        loop = (f"while :; do echo \"T $(date +%s.%N)\"; {os.path.join(bin_dir(), 'sroce')} qps "
                "--json; sleep 0.02; done")
        self.proc = subprocess.Popen([tool(), "exec", "--name", f.name, "h1", "--", "sh", "-c",
                                      loop], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     text=True, start_new_session=True)
        f.procs.append(self.proc)

    def run(self) -> None:
        while not self.stop.is_set():
            if self.shaped:
                try:
                    self.tbf.append((time.time(), tbf(self.f)["backlog"]))
                except (subprocess.SubprocessError, ValueError, IndexError):
                    pass
            self.stop.wait(0.05)

    def finish(self) -> None:
        t_end = time.time()  # the transfer is over (write_bw returned)
        self.stop.set()
        self.join()
        os.killpg(self.proc.pid, 9)
        out = self.proc.communicate()[0]
        busy = []
        for chunk in out.split("T ")[1:]:  # "T <time>\n<sroce qps --json, pretty>"
            head, _, body = chunk.partition("\n")
            try:
                t, j = float(head), json.loads(body)
            except ValueError:
                continue
            q = [x for x in (j if isinstance(j, list) else j.get("qps", []))
                 if x.get("type") == "RC"]
            if q:
                self.qp_samples.append(q)
                busy.append(t)
        if busy:
            # From the first sample that saw h1's QPs to the end of the transfer (under load
            # `sroce qps` answers slowly, so its last sample can be early: the test once had
            # only 2 backlog samples when it ended the window there).
            self.backlog = [b for (ts, b) in self.tbf if busy[0] <= ts <= t_end]


def bw_average(text: str) -> float | None:
    """ib_write_bw's "BW average[MB/sec]" (the line after its "#bytes" header)."""
    lines = text.splitlines()
    for i, ln in enumerate(lines[:-1]):
        if "BW average" in ln and ln.split()[:1] == ["#bytes"]:
            try:
                return float(lines[i + 1].split()[3])
            except (IndexError, ValueError):
                return None
    return None


def write_bw(f: Fabric, port: int, limit: int = PROGRAM_TIMEOUT) -> tuple[str, float | None]:
    """ib_write_bw -q 4 from h1 to h2 through sroce-run: ("" when both ends
    exit 0, else what they printed; the client's BW average in MB/s)."""
    sroce_run = os.path.join(bin_dir(), "sroce-run")
    bw = ["timeout", "-k", "5", str(limit), sroce_run, "--", "ib_write_bw", "-F",
          "-p", str(port), "-s", str(MSG), "-n", str(ITERS), "-q", "4"]
    server = subprocess.Popen([tool(), "exec", "--name", f.name, "h2", "--", *bw],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    f.procs.append(server)
    wait_listening(f, "h2", port, server, "ib_write_bw server")
    client = run_tool("exec", "--name", f.name, "h1", "--", *bw, f.addr("h2"), check_rc=False,
                      timeout=PROGRAM_TIMEOUT + 30)
    sout = server.communicate(timeout=PROGRAM_TIMEOUT + 30)[0]
    bw = bw_average(client.stdout)
    if client.returncode == 0 and server.returncode == 0:
        return "", bw
    return (f"ib_write_bw: client {client.returncode}, server {server.returncode}\n"
            f"{client.stdout}{client.stderr}\n--- server:\n{sout}"), bw


def one_run(alg: str, shaped: bool, ce: int = 0, check_data: bool = False) -> dict:
    os.environ["SROCE_FABRIC_SROCED_ARGS"] = " ".join(f"--set '{s}'" for s in CC_SETS[alg])
    with Fabric(f"cc{alg[:3]}", "--sroced", hosts=2, spines=1) as f:
        try:
            if shaped:
                f.tool("impair", "l2>h2", "--rate", f"{RATE_MBIT}mbit", "--queue", QUEUE)
                check(tbf(f)["kind"] == "tbf", f"no tbf on l2>h2: {tbf(f)}")
            if ce:
                f.tool("impair", "l2>h2", "--ce", str(ce))
            d0 = tbf(f)["drops"] if shaped else 0
            s = Sampler(f, shaped)
            t0 = time.monotonic()
            s.start()
            failed, bw = write_bw(f, PORT, PROGRAM_TIMEOUT)
            s.finish()
            elapsed = time.monotonic() - t0
            drops = tbf(f)["drops"] - d0 if shaped else 0
            if check_data and not failed:
                # The data through the same bottleneck and controller: ibv_rc_pingpong -c.
                pingpong(f, PORT + 1, 200, 4096)
        except (CheckFailed, subprocess.TimeoutExpired) as e:
            raise CheckFailed(f"[{alg}] {e}\n{daemon_logs(f)}") from None
    last = {}
    for sample in s.qp_samples:  # the newest sample of each QP
        for q in sample:
            last[q["qpn"]] = q
    srtt = [q["srtt_us"] for smp in s.qp_samples for q in smp if q.get("srtt_us", 0) > 0]
    rates = [q["cc_rate_bps"] for smp in s.qp_samples for q in smp if q.get("cc_rate_bps", 0) > 0]
    ests = [q["cc_est_bps"] for smp in s.qp_samples for q in smp if q.get("cc_est_bps", 0) > 0]
    r = {"alg": alg, "completed": not failed, "elapsed_s": round(elapsed, 2), "drops": drops,
         "bw_MBps": bw,
         "backlog_mean": round(statistics.mean(s.backlog)) if s.backlog else None,
         "backlog_max": max(s.backlog) if s.backlog else None, "samples": len(s.backlog),
         "srtt_us_p50": statistics.median(srtt) if srtt else None,
         "qps": len(last),
         # The controller each QP runs, as its daemon reports it, and for LTP who decided
         # its monitor intervals (the policy or the delay-rule fallback).
         "cc_algorithms": sorted({q["cc_algorithm"] for q in last.values() if "cc_algorithm" in q}),
         "tx_bytes": sum(q.get("tx_bytes", 0) for q in last.values()),
         "timeouts": sum(q.get("timeouts", 0) for q in last.values()),
         "retransmits": sum(q.get("retransmits", 0) for q in last.values()),
         "rate_mbps_p50": round(statistics.median(rates) / 1e6, 1) if rates else None,
         "ltp_decisions": sum(q.get("ltp_decisions", 0) for q in last.values()),
         "ltp_fallback_mis": sum(q.get("ltp_fallback_mis", 0) for q in last.values()),
         # Why the fallback decided: MIs without inputs (and timeouts), filter divergences.
         "ltp_missing_mis": sum(q.get("ltp_missing_mis", 0) for q in last.values()),
         "ltp_divergences": sum(q.get("ltp_divergences", 0) for q in last.values()),
         "ltp_est_mbps_p50": round(statistics.median(ests) / 1e6, 1) if ests else None,
         "cnps_received": sum(q.get("cnps_received", 0) for q in last.values()),
         # The lowest rate each QP's controller ever set (the engine keeps it): a sampled
         # current rate can miss a cut that recovered between two samples.
         "min_rate_bps": min((q.get("cc_rate_min_bps", 0) for smp in s.qp_samples for q in smp
                              if q.get("cc_rate_min_bps", 0) > 0), default=0),
         "windows": sorted({q["cc_window_bytes"] for smp in s.qp_samples for q in smp
                            if "cc_window_bytes" in q})[:8]}
    print(json.dumps(r))
    if failed and alg != "none":
        raise CheckFailed(f"[{alg}] {failed}")
    if failed:
        err = [ln for ln in failed.splitlines() if "status" in ln or "Completion" in ln]
        print(f"[{alg}] ib_write_bw did not complete: {' '.join(err)}")
    r["error"] = failed
    return r


def test() -> None:
    if not shutil.which("ib_write_bw"):
        print("SKIP: needs ib_write_bw")
        sys.exit(SKIP)
    if not all(os.access(os.path.join(bin_dir(), b), os.X_OK) for b in ("sroced", "sroce",
                                                                        "sroce-run")):
        print("SKIP: needs sroced, sroce and sroce-run")
        sys.exit(SKIP)

    none = one_run("none", shaped=True)
    delay = one_run("delay", shaped=True)
    # Without cc a QP may exhaust its retries within seconds (2 samples once, under load):
    # only its peak is used below.
    check(none["samples"] >= 1 and delay["samples"] >= 3,
          f"too few backlog samples: none {none['samples']}, delay {delay['samples']}")
    # The queue without cc swings (fills to the tbf limit, drops, drains
    # while the lost packets wait for their repair): compare the mean and
    # the peak of the samples taken during the transfers.
    check(none["backlog_max"] > 500_000,
          f"without cc the tbf queue peaked at {none['backlog_max']} bytes: the bottleneck "
          "was not one (is the shaping working?)")
    target_bytes = RATE_MBIT * 1e6 / 8 * TARGET_US * 1e-6
    # The mean of the "none" queue is no yardstick: on a loaded machine its senders spend
    # much of the run in loss recovery with the queue drained (183 KB once, 445-924 KB
    # usually). The controller's own target is: the mean stays below the target's bytes at
    # RATE, the peak below half the uncontrolled peak (which reached 500 KB, checked above)
    # and below 3 x the target.
    check(delay["backlog_mean"] < target_bytes,
          f"delay: tbf backlog mean {delay['backlog_mean']} B, expected below the target's "
          f"{target_bytes:.0f} B (none: {none['backlog_mean']} B)")
    check(delay["backlog_max"] < none["backlog_max"] / 2,
          f"delay: tbf backlog peak {delay['backlog_max']} B, none {none['backlog_max']} B: "
          "expected below half")
    check(delay["backlog_max"] < 3 * target_bytes,
          f"delay: tbf backlog peak {delay['backlog_max']} B, expected below 3 x the target "
          f"({3 * target_bytes:.0f} B)")
    check(delay["drops"] < none["drops"] or none["drops"] == 0,
          f"delay dropped {delay['drops']} at the tbf, none {none['drops']}")
    check(delay["windows"], "delay: h1's QPs reported no congestion window (controller off?)")
    check(none["srtt_us_p50"] is None or delay["srtt_us_p50"] < none["srtt_us_p50"],
          f"delay: QP srtt p50 {delay['srtt_us_p50']} us, none {none['srtt_us_p50']} us")

    # LTP under the same bottleneck: the transfer completes (one_run raises otherwise),
    # a data-checked pingpong (ibv_rc_pingpong -c) follows on the same fabric, the
    # daemon's QPs run "ltp" and its monitor intervals were decided (by the policy or its
    # delay-rule fallback). Its queue is printed, not compared: it fills the tbf queue
    # (docs/cc/ltp.md, "On the namespace fabric").
    ltp = one_run("ltp", shaped=True, check_data=True)
    check(ltp["qps"] >= 1 and ltp["cc_algorithms"] == ["ltp"],
          f"ltp: h1's daemon reports controllers {ltp['cc_algorithms']} on {ltp['qps']} QPs, "
          "expected ltp")
    check(ltp["ltp_decisions"] + ltp["ltp_fallback_mis"] > 0,
          f"ltp: no monitor interval was decided: {ltp}")
    check(delay["cc_algorithms"] == ["delay"] and not none["cc_algorithms"],
          f"controllers reported: none {none['cc_algorithms']}, delay {delay['cc_algorithms']}")

    dcqcn = one_run("dcqcn", shaped=False, ce=CE_PCT)
    check(dcqcn["cnps_received"] > 0, f"dcqcn: h1's QPs received no CNP: {dcqcn}")
    check(0 < dcqcn["min_rate_bps"] < LINE_MBIT * 1_000_000 * 0.9,
          f"dcqcn: h1's controllers never set a rate below 90 % of the line rate: {dcqcn}")
    print(f"tbf backlog mean / peak none {none['backlog_mean']} / {none['backlog_max']} B -> "
          f"delay {delay['backlog_mean']} / {delay['backlog_max']} B; "
          f"drops {none['drops']} -> {delay['drops']}; srtt {none['srtt_us_p50']} -> "
          f"{delay['srtt_us_p50']} us; dcqcn CNPs {dcqcn['cnps_received']}, "
          f"lowest rate {dcqcn['min_rate_bps'] / 1e6:.0f} Mbit/s")
    for r in (none, delay, ltp):
        print(f"{r['alg']:>5}: ib_write_bw {r['bw_MBps']} MB/s, tbf backlog mean / peak "
              f"{r['backlog_mean']} / {r['backlog_max']} B, drops {r['drops']}, srtt p50 "
              f"{r['srtt_us_p50']} us" + (f", policy MIs {r['ltp_decisions']}, fallback MIs "
                                          f"{r['ltp_fallback_mis']}, estimate p50 "
                                          f"{r['ltp_est_mbps_p50']} Mbit/s"
                                          if r["alg"] == "ltp" else ""))


if __name__ == "__main__":
    main(test)
