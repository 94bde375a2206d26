#!/usr/bin/python3
"""`up --sroced`: a daemon per host, and unchanged RDMA programs through
`sroce-fabric exec HOST -- sroce-run -- PROGRAM` with no other option.

2 hosts over 4 spines with sroced on each. Checks that each host's daemon
answers on its own socket in the run directory and serves that host's address;
that `exec` exports SROCE_SOCKET for the host it runs on; then Debian's
ibv_rc_pingpong with -c (the server checks the client's pattern in every page) runs
between h1 and h2, its RoCE packets cross the spines (the fabric's counters,
both directions), and both daemons saw the QPs' traffic. `down` stops the
daemons (no process, socket or namespace left).

With `--datapath dpdk` (or dpdk:af_packet: ctest fabric.sroced_dpdk) the
daemons run the DPDK datapath on the hosts' eth0 (`up --datapath`, MTU 3000)
and the same checks hold: the routed fabric carries DPDK's frames.

Needs root, build/bin/sroced and ibv_rc_pingpong; SKIP (77) otherwise (and
for a DPDK datapath, when sroced was built without DPDK)."""

import json
import os
import shutil
import subprocess
import sys
import time

from fabric_test import (RUN_ROOT, SKIP, CheckFailed, Fabric, check, main, netns_with_prefix,
                         run_tool, tool)

PORT = 18790
PROGRAM_TIMEOUT = 90


def bin_dir() -> str:
    return os.path.dirname(os.path.abspath(tool()))


def require_binaries() -> None:
    b = bin_dir()
    missing = [f for f in ("sroced", "sroce-run", "sroce") if not os.access(os.path.join(b, f),
                                                                            os.X_OK)]
    if missing or not shutil.which("ibv_rc_pingpong"):
        print(f"SKIP: needs {', '.join(missing) or 'ibv_rc_pingpong'} (in {b} / PATH)")
        sys.exit(SKIP)


def pid_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def daemon_stats(f: Fabric, host: str) -> dict:
    """`sroce status --json` run on HOST with no socket option: it finds the
    daemon through the SROCE_SOCKET that exec exported."""
    return json.loads(f.exec(host, os.path.join(bin_dir(), "sroce"), "status", "--json",
                             timeout=60))


def roce_from(f: Fabric, leaf: str) -> int:
    """RoCE packets that entered the spines from `leaf`."""
    dirs = f.directions()
    return sum(d["counters"].get("roce_packets", 0) for n, d in dirs.items()
               if n.startswith(f"{leaf}>s"))


def daemon_logs(f: Fabric) -> str:
    out = []
    for h in ("h1", "h2"):
        try:
            with open(os.path.join(RUN_ROOT, f.name, f"sroced-{h}.log")) as lg:
                out.append(f"--- sroced-{h}.log (last lines):\n" + "".join(lg.readlines()[-15:]))
        except FileNotFoundError:
            out.append(f"--- no sroced-{h}.log")
    return "\n".join(out)


DATAPATH = "udp"


def test() -> None:
    require_binaries()
    extra = ["--datapath", DATAPATH] if DATAPATH != "udp" else []
    with Fabric("srd", "--sroced", *extra, hosts=2, spines=4) as f:
        try:
            socks, pids = across(f)
        except (CheckFailed, subprocess.TimeoutExpired) as e:
            raise CheckFailed(f"{e}\n{daemon_logs(f)}") from None

    # down stopped the daemons and removed their sockets with the run directory.
    check(not netns_with_prefix(f.name), f"namespaces left: {netns_with_prefix(f.name)}")
    deadline = time.monotonic() + 10
    while any(pid_alive(p) for p in pids.values()) and time.monotonic() < deadline:
        time.sleep(0.05)
    check(not any(pid_alive(p) for p in pids.values()), f"sroced still running: {pids}")
    check(not any(os.path.exists(s) for s in socks.values()), f"sockets left: {socks}")


def wait_listening(f: Fabric, host: str, port: int, server: subprocess.Popen, what: str) -> None:
    """Returns once `server` (a program pair's server on `host`) listens on TCP `port`: the
    client starts then, not after a sleep that a loaded machine can outlast. Fails if the
    server exits first or does not listen within 60 s."""
    deadline = time.monotonic() + 60
    while not f.exec(host, "ss", "-Hltn", f"sport = :{port}").strip():
        if server.poll() is not None or time.monotonic() > deadline:
            server.kill()
            raise CheckFailed(f"{what} did not listen on {host}:{port}: {server.communicate()[0]}")
        time.sleep(0.1)


def pingpong(f: Fabric, port: int, iters: int, size: int) -> None:
    """Debian's ibv_rc_pingpong -c between h2 (server) and h1 through sroce-run: both exit 0,
    the server found the client's pattern in every page, both report iters x size each way.
    Bounded by timeout(1) inside the host: a hung program fails the test (with both outputs)
    well before ctest's own timeout."""
    sroce_run = os.path.join(bin_dir(), "sroce-run")
    args = ["timeout", "-k", "5", str(PROGRAM_TIMEOUT), sroce_run, "--",
            "ibv_rc_pingpong", "-g", "0", "-p", str(port), "-s", str(size), "-n", str(iters), "-c"]
    server = subprocess.Popen([tool(), "exec", "--name", f.name, "h2", "--", *args],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    f.procs.append(server)
    wait_listening(f, "h2", port, server, "ibv_rc_pingpong server")
    client = run_tool("exec", "--name", f.name, "h1", "--", *args, f.addr("h2"),
                      check_rc=False, timeout=PROGRAM_TIMEOUT + 30)
    sout = server.communicate(timeout=PROGRAM_TIMEOUT + 30)[0]
    both = f"--- client:\n{client.stdout}{client.stderr}\n--- server:\n{sout}"
    check(client.returncode == 0 and server.returncode == 0,
          f"ibv_rc_pingpong: client exit {client.returncode}, server {server.returncode}\n"
          f"{both}")
    # -c: the client sends a pattern (the first byte of every page); at the
    # end the server checks it in its receive buffer and prints "invalid data
    # in page N" for a page without it (its exit status stays 0).
    check("invalid data" not in sout, f"the server found invalid data\n{both}")
    # Each iteration moves a message each way.
    for who, text in (("client", client.stdout), ("server", sout)):
        check(f"\n{iters} iters in" in text and f"\n{iters * size * 2} bytes in" in text,
              f"{who} did not report {iters} iterations of {size} bytes\n{both}")


def datacheck(f: Fabric, port: int, steps: int, max_size: int = 65536) -> str:
    """sroce-datacheck (tests/lib/datacheck) between h2 (server) and h1 through sroce-run: every
    byte of SEND, SEND with immediate, WRITE, WRITE with immediate, READ and both atomics'
    results, random sizes and offsets; both must exit 0. Unlike ibv_rc_pingpong, neither side
    leaves before the other has all its completions (a TCP verdict closes each round), so a
    lost last ACK is repaired instead of meeting a destroyed QP. Returns the client's summary."""
    prog = os.path.join(bin_dir(), "sroce-datacheck")
    check(os.access(prog, os.X_OK), f"{prog} is not built")
    sroce_run = os.path.join(bin_dir(), "sroce-run")
    args = ["timeout", "-k", "5", str(PROGRAM_TIMEOUT), sroce_run, "--", prog, "-g", "0",
            "-p", str(port)]
    server = subprocess.Popen([tool(), "exec", "--name", f.name, "h2", "--", *args],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    f.procs.append(server)
    wait_listening(f, "h2", port, server, "sroce-datacheck server")
    client = run_tool("exec", "--name", f.name, "h1", "--", *args, "-n", str(steps),
                      "-s", str(max_size), f.addr("h2"), check_rc=False,
                      timeout=PROGRAM_TIMEOUT + 30)
    sout = server.communicate(timeout=PROGRAM_TIMEOUT + 30)[0]
    both = f"--- client:\n{client.stdout}{client.stderr}\n--- server:\n{sout}"
    check(client.returncode == 0 and server.returncode == 0,
          f"sroce-datacheck: client exit {client.returncode}, server {server.returncode}\n{both}")
    ok = [ln for ln in client.stdout.splitlines() if "client OK" in ln]
    check(ok and "server OK" in sout, f"sroce-datacheck did not report OK on both sides\n{both}")
    return ok[0]


def across(f: Fabric) -> tuple[dict, dict]:
    """Everything inside the fabric; returns the daemons' sockets and pids."""
    st = f.state()
    socks = st.get("sroced", {})
    check(set(socks) == {"h1", "h2"}, f"journal lists sockets {socks}, expected h1 and h2")
    pids = {h: st["pids"].get(f"sroced/{h}") for h in ("h1", "h2")}
    check(all(pids.values()) and all(pid_alive(p) for p in pids.values()),
          f"sroced pids {pids} not all alive")
    run_dir = os.path.join(RUN_ROOT, f.name)
    for h, sock in socks.items():
        check(os.path.dirname(sock) == run_dir and sock.endswith(f"sroced-{h}.sock"),
              f"{h}: socket {sock} is not the host's own in {run_dir}")

    # exec exports the host's socket, replacing one inherited from the caller.
    env = dict(os.environ, SROCE_SOCKET="/nonexistent/elsewhere.sock")
    for h in ("h1", "h2"):
        got = run_tool("exec", "--name", f.name, h, "--", "printenv", "SROCE_SOCKET",
                       env=env).stdout.strip()
        check(got == socks[h], f"exec {h}: SROCE_SOCKET={got!r}, expected {socks[h]!r}")
        stats = daemon_stats(f, h)
        check(stats.get("netdev") == "eth0" and stats.get("gids") == [f.addr(h)],
              f"{h}'s daemon serves {stats.get('netdev')} {stats.get('gids')}, expected "
              f"eth0 [{f.addr(h)}]")
        check(stats.get("socket") == socks[h], f"{h}: daemon on {stats.get('socket')}")

    before = {leaf: roce_from(f, leaf) for leaf in ("l1", "l2")}
    engine0 = {h: daemon_stats(f, h)["engine"] for h in ("h1", "h2")}
    pingpong(f, PORT, iters=100, size=65536)

    # Across the fabric: 100 messages of 64 KiB at MTU 1024 (the example's
    # default) are 6400 request packets each way, crossing the spines.
    after = {leaf: roce_from(f, leaf) for leaf in ("l1", "l2")}
    moved = {leaf: after[leaf] - before[leaf] for leaf in after}
    check(all(v >= 6400 for v in moved.values()),
          f"RoCE packets into the spines {moved}: expected >= 6400 from each leaf")
    for h in ("h1", "h2"):
        stats = daemon_stats(f, h)
        d = {k: stats["engine"][k] - engine0[h][k] for k in ("rx_packets", "tx_packets")}
        check(min(d.values()) >= 6400, f"{h}'s daemon moved {d} packets: expected >= 6400 "
              "each way (did the program use another daemon?)")
        check(stats["objects"]["qps"] == 0 and not stats["contexts"],
              f"{h}: the program's objects outlived it: {stats['objects']}")
    print(f"RoCE packets into the spines: {moved}")
    return socks, pids


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--datapath":
        DATAPATH = sys.argv[2]
    elif len(sys.argv) != 1:
        sys.exit("usage: test_sroced.py [--datapath udp|dpdk|dpdk:af_packet]")
    main(test)
