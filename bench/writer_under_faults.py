"""Writer under faults: how fast a MOUNT_CACHED writer on a node creates, writes and closes
files while its store is slow or out, against a fault-free mount of the same node.

The smoke tests (tests/smoke/test_faults.py) check the cause: the writer returns while the
store is slow, refuses or holds every request, before any of its uploads completed. This
measures the speed, both conditions interleaved under the same load (one node, one bucket
per condition, each fault scoped to its bucket):

- checkpoints: --writes 16 MiB files, each written to the fault-free mount and then to one
  whose store has 300 ms latency and 5 MiB/s; per side the median and the best of the
  write-and-close time and of the create time (target: the slow side's median write at most
  0.25 s more than the fault-free one's; a writer held by the store would take the upload's
  3.2 s).
- small files: --files 4 KiB files per fault (403 deny, outage, 503 on every request), in
  batches of 10 alternating with the fault-free mount; the median and the 90th percentile
  of the create-write-close time per side (target: the median under the fault at most 2x the
  fault-free one, or 2 ms more; a create that asked the store adds a round trip).

    .venv/bin/python bench/writer_under_faults.py [--stores s3,azure] [--writes 6]
        [--files 200] [--no-check]

Needs the local cloud ('harness up'). Works in a temporary SKYCORE_HOME (a copy of the
cloud's config); prints a table per store and saves JSON under bench/results/ (with the load
average before and after each store). A figure that could not be measured is null and
misses its target.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench_checks import Target, add_check_option, verdict
from bench_consistency import in_order, negatives
from common import add_stores_option, arg_parser, cell, names, print_table, save_results
from recovery import fresh_home

from harness.testing import timed_writes
from harness.testing.buckets import SKY_MANAGED, TestBucket
from harness.testing.side_by_side import ScenarioKit

MIB = 1 << 20
CHECKPOINT_MIB = 16
SLOW_MS, SLOW_MIBPS = 300, 5
SMALL = 4 << 10
BATCH = 10
FAULTS = ("deny", "outage", "errors")
EXTRA_WRITE_TARGET_S = 0.25  # the slow side's median write over the fault-free one's
CREATE_RATIO_TARGET, CREATE_SLACK_S = 2.0, 0.002  # a create under a fault / fault-free

# Per fault, batches of BATCH small files alternating between the fault-free mount and the
# faulty one; each file's create-write-close time.
CREATES = """python3 - '{plan}' <<'PY'
import json, os, sys, time
plan = json.loads(sys.argv[1])
data = os.urandom(plan["size"])
out = {{}}
for kind in plan["kinds"]:
    sides = out[kind] = {{"clean": [], "fault": []}}
    for r in range(plan["files"] // plan["batch"]):
        for side, root in (("clean", f"/clean/{{kind}}"), ("fault", f"/{{kind}}/many")):
            for i in range(plan["batch"]):
                started = time.monotonic()
                with open(f"{{root}}/r{{r}}-{{i:03d}}.bin", "wb") as f:
                    f.write(data)
                sides[side].append(time.monotonic() - started)
print("RESULT " + json.dumps(out))
PY"""


def shell(cluster: Any, cmd: str, timeout: float = 600) -> str:
    code, out = cluster.shell(cmd, timeout=timeout)
    if code != 0:
        raise RuntimeError(f"exit {code} on the node:\n{out[-3000:]}")
    return str(out)


def quantile(values: list[float], q: float) -> float | None:
    """The ``q`` quantile of ``values`` (None if there are none)."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def summary(values: list[float]) -> dict[str, float | None]:
    return {
        "median": statistics.median(values) if values else None,
        "best": min(values) if values else None,
        "p90": quantile(values, 0.9),
        "n": len(values),
    }


def checkpoints(
    kit: ScenarioKit, cluster: Any, store: str, slow: TestBucket, writes: int
) -> dict[str, Any]:
    """``writes`` checkpoints to /clean/ckpt and /slow/ckpt, alternating, ``slow`` (mounted
    at /slow) made slow meanwhile."""
    taken: dict[str, dict[str, list[float]]] = {
        side: {"create": [], "write": []} for side in ("clean", "slow")
    }
    with (
        kit.store_faults.latency(store, ms=SLOW_MS, bucket=slow.name),
        kit.store_faults.bandwidth(store, mibps=SLOW_MIBPS, bucket=slow.name),
    ):
        for i in range(writes):
            paths = [f"/clean/ckpt/c-{i}.bin", f"/slow/ckpt/c-{i}.bin"]
            out = shell(cluster, timed_writes.command(paths, CHECKPOINT_MIB * MIB))
            for path, create, write, _ in timed_writes.parse(out):
                side = path.split("/")[1]
                taken[side]["create"].append(create)
                taken[side]["write"].append(write)
    return {side: {k: summary(v) for k, v in t.items()} for side, t in taken.items()}


def creates(
    kit: ScenarioKit, cluster: Any, store: str, buckets: dict[str, TestBucket], files: int
) -> dict[str, Any]:
    """``files`` small files per fault against the fault-free mount, each fault on in its
    bucket (``buckets``: fault kind -> bucket, mounted at /KIND) meanwhile."""
    faults = [kit.store_faults.start(store, k, bucket=b.name) for k, b in buckets.items()]
    try:
        plan = {"kinds": FAULTS, "files": files, "batch": BATCH, "size": SMALL}
        out = shell(cluster, CREATES.format(plan=json.dumps(plan)))
    finally:
        for fault in faults:
            kit.store_faults.stop(store, fault)
    match = re.search(r"^RESULT (.*)$", out, re.M)
    if not match:
        raise RuntimeError(f"no result from the node:\n{out[-3000:]}")
    found = json.loads(match.group(1))
    return {k: {side: summary(v) for side, v in found[k].items()} for k in FAULTS}


def one_store(store: str, base: Path, writes: int, files: int) -> dict[str, Any]:
    """Both measurements on one node of ``store``; its figures."""
    kit = ScenarioKit(store, base / store)
    kit.tmp_path.mkdir(parents=True, exist_ok=True)
    failed = True
    try:
        sides = ("slow", "clean", *FAULTS)
        buckets = {side: kit.bucket_factory(store, SKY_MANAGED) for side in sides}
        cluster = kit.cluster_factory("bench-writer")
        mounts = {f"/{side}": b.mount_entry("MOUNT_CACHED") for side, b in buckets.items()}
        outcome = cluster.launch({"name": "bench-writer", "file_mounts": mounts, "run": "true"})
        if outcome.exit_code != 0:
            raise RuntimeError(f"launch failed:\n{outcome.output[-3000:]}")
        dirs = ["/slow/ckpt", "/clean/ckpt"] + [f"/{k}/many" for k in FAULTS]
        dirs += [f"/clean/{k}" for k in FAULTS]
        shell(cluster, "mkdir -p " + " ".join(dirs) + " && ls " + " ".join(dirs))
        load_before = [round(x, 2) for x in os.getloadavg()]
        figures = {
            "checkpoints": checkpoints(kit, cluster, store, buckets["slow"], writes),
            "creates": creates(kit, cluster, store, {k: buckets[k] for k in FAULTS}, files),
            "loadavg_before": load_before,
            "loadavg_after": [round(x, 2) for x in os.getloadavg()],
        }
        failed = False
        return figures
    finally:
        kit.close(failed=failed)


def summary_problems(name: str, stats: dict[str, float | None], n: int) -> list[str]:
    """What cannot be in one ``summary``: a negative time, best over median over p90, or not
    ``n`` values."""
    steps = [(f"{name} {k}", stats[k]) for k in ("best", "median", "p90")]
    problems = [*negatives(dict(steps)), *in_order(steps)]
    if stats["n"] != n:
        problems.append(f"{name} n is {stats['n']}, not the {n} measured")
    return problems


def figure_problems(figures: dict[str, Any], writes: int, files: int) -> list[str]:
    """What cannot be in one store's figures (every summary checked)."""
    problems = []
    for side, kinds in figures.get("checkpoints", {}).items():
        for what, stats in kinds.items():
            problems += summary_problems(f"checkpoint {side} {what}", stats, writes)
    for kind, sides in figures.get("creates", {}).items():
        for side, stats in sides.items():
            problems += summary_problems(f"create {kind} {side}", stats, files)
    return problems


def store_targets(store: str, figures: dict[str, Any]) -> list[Target]:
    """The targets of one store's figures (None: not measured)."""
    ckpt = figures.get("checkpoints") or {}
    slow, clean = (ckpt.get(s, {}).get("write", {}).get("median") for s in ("slow", "clean"))
    extra = None if slow is None or clean is None else slow - clean
    targets = [
        Target(f"{store} checkpoint write, slow - clean (median)", extra, EXTRA_WRITE_TARGET_S)
    ]
    for kind in FAULTS:
        sides = (figures.get("creates") or {}).get(kind, {})
        fault, free = (sides.get(s, {}).get("median") for s in ("fault", "clean"))
        ratio = None
        if fault is not None and free:
            # within the slack a create is as fast as a fault-free one
            ratio = 1.0 if fault - free <= CREATE_SLACK_S else fault / free
        name = f"{store} create under {kind} / clean (median)"
        targets.append(Target(name, ratio, CREATE_RATIO_TARGET, "x"))
    return targets


def print_store(store: str, figures: dict[str, Any]) -> None:
    ckpt = figures["checkpoints"]
    print(f"\n{store}: {CHECKPOINT_MIB} MiB checkpoints (s), load {figures['loadavg_before']}")
    stats = [("write", "median"), ("write", "best"), ("create", "median"), ("create", "best")]
    print_table(
        [("", "<7"), *((f"{what} {k}", ">13") for what, k in stats)],
        [(side, *(cell(ckpt[side][w][k], ".3f") for w, k in stats)) for side in ("clean", "slow")],
    )
    print(f"{store}: {SMALL >> 10} KiB files, create-write-close (ms)")
    stats = [("clean", "median"), ("clean", "p90"), ("fault", "median"), ("fault", "p90")]
    sides = figures["creates"]
    print_table(
        [("", "<7"), *((f"{side} {k}", ">13") for side, k in stats)],
        [(kind, *(cell(_ms(sides[kind][s][k]), ".2f") for s, k in stats)) for kind in FAULTS],
    )


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * 1000


def main() -> int:
    parser = arg_parser(__doc__)
    add_stores_option(parser)
    parser.add_argument("--writes", type=int, default=6, help="checkpoints per side")
    parser.add_argument("--files", type=int, default=200, help="small files per fault and side")
    add_check_option(parser)
    args = parser.parse_args()
    if args.files % BATCH:
        parser.error(f"--files must be a multiple of {BATCH}")

    base = Path(tempfile.mkdtemp(prefix="bench-writer-"))
    fresh_home(base)
    results: dict[str, Any] = {}
    failures: list[str] = []
    try:
        for store in names(args.stores):
            try:
                results[store] = one_store(store, base, args.writes, args.files)
            except Exception as e:  # recorded; the other stores still run
                failures.append(f"{store}: {e}")
                results[store] = {}
                continue
            print_store(store, results[store])
            for problem in figure_problems(results[store], args.writes, args.files):
                failures.append(f"{store}: INCONSISTENT {problem}")
                print(failures[-1])
    finally:
        shutil.rmtree(base, ignore_errors=True)
    targets = [t for store, figures in results.items() for t in store_targets(store, figures)]
    save_results(
        "writer_under_faults",
        {
            "checkpoint_mib": CHECKPOINT_MIB,
            "slow_store": {"ms": SLOW_MS, "mibps": SLOW_MIBPS},
            "small_kib": SMALL >> 10,
            "writes": args.writes,
            "files": args.files,
            "stores": results,
            "targets": {t.name: t.as_json() for t in targets},
            "failures": failures,
            "checked": not args.no_check,
        },
    )
    return verdict(targets, args.no_check, failures)


if __name__ == "__main__":
    sys.exit(main())
