"""Benchmark: how long `harness up` takes when everything already runs (target < 3 s),
and `harness status`. Prints the numbers, writes bench/results/cloud_up.json and exits 1 when
the target is missed (--no-check: an exploratory run, exit 0).

    .venv/bin/python bench/cloud_up.py [--runs 5] [--no-check]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench_checks import Target, add_check_option, verdict
from bench_consistency import negatives

TARGET_WARM_UP_S = 3.0


def timed(args: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(args, check=True, capture_output=True)
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    add_check_option(parser)
    args = parser.parse_args()
    harness = [sys.executable, "-m", "harness.cli"]
    subprocess.run([*harness, "up"], check=True)  # make sure it is up (may take a while)
    up = [timed([*harness, "up"]) for _ in range(args.runs)]
    status = [timed([*harness, "status"]) for _ in range(args.runs)]
    timings = {f"up run {i}": t for i, t in enumerate(up)}
    timings |= {f"status run {i}": t for i, t in enumerate(status)}
    failures = [f"INCONSISTENT {p}" for p in negatives(timings)]
    # Every warm 'harness up' must be under the target, not just the typical one.
    target = Target("warm harness up (max over runs)", max(up), TARGET_WARM_UP_S)
    result = {
        "warm_up_s": {"median": statistics.median(up), "max": max(up), "runs": up},
        "status_s": {"median": statistics.median(status), "max": max(status), "runs": status},
        "target_warm_up_s": TARGET_WARM_UP_S,
        "targets": {target.name: target.as_json()},
        "checked": not args.no_check,
    }
    out = Path(__file__).parent / "results" / "cloud_up.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    print(f"harness up (already up): median {statistics.median(up):.2f} s, max {max(up):.2f} s")
    print(f"harness status:          median {statistics.median(status):.2f} s")
    print(f"saved {out}")
    return verdict([target], args.no_check, failures)


if __name__ == "__main__":
    sys.exit(main())
