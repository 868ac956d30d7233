"""What an idle node costs: CPU of its processes and requests to the stores while nothing is
written, after a comp_test launch.

Launches tests/fixtures/comp_test.yaml (one node, the seeded external buckets of
``--run-id``) in a private SKYCORE_HOME, waits ``--settle`` seconds after the launch ended
(the refresher's first listings), then watches the node for ``--window`` seconds while
nothing touches it:

- CPU: the node's cgroup (every process, those that come and go included) and, by program,
  the user + system time of each process in the node (read from /proc of the node's
  processes, by their host pids: nothing runs in the node to measure it), as CPU-seconds
  over the window and as a share of one core;
- requests: every request the gates logged in the window on the task's buckets, by store
  and kind (the stores' bill while idle).

    .venv/bin/python bench/node_idle.py [--window 60] [--settle 15] [--run-id dy] [--no-check]

Targets: the node uses at most 0.5% of a core over the window; it sends at most 30 requests
a minute (comp_test's idle rate before its mount daemons woke on events). Exits 1 on a
missed target (unless --no-check) or a failed launch. Writes JSON to
bench/results/node_idle-<timestamp>.json.
"""

from __future__ import annotations

import io
import os
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

from bench_checks import Target, add_check_option, verdict
from common import ROOT, arg_parser, gate_log_offset, print_table, request_kind, save_results

TASK = ROOT / "tests" / "fixtures" / "comp_test.yaml"
TARGET_CORE_PCT = 0.5
TARGET_REQUESTS_PER_MIN = 30.0
CLK_TCK = os.sysconf("SC_CLK_TCK")


def cgroup_cpu_s(pid: int) -> float | None:
    """CPU-seconds used so far by the cgroup of host process ``pid``: cgroup v2's cpu.stat or
    v1's cpuacct.usage (None: unreadable)."""
    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, rel = line.split(":", 2)
        try:
            if controllers == "":
                stat = Path(f"/sys/fs/cgroup{rel}/cpu.stat").read_text().split()
                return int(stat[stat.index("usage_usec") + 1]) / 1e6
            if "cpuacct" in controllers.split(","):
                usage = Path(f"/sys/fs/cgroup/cpuacct{rel}/cpuacct.usage").read_text()
                return int(usage) / 1e9
        except (OSError, ValueError):
            continue
    return None


def process_cpu(pids: list[int]) -> dict[int, tuple[str, float]]:
    """{pid: (program, CPU-seconds so far)} of the host processes ``pids`` still alive."""
    out: dict[int, tuple[str, float]] = {}
    for pid in pids:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        ticks = int(fields[11]) + int(fields[12])  # utime, stime
        program = os.path.basename(argv[0].decode(errors="replace")) or stat.split("(")[1][:15]
        if program.startswith("python") and len(argv) > 2:
            program += " " + " ".join(a.decode(errors="replace") for a in argv[2:3])
        out[pid] = (program, ticks / CLK_TCK)
    return out


def window(
    container: Any, emulators: dict[str, Any], buckets: set[str], seconds: float
) -> dict[str, Any]:
    """CPU and requests (on ``buckets``: the task's) of the node in ``container`` over
    ``seconds`` of idleness."""
    init_pid = int(container.attrs["State"]["Pid"])
    pids = [int(row[1]) for row in container.top(ps_args="-eo user,pid")["Processes"]]
    offsets = {s: gate_log_offset(em) for s, em in emulators.items()}
    before, cg0, t0 = process_cpu(pids), cgroup_cpu_s(init_pid), time.monotonic()
    time.sleep(seconds)
    after, cg1, took = process_cpu(pids), cgroup_cpu_s(init_pid), time.monotonic() - t0
    by_program: Counter[str] = Counter()
    for pid, (program, cpu) in after.items():
        if pid in before:
            by_program[program] += cpu - before[pid][1]
    requests: dict[str, Counter[str]] = {}
    for store, em in emulators.items():
        with open(em.record.gate_log, "rb") as f:
            f.seek(offsets[store])
            lines = f.read().decode(errors="replace").splitlines()
        kinds: Counter[str] = Counter()
        for line in lines:
            parts = line.split()
            if len(parts) >= 3 and parts[2].startswith("/") and "/__gate__/" not in parts[2]:
                path = parts[2].split("?")[0].split("/")
                bucket = next((p for p in path if p in buckets), "")
                if bucket:
                    kinds[request_kind(parts[1], parts[2], bucket)] += 1
        requests[store] = kinds
    total = None if cg0 is None or cg1 is None else cg1 - cg0
    return {
        "window_s": round(took, 2),
        "cpu_s": None if total is None else round(total, 3),
        "core_pct": None if total is None else round(100 * total / took, 3),
        "by_program_cpu_s": {k: round(v, 3) for k, v in by_program.most_common()},
        "requests": {s: dict(k) for s, k in requests.items()},
        "requests_per_min": round(sum(sum(k.values()) for k in requests.values()) * 60 / took, 1),
    }


def main(argv: list[str] | None = None) -> int:
    p = arg_parser(__doc__)
    p.add_argument("--window", type=float, default=60.0, help="idle seconds measured")
    p.add_argument("--settle", type=float, default=15.0, help="seconds after the launch first")
    p.add_argument("--run-id", default="dy", help="RUN_ID of the seeded external buckets")
    add_check_option(p)
    args = p.parse_args(argv)

    home = Path(tempfile.mkdtemp(prefix="skycore-bench-idle-"))
    os.environ["SKYCORE_HOME"] = str(home)
    from harness.cloud import cloud
    from harness.emulators import fleet
    from skycore import execution
    from skycore.config import load_config, save_config
    from skycore.provision import docker as provider
    from skycore.task import Task

    cloud.up(say=lambda _m: None, stores=("s3", "gcs"))
    config = load_config()
    config.logs_dir = str(home / "sky_logs")
    save_config(config)
    os.chdir(ROOT)
    from rich.console import Console

    quiet = Console(file=io.StringIO(), width=200)
    name = f"idle-{uuid.uuid4().hex[:6]}"
    task = Task.from_yaml(TASK, {"RUN_ID": args.run_id})
    failures: list[str] = []
    result: dict[str, Any] = {}
    try:
        res = execution.launch(task, name, console=quiet, config=config, stream=False)
        if res.exit_code != 0:
            failures.append(f"the launch failed ({res.job_status}); logs in {res.log_dir}")
        else:
            print(f"launched {name}; settling {args.settle:g} s, then {args.window:g} s idle")
            time.sleep(args.settle)
            container = provider.client(config).containers.get(f"skycore-{name}-0")
            emulators = {s: fleet.get(s) for s in ("s3", "gcs")}
            buckets = {st.name for st in task.storage_mounts.values()}
            result = window(container, emulators, buckets, args.window)
    finally:
        execution.down(name, console=quiet, config=config)
    if result:
        print_table(
            [("program", "<40"), ("CPU-s", ">8")],
            [(k, f"{v:.3f}") for k, v in result["by_program_cpu_s"].items()],
        )
        print(
            f"node cgroup: {result['cpu_s']} CPU-s in {result['window_s']} s = "
            f"{result['core_pct']}% of a core"
        )
        for store, kinds in result["requests"].items():
            print(f"{store}: {sum(kinds.values())} requests {dict(kinds)}")
        print(f"requests: {result['requests_per_min']} a minute")
    targets = [
        Target("idle node CPU", result.get("core_pct"), TARGET_CORE_PCT, "% of a core"),
        Target(
            "idle requests", result.get("requests_per_min"), TARGET_REQUESTS_PER_MIN + 0.01, "/min"
        ),
    ]
    save_results(
        "node_idle",
        {
            "args": vars(args),
            "result": result,
            "targets": {t.name: t.as_json() for t in targets},
            "failures": failures,
        },
    )
    return verdict(targets, args.no_check, failures)


if __name__ == "__main__":
    sys.exit(main())
