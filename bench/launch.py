"""Launch benchmark: comp_test.yaml on the local cloud, cold (new cluster) and warm
(relaunch on the UP cluster), for 1 and 4 nodes, with per-stage durations; the launcher's own
stages split from the user's workload.

    .venv/bin/python bench/launch.py [--nodes 1 4] [--repeat 3] [--workloads comp_test trivial]
                                     [--run-id dy] [--no-check]

Two workloads on the same file mounts and workdir: ``comp_test`` (tests/fixtures/comp_test.yaml
as it is) and ``trivial`` (the same YAML, written to a temporary folder with ``setup`` and
``run`` replaced by ``true``), so EXEC of ``trivial`` is the launcher's own cost of a run.
The launcher's stages are every stage but EXEC (PROVISION, SYNC_WORKDIR, SYNC_FILE_MOUNTS,
SETUP); each figure is the median of ``--repeat`` runs, and the load average is recorded
before and after every launch.

Brings the local cloud up if needed (S3 + GCS: the stores comp_test.yaml uses), runs in a
private SKYCORE_HOME so it never touches your clusters, tears its clusters down, prints
tables and writes JSON to bench/results/launch-<timestamp>.json.
After each cold launch it reads, on every node, the rclone processes serving the mounts, their
memory (RSS) and CPU time. Targets (comp_test): cold single-node < 20 s, warm single-node
< 8 s, 4 nodes < 1.5x single-node (cold and warm), the launcher's stages of a cold launch at
4 nodes < 1.3x single-node, warm relaunch < 2.5 s, rclone RSS < 100 MiB per node.
Exits 1 when one is missed or a launch failed (--no-check: an exploratory
run, exit 0 after a missed target; a failed launch still exits 1).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import yaml
from bench_checks import Target, add_check_option, verdict
from bench_consistency import negatives, parts_over_whole
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
TASK = ROOT / "tests" / "fixtures" / "comp_test.yaml"
RESULTS = ROOT / "bench" / "results"
STAGES = ("PROVISION", "SYNC_WORKDIR", "SYNC_FILE_MOUNTS", "SETUP", "EXEC")
LAUNCHER_STAGES = STAGES[:-1]
WORKLOADS = ("comp_test", "trivial")
PHASES = ("cold", "warm")
TARGET_COLD_S = 20.0
TARGET_WARM_S = 8.0
TARGET_SCALE = 1.5
TARGET_LAUNCHER_SCALE = 1.3
TARGET_WARM_RELAUNCH_S = 2.5
TARGET_RCLONE_RSS_MIB = 100.0

# Per node: rclone processes, their RSS (KiB; and its private part, RssAnon, and its
# file-backed part, RssFile: mostly the rclone binary's pages, one copy in the page cache for
# every node) and CPU seconds (user + system).
RCLONE_USAGE = r"""
tck=$(getconf CLK_TCK)
n=0; rss=0; anon=0; file=0; cpu=0
for p in $(pgrep -x rclone); do
  m=$(awk '/^(VmRSS|RssAnon|RssFile):/ {printf "%s ", $2}' /proc/$p/status 2>/dev/null) || continue
  t=$(awk '{print $14 + $15}' /proc/$p/stat 2>/dev/null) || continue
  set -- $m
  [ $# -eq 3 ] || continue
  n=$((n + 1)); rss=$((rss + $1)); anon=$((anon + $2)); file=$((file + $3)); cpu=$((cpu + t))
done
echo "SKYCORE_RCLONE $n $rss $cpu $tck $anon $file"
"""


def rclone_usage(name: str, config: Any) -> list[dict[str, Any]]:
    """rclone processes, RSS and CPU-s on every node of cluster ``name``."""
    from skycore import backend, state

    record = state.get_cluster(name)
    if record is None:
        return []
    handle = backend.get_handle(record, config)
    out: list[dict[str, Any]] = []
    for rank, runner in enumerate(handle.runners):
        _rc, text = runner.run_output(RCLONE_USAGE, timeout=60)
        line = next((ln for ln in text.splitlines() if ln.startswith("SKYCORE_RCLONE ")), "")
        if not line:
            out.append(
                {
                    "rank": rank,
                    "processes": None,
                    "rss_mib": None,
                    "anon_mib": None,
                    "file_mib": None,
                    "cpu_s": None,
                }
            )
            continue
        n, rss_kib, ticks, tck, anon_kib, file_kib = (int(x) for x in line.split()[1:])
        out.append(
            {
                "rank": rank,
                "processes": n,
                "rss_mib": round(rss_kib / 1024, 1),
                "anon_mib": round(anon_kib / 1024, 1),
                "file_mib": round(file_kib / 1024, 1),
                "cpu_s": round(ticks / tck, 2),
            }
        )
    return out


def trivial_yaml(folder: Path) -> Path:
    """comp_test.yaml with ``setup`` and ``run`` replaced by ``true``, written to ``folder``
    (same file mounts and workdir: relative paths resolve against the current directory)."""
    data = yaml.safe_load(TASK.read_text())
    data["name"] = "comp-test-trivial"
    data["setup"] = "true\n"
    data["run"] = "true\n"
    path = folder / "comp_test_trivial.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def _one(workload: str, path: Path, nodes: int, run_id: str, out: Console) -> dict[str, Any]:
    """Cold launch, warm relaunch and down of one fresh cluster of ``nodes`` nodes."""
    from skycore import execution
    from skycore.config import load_config
    from skycore.task import Task

    config = load_config()
    task = Task.from_yaml(path, {"RUN_ID": run_id})
    task.num_nodes = nodes
    if nodes > 1 and task.run:
        # comp_test.yaml writes then reads back one key per bucket; on several nodes at once
        # that is a write race on a single object (an uncached mount reads a torn object).
        # Give each node its own key.
        task.run = task.run.replace("hellotest.txt", "hellotest-$SKYPILOT_NODE_RANK.txt")
    name = f"bench-{uuid.uuid4().hex[:6]}-n{nodes}"
    quiet = Console(file=io.StringIO(), width=200)
    record: dict[str, Any] = {"workload": workload, "nodes": nodes, "cluster": name}
    try:
        for phase in PHASES:
            load_before = _load()
            t0 = time.monotonic()
            res = execution.launch(task, name, console=quiet, config=config, stream=False)
            total = time.monotonic() - t0
            if res.exit_code != 0:
                raise RuntimeError(
                    f"{phase} launch of {name} failed ({res.job_status}); logs in {res.log_dir}"
                )
            raw = {s.stage.value: s.seconds for s in res.stages}
            record.setdefault("inconsistent", []).extend(
                f"{workload} {nodes} node(s) {phase}: {p}" for p in stage_problems(raw, total)
            )
            stages = {k: round(v, 3) for k, v in raw.items()}
            launcher = sum(stages.get(s, 0.0) for s in LAUNCHER_STAGES)
            record[phase] = {
                "total_s": round(total, 3),
                "launcher_s": round(launcher, 3),
                "stages_s": stages,
                "loadavg_before": load_before,
                "loadavg_after": _load(),
            }
            out.print(
                f"  {workload} {nodes} node(s) {phase}: {total:5.2f}s "
                f"(launcher {launcher:5.2f}s) "
                + " ".join(f"{k}={v:.2f}" for k, v in stages.items())
                + f" load {load_before[0]}",
                highlight=False,
            )
            if phase == "cold":
                record["rclone"] = rclone_usage(name, config)
                for r in record["rclone"]:
                    out.print(
                        f"    node {r['rank']}: {r['processes']} rclone process(es), "
                        f"{r['rss_mib']} MiB RSS ({r['anon_mib']} private, "
                        f"{r['file_mib']} file-backed), {r['cpu_s']} CPU-s",
                        highlight=False,
                    )
    finally:
        t0 = time.monotonic()
        try:
            execution.down(name, console=quiet, config=config)
        finally:
            record["down_s"] = round(time.monotonic() - t0, 3)
    return record


def stage_problems(stages: dict[str, float], total: float) -> list[str]:
    """What cannot be in one launch's figures: a negative stage, a stage or the stages
    together (they run one after another) longer than the launch's total."""
    return [
        *negatives({**stages, "total_s": total}),
        *parts_over_whole("total_s", total, {**stages, "stages together": sum(stages.values())}),
    ]


def _median(records: list[dict[str, Any]], phase: str, key: str = "total_s") -> float | None:
    """Median of ``key`` (total_s, launcher_s or a stage name); None for a stage that did not
    run in every record (never 0)."""
    vals = [
        r[phase][key] if key in ("total_s", "launcher_s") else r[phase]["stages_s"].get(key)
        for r in records
    ]
    present = [v for v in vals if v is not None]
    return round(statistics.median(present), 3) if present and len(present) == len(vals) else None


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or not b else round(a / b, 2)


def _cell(v: float | None, unit: str = "s") -> str:
    return "-" if v is None else f"{v:.2f}{unit}"


def _stage_table(runs: dict[str, dict[int, list[dict[str, Any]]]], repeat: int) -> Table:
    """One row per workload x nodes x phase: medians of the total, the launcher and stages."""
    table = Table(title=f"skycore launch of {TASK.name} (median of {repeat})")
    for col in ("workload", "nodes", "phase", "total", "launcher", *STAGES):
        table.add_column(col, justify="right")
    for workload, by_nodes in runs.items():
        for nodes, recs in by_nodes.items():
            for phase in PHASES:
                table.add_row(
                    workload,
                    str(nodes),
                    phase,
                    _cell(_median(recs, phase)),
                    _cell(_median(recs, phase, "launcher_s")),
                    *(_cell(_median(recs, phase, s)) for s in STAGES),
                )
    return table


def _scaling(
    runs: dict[str, dict[int, list[dict[str, Any]]]],
) -> dict[str, dict[str, float | None]]:
    """Per workload and phase: launcher stages and whole launch, 4 nodes over 1 node."""
    out: dict[str, dict[str, float | None]] = {}
    for workload, by_nodes in runs.items():
        if 1 not in by_nodes or 4 not in by_nodes:
            continue
        one, four = by_nodes[1], by_nodes[4]
        for phase in PHASES:
            out[f"{workload}:{phase}"] = {
                "launcher_4_over_1": _ratio(
                    _median(four, phase, "launcher_s"), _median(one, phase, "launcher_s")
                ),
                "total_4_over_1": _ratio(_median(four, phase), _median(one, phase)),
            }
    return out


def _scaling_table(scaling: dict[str, dict[str, float | None]]) -> Table:
    table = Table(title="4 nodes / 1 node (medians)")
    for col in ("workload", "phase", "launcher stages 4/1", "whole launch 4/1"):
        table.add_column(col, justify="right")
    for key, row in scaling.items():
        workload, phase = key.split(":")
        table.add_row(
            workload,
            phase,
            _cell(row["launcher_4_over_1"], "x"),
            _cell(row["total_4_over_1"], "x"),
        )
    return table


def _targets(
    runs: dict[str, dict[int, list[dict[str, Any]]]],
    summary: dict[str, Any],
    scaling: dict[str, dict[str, float | None]],
) -> list[Target]:
    """The stated targets, all on comp_test, and the rclone RSS on every node."""
    targets: list[Target] = []
    comp = runs.get("comp_test", {})
    if 1 in comp:
        targets.append(Target("cold_1 (median)", summary["comp_test:1:cold"], TARGET_COLD_S))
        targets.append(Target("warm_1 (median)", summary["comp_test:1:warm"], TARGET_WARM_S))
    if "comp_test:cold" in scaling:
        cold, warm = scaling["comp_test:cold"], scaling["comp_test:warm"]
        targets.append(Target("cold_4 / cold_1", cold["total_4_over_1"], TARGET_SCALE, "x"))
        targets.append(Target("warm_4 / warm_1", warm["total_4_over_1"], TARGET_SCALE, "x"))
        targets.append(
            Target(
                "launcher stages cold_4 / cold_1",
                cold["launcher_4_over_1"],
                TARGET_LAUNCHER_SCALE,
                "x",
            )
        )
    if 1 in comp:
        targets.append(
            Target("warm relaunch (1 node)", summary["comp_test:1:warm"], TARGET_WARM_RELAUNCH_S)
        )
    per_node = [
        r
        for by_nodes in runs.values()
        for recs in by_nodes.values()
        for rec in recs
        for r in rec.get("rclone", [])
    ]
    rss = [r["rss_mib"] for r in per_node]
    worst_rss = None if not rss or None in rss else max(rss)
    summary["rclone_per_node"] = {
        "max_processes": max((r["processes"] or 0) for r in per_node) if per_node else None,
        "max_rss_mib": worst_rss,
        "max_cpu_s": max((r["cpu_s"] or 0) for r in per_node) if per_node else None,
    }
    targets.append(Target("rclone RSS per node (max)", worst_rss, TARGET_RCLONE_RSS_MIB, "MiB"))
    return targets


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; 1 if a target was missed (unless --no-check), else 0."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--repeat", type=int, default=3, help="runs per node count (median)")
    parser.add_argument(
        "--workloads",
        nargs="+",
        choices=WORKLOADS,
        default=list(WORKLOADS),
        help="comp_test as it is, and/or the same mounts with a trivial setup and run",
    )
    parser.add_argument("--run-id", default="dy", help="RUN_ID of the seeded external buckets")
    add_check_option(parser)
    args = parser.parse_args(argv)
    if not args.no_check and (1 not in args.nodes or "comp_test" not in args.workloads):
        parser.error(
            "the targets need --nodes 1 (and 4 for the scaling ones) and the comp_test "
            "workload; add --no-check"
        )
    out = Console(highlight=False, width=160)

    home = Path(tempfile.mkdtemp(prefix="skycore-bench-"))
    os.environ["SKYCORE_HOME"] = str(home)
    from harness.cloud import cloud
    from skycore.config import load_config, save_config

    out.print("Bringing up the local cloud (dockerd, node image, S3, GCS)...")
    cloud.up(say=lambda _m: None, stores=("s3", "gcs"))
    config = load_config()
    config.logs_dir = str(home / "sky_logs")
    save_config(config)
    os.chdir(ROOT)
    paths = {"comp_test": TASK, "trivial": trivial_yaml(home)}

    load_before = _load()
    runs: dict[str, dict[int, list[dict[str, Any]]]] = {}
    for workload in args.workloads:
        runs[workload] = {}
        for nodes in args.nodes:
            runs[workload][nodes] = [
                _one(workload, paths[workload], nodes, args.run_id, out) for _ in range(args.repeat)
            ]
    load_after = _load()

    summary: dict[str, Any] = {}
    for workload, by_nodes in runs.items():
        for nodes, recs in by_nodes.items():
            for phase in PHASES:
                summary[f"{workload}:{nodes}:{phase}"] = _median(recs, phase)
                summary[f"{workload}:{nodes}:{phase}:launcher"] = _median(recs, phase, "launcher_s")
    scaling = _scaling(runs)
    out.print(_stage_table(runs, args.repeat))
    out.print(_scaling_table(scaling))
    targets = _targets(runs, summary, scaling)
    out.print(f"  rclone per node (worst): {summary['rclone_per_node']}")
    out.print(f"  load average before {load_before}, after {load_after} ({os.cpu_count()} CPUs)")

    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"launch-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(
        json.dumps(
            {
                "task": str(TASK.relative_to(ROOT)),
                "workloads": args.workloads,
                "at": time.time(),
                "cpus": os.cpu_count(),
                "loadavg_before": load_before,
                "loadavg_after": load_after,
                "repeat": args.repeat,
                "summary_s": summary,
                "scaling": scaling,
                "targets": {t.name: t.as_json() for t in targets},
                "checked": not args.no_check,
                "runs": runs,
            },
            indent=2,
        )
    )
    out.print(f"Results: {path}")
    failures = [
        f"INCONSISTENT {p}"
        for by_nodes in runs.values()
        for recs in by_nodes.values()
        for r in recs
        for p in r.get("inconsistent", [])
    ]
    return verdict(targets, args.no_check, failures)


if __name__ == "__main__":
    sys.exit(main())
