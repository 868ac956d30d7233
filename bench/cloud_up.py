"""Benchmark: how long `harness up` takes when everything already runs (target < 3 s),
and `harness status`. Prints the numbers and writes bench/results/cloud_up.json."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

RUNS = 5


def timed(args: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(args, check=True, capture_output=True)
    return time.perf_counter() - started


def main() -> None:
    harness = [sys.executable, "-m", "harness.cli"]
    subprocess.run([*harness, "up"], check=True)  # make sure it is up (may take a while)
    up = [timed([*harness, "up"]) for _ in range(RUNS)]
    status = [timed([*harness, "status"]) for _ in range(RUNS)]
    result = {
        "warm_up_s": {"median": statistics.median(up), "max": max(up), "runs": up},
        "status_s": {"median": statistics.median(status), "max": max(status), "runs": status},
        "target_warm_up_s": 3.0,
    }
    out = Path(__file__).parent / "results" / "cloud_up.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    print(f"harness up (already up): median {statistics.median(up):.2f} s, max {max(up):.2f} s")
    print(f"harness status:          median {statistics.median(status):.2f} s")
    print(f"saved {out}")


if __name__ == "__main__":
    main()
