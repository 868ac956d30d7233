"""Run a pytest command several times in a row and report every test that failed at least
once (``make flaky N=3``).

    python tools/flaky.py --runs 3 --logs build/test-logs/flaky [--load] -- pytest tests/smoke ...

Each run writes its whole output to ``LOGS/run-K.log`` and a JUnit XML report to
``LOGS/run-K.xml`` (``--junitxml`` is added to the command). At the end it prints each run's
time and exit code, then each test that failed or errored in any run with the runs it failed
in and its failure line. Exit 0 only if every run passed. ``--load`` (``make flaky LOAD=1``)
keeps one core busy beside the runs (tools/cpu_hog.py), stopped at the end even on failure or
Ctrl-C; the output says that it ran and how much CPU it took.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

HOG = Path(__file__).with_name("cpu_hog.py")


@dataclass
class Failure:
    """One test that failed in at least one run."""

    runs: list[int] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)


class Load:
    """tools/cpu_hog.py running beside the runs: one busy core."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.proc = subprocess.Popen(
            [sys.executable, str(HOG), "--parent", str(os.getpid())], stdin=subprocess.DEVNULL
        )
        self.summary = ""

    def cpu_seconds(self) -> float | None:
        """CPU time the hog has used so far (None if it cannot be read)."""
        try:
            stat = Path(f"/proc/{self.proc.pid}/stat").read_text()
        except OSError:
            return None
        utime, stime = stat[stat.rindex(")") + 2 :].split()[11:13]
        return (int(utime) + int(stime)) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> str:
        """Stop the hog (once; it is gone when this returns) and say what it did."""
        if self.summary:
            return self.summary
        elapsed = time.monotonic() - self.started
        early = self.proc.poll()
        cpu = self.cpu_seconds()
        if early is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        used = "?" if cpu is None else f"{cpu:.1f}"
        how = "beside every run" if early is None else f"but it ended early (exit {early})"
        self.summary = (
            f"flaky: load: a CPU hog (tools/cpu_hog.py, pid {self.proc.pid}) ran on one core "
            f"{how}: {used} CPU-s in {elapsed:.1f} s"
        )
        return self.summary


@contextlib.contextmanager
def cpu_load(enabled: bool) -> Iterator[Load | None]:
    """A Load while the block runs if ``enabled``; it is stopped however the block ends."""
    if not enabled:
        yield None
        return
    load = Load()
    print(
        f"flaky: load: a CPU hog (tools/cpu_hog.py, pid {load.proc.pid}) busy on one core",
        flush=True,
    )
    try:
        yield load
    finally:
        load.stop()


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


def run_all(
    command: list[str], runs: int, logs: Path
) -> tuple[list[tuple[int, float, int]], dict[str, Failure]]:
    """Run ``command`` ``runs`` times: (run, seconds, exit code) per run and the failures."""
    results: list[tuple[int, float, int]] = []
    failed: dict[str, Failure] = {}
    for k in range(1, runs + 1):
        log, report = logs / f"run-{k}.log", logs / f"run-{k}.xml"
        report.unlink(missing_ok=True)
        print(f"flaky: run {k} of {runs}: {' '.join(command)}", flush=True)
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
    return results, failed


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--logs", type=Path, default=Path("build/test-logs/flaky"))
    parser.add_argument("--load", action="store_true", help="keep one core busy beside the runs")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = [c for c in args.command if c != "--"]
    if not command or args.runs < 1:
        parser.error("give --runs N (N >= 1) and the pytest command after --")
    args.logs.mkdir(parents=True, exist_ok=True)
    with cpu_load(args.load) as load:
        results, failed = run_all(command, args.runs, args.logs)
        load_summary = load.stop() if load else ""
    print("\nflaky: runs")
    for k, elapsed, code in results:
        minutes, seconds = divmod(int(elapsed), 60)
        print(f"  run {k}: exit {code} in {minutes} min {seconds} s (log {args.logs}/run-{k}.log)")
    if load_summary:
        print(load_summary)
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
