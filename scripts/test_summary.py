#!/usr/bin/python3
"""The last word of `make test`: one line `make test: N passed, N failed, N skipped`.

  test_summary.py --allowed tests/ALLOWED_SKIPS --suites tests/SUITES RUN [RUN...]

RUN is NAME=BUILD_DIR=JUNIT: one ctest run of `make test` (its --output-junit file, and the
build tree it ran in, whose `ctest --show-only=json-v1` gives each test's labels). Counts
over every run: a test passed (status run), failed (fail; also a test ctest could not start,
or whose fixture failed: not run is not a skip), or was skipped (exit 77 under
SKIP_RETURN_CODE, or DISABLED because a tool is missing). Exits 1, after the line, when

  - a test failed, or a run left no JUnit file (ctest did not run to the end);
  - a test was skipped that no pattern of ALLOWED_SKIPS names (each line there: a Python
    regex matched against the whole test name, then the reason);
  - a suite of SUITES (name, selector, Debian packages it needs) registered no test although
    all of its packages are installed (`make deps` installs them all).
"""
import argparse
import json
import re
import subprocess
import sys
import xml.etree.ElementTree as ET


def read_list(path):
    rows = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            rows.append((n, line.split()))
    return rows


def installed(pkg):
    r = subprocess.run(["dpkg-query", "-W", "-f=${Status}", pkg], capture_output=True, text=True)
    return r.returncode == 0 and "install ok installed" in r.stdout


def labels_of(build_dir):
    r = subprocess.run(["ctest", "--show-only=json-v1"], cwd=build_dir, capture_output=True,
                       text=True)
    if r.returncode != 0:
        return {}
    out = {}
    for t in json.loads(r.stdout).get("tests", []):
        labels = []
        for p in t.get("properties", []):
            if p.get("name") == "LABELS":
                labels = p.get("value", [])
        out[t["name"]] = labels
    return out


def classify(tc):
    status = tc.get("status")
    if status == "run":
        return "passed"
    if status == "disabled":
        return "skipped"
    if status == "notrun":
        sk = tc.find("skipped")
        msg = sk.get("message", "") if sk is not None else ""
        if msg.startswith("SKIP_RETURN_CODE") or msg.startswith("SKIP_REGULAR_EXPRESSION"):
            return "skipped"
        return "failed"  # could not start, a fixture failed, ...
    return "failed"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--allowed", required=True)
    ap.add_argument("--suites", required=True)
    ap.add_argument("runs", nargs="+")
    a = ap.parse_args()

    allowed = []
    for n, f in read_list(a.allowed):
        allowed.append((re.compile(f[0]), " ".join(f[1:])))
    suites = []
    for n, f in read_list(a.suites):
        if len(f) < 2:
            sys.exit(f"{a.suites}:{n}: expected NAME SELECTOR [PACKAGE...]")
        suites.append((f[0], f[1], f[2:]))

    counts = {"passed": 0, "failed": 0, "skipped": 0}
    problems = []
    seen = []  # (run, name, outcome, labels)
    for spec in a.runs:
        try:
            run, build_dir, junit = spec.split("=", 2)
        except ValueError:
            sys.exit(f"bad RUN {spec!r}: expected NAME=BUILD_DIR=JUNIT")
        try:
            root = ET.parse(junit).getroot()
        except (OSError, ET.ParseError) as e:
            problems.append(f"{run}: no JUnit results ({e}): that ctest run did not finish")
            continue
        labels = labels_of(build_dir)
        for tc in root.iter("testcase"):
            name = tc.get("name")
            outcome = classify(tc)
            counts[outcome] += 1
            seen.append((run, name, outcome, labels.get(name, [])))
            if outcome == "failed":
                why = tc.find("failure")
                sk = tc.find("skipped")
                msg = (why.get("message") if why is not None else None) or (
                    sk.get("message") if sk is not None else "")
                problems.append(f"{run}: FAILED {name}" + (f" ({msg})" if msg else ""))
            elif outcome == "skipped":
                reason = next((r for rx, r in allowed if rx.fullmatch(name)), None)
                if reason is None:
                    out = (tc.findtext("system-out") or "").strip().splitlines()
                    hint = next((l for l in out if "SKIP" in l), out[-1] if out else "")
                    problems.append(f"{run}: SKIPPED {name}, not in tests/ALLOWED_SKIPS"
                                    + (f" ({hint.strip()[:160]})" if hint else ""))
                else:
                    print(f"test_summary: {run}: skipped {name} (allowed: {reason})")

    for name, selector, pkgs in suites:
        kind, _, value = selector.partition(":")
        if kind == "label":
            members = [s for s in seen if value in s[3]]
        elif kind == "name":
            rx = re.compile(value)
            members = [s for s in seen if rx.search(s[1])]
        else:
            sys.exit(f"{a.suites}: suite {name}: selector must be label:X or name:REGEX")
        ran = [s for s in members if s[2] != "skipped"]
        missing = [p for p in pkgs if not installed(p)]
        print(f"test_summary: suite {name}: {len(members)} tests, {len(ran)} ran"
              + (f" (missing packages: {' '.join(missing)})" if missing else ""))
        if not members and not missing:
            problems.append(f"suite {name} registered no test although its packages are installed"
                            f" ({' '.join(pkgs) or 'none needed'})")

    for p in problems:
        print(f"test_summary: {p}")
    print(f"make test: {counts['passed']} passed, {counts['failed']} failed, "
          f"{counts['skipped']} skipped")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
