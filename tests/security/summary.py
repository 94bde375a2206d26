#!/usr/bin/python3
"""The summary line of a ctest run from its JUnit file (ctest --output-junit):

    tests/security/summary.py RESULTS.xml NAME [CTEST_EXIT_CODE]

prints "NAME: N passed, N failed" (and the skipped ones, by name) and exits 1 when
any test failed, when ctest itself failed, or when no test ran at all.
"""
import sys
import xml.etree.ElementTree as ET


def main():
    path, name = sys.argv[1], sys.argv[2]
    ctest_rc = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as e:
        print(f"{name}: no results ({e})")
        return 1
    passed, failed, skipped = [], [], []
    for tc in root.iter("testcase"):
        n = tc.get("name", "?")
        if tc.find("failure") is not None or tc.find("error") is not None:
            failed.append(n)
        elif tc.find("skipped") is not None or tc.get("status") in ("notrun", "disabled"):
            skipped.append(n)
        else:
            passed.append(n)
    for n in failed:
        print(f"{name}: FAILED {n}")
    for n in skipped:
        print(f"{name}: skipped {n}")
    extra = f" ({len(skipped)} skipped)" if skipped else ""
    print(f"{name}: {len(passed)} passed, {len(failed)} failed{extra}")
    if failed or ctest_rc != 0:
        return 1
    if not passed and not skipped:
        print(f"{name}: no test ran")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
