"""Run a pytest command several times in a row and report every test that failed at least
once (``make flaky N=3``).

    python tools/flaky.py --runs 3 --logs build/test-logs/flaky -- pytest tests/smoke ...

Each run writes its whole output to ``LOGS/run-K.log`` and a JUnit XML report to
``LOGS/run-K.xml`` (``--junitxml`` is added to the command). At the end it prints each run's
time and exit code, then each test that failed or errored in any run with the runs it failed
in and its failure line. Exit 0 only if every run passed.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Failure:
    """One test that failed in at least one run."""

    runs: list[int] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)


def failures_of(report: Path) -> dict[str, str]:
    """test id -> first line of its failure (or error) in a JUnit XML report."""
    out: dict[str, str] = {}
    if not report.exists():
        return out
    for case in ET.parse(report).getroot().iter("testcase"):
        for bad in (*case.findall("failure"), *case.findall("error")):
            name = f"{case.get('classname', '')}::{case.get('name', '')}"
            message = (bad.get("message") or bad.text or "").strip().splitlines()
            out.setdefault(name, message[0][:300] if message else bad.tag)
    return out


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--logs", type=Path, default=Path("build/test-logs/flaky"))
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = [c for c in args.command if c != "--"]
    if not command or args.runs < 1:
        parser.error("give --runs N (N >= 1) and the pytest command after --")
    args.logs.mkdir(parents=True, exist_ok=True)
    results: list[tuple[int, float, int]] = []
    failed: dict[str, Failure] = {}
    for k in range(1, args.runs + 1):
        log, report = args.logs / f"run-{k}.log", args.logs / f"run-{k}.xml"
        report.unlink(missing_ok=True)
        print(f"flaky: run {k} of {args.runs}: {' '.join(command)}", flush=True)
        started = time.monotonic()
        with log.open("w") as out:
            proc = subprocess.Popen(
                [*command, f"--junitxml={report}"],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
            assert proc.stdout is not None
            for line in proc.stdout:
                out.write(line)
                sys.stdout.write(f"[run {k}] {line}")
            code = proc.wait()
        elapsed = time.monotonic() - started
        results.append((k, elapsed, code))
        for name, line in failures_of(report).items():
            entry = failed.setdefault(name, Failure())
            entry.runs.append(k)
            entry.lines.append(line)
    print("\nflaky: runs")
    for k, elapsed, code in results:
        minutes, seconds = divmod(int(elapsed), 60)
        print(f"  run {k}: exit {code} in {minutes} min {seconds} s (log {args.logs}/run-{k}.log)")
    if failed:
        print(f"flaky: {len(failed)} test(s) failed at least once")
        for name, entry in sorted(failed.items()):
            print(f"  {name}: failed in run(s) {', '.join(map(str, entry.runs))}")
            for line in dict.fromkeys(entry.lines):
                print(f"      {line}")
    else:
        print("flaky: no test failed in any run")
    return 0 if all(code == 0 for _, _, code in results) and not failed else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
