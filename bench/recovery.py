"""Recovery benchmark: how fast a managed spot job gets back to training after a preemption.

Runs the training program (tests/fixtures/train) as a managed job with its checkpoints on a
MOUNT_CACHED bucket, then preempts its node --trials times (each time after a new checkpoint
reached the bucket). Per preemption it measures, from the moment the node was removed:

- detect:      the controller marked the job RECOVERING (target: under 5 s)
- node back:   the relaunched node is up
- running:     the job is RUNNING again (setup done, run started)
- first step:  the program logged its first step after resuming (target: under 20 s)

    .venv/bin/python bench/recovery.py [--store s3] [--trials 3] [--ckpt-mib 2] [--no-check]

Needs the local cloud ('harness up'). Works in a temporary SKYCORE_HOME (a copy of the
cloud's config); prints a table and saves JSON under bench/results/.

Every figure is a difference of wall-clock times taken on this machine; the clocks' offset
(wall minus monotonic) is sampled at each trial's start and end, and a trial during which it
moved by more than 50 ms is invalid: reported, run again (3 runs at most), never in the
summary. A trial whose steps are out of order or negative is a failure (INCONSISTENT).

A measurement that never happened (no RECOVERING event, no "nodes up", no new step before
--trial-timeout) is null in the JSON and makes the trial FAILED, never 0 s. The run exits 1
when a trial failed, and when a target was missed unless --no-check (exploratory runs).
``--fault freeze-controller`` checks that: it freezes the job's controller (SIGSTOP) just
before each preemption, so the preemption is never detected; the controller is continued
after the trial.
"""

from __future__ import annotations

import argparse
import functools
import os
import re
import shutil
import signal
import statistics
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

from bench_checks import Target, add_check_option, verdict
from bench_clock import MAX_DRIFT_NS, ClockWatch, until_valid
from bench_consistency import in_order, negatives
from common import arg_parser, cell, print_table, save_results, wait_for, write_train_task

from harness import emulator_registry as registry
from harness.accounts import USER
from harness.cloud import chaos, preemption
from harness.emulators import fleet as emulators
from skycore.config import load_config, save_config, skycore_home
from skycore.managed import core
from skycore.state import managed_jobs as jstate
from skycore.state.managed_jobs import JobStatus

DETECT_TARGET_S = 5.0
TRAINING_TARGET_S = 20.0
STEP_RE = re.compile(r"^step (\d+) \S+ t=([\d.]+)$", re.M)
RESUME_RE = re.compile(r"^RESUME step=(\d+) \S+ t=([\d.]+)$", re.M)
STEPS = ("detect_s", "node_back_s", "running_s", "first_step_s")  # in the order they happen


def fresh_home(base: Path) -> Path:
    """A SKYCORE_HOME with the local cloud's config and its own logs folder."""
    source = skycore_home() / "config.yaml"
    if not source.exists():
        sys.exit(f"No skycore config at {source}: run 'harness up' first.")
    home = base / "home"
    home.mkdir(parents=True)
    shutil.copy2(source, home / "config.yaml")
    os.environ["SKYCORE_HOME"] = str(home)
    config = load_config()
    config.logs_dir = str(base / "sky_logs")
    save_config(config)
    return home


def task_yaml(base: Path, url: str, args: argparse.Namespace) -> Path:
    """The training task: long enough to outlive every trial (cancelled at the end)."""
    return write_train_task(
        base,
        "bench-recovery",
        {"/checkpoints": {"source": url, "mode": "MOUNT_CACHED"}},
        f"python3 train.py --ckpt-dir /checkpoints/ckpt --steps 100000 --every {args.every}"
        f" --ckpt-mib {args.ckpt_mib} --step-seconds {args.step_seconds}",
    )


def manifests(store: str, bucket: str) -> set[int]:
    """Steps whose checkpoint manifest is in the bucket."""
    from harness.testing.buckets import list_keys

    out = set()
    for key in list_keys(store, bucket, USER):
        m = re.match(r"^ckpt/checkpoint-(\d+)\.json$", key)
        if m:
            out.add(int(m.group(1)))
    return out


def log_text(job: jstate.ManagedJob) -> str:
    path = Path(job.log_path)
    return path.read_text(errors="replace") if path.exists() else ""


def event_after(job_id: int, t: float, pred: Any) -> float | None:
    """Time of the first event after ``t`` matching ``pred``."""
    for ev in jstate.events(job_id):
        if ev.ts >= t and pred(ev):
            return float(ev.ts)
    return None


def seconds_since(t0: float, t: float | None) -> float | None:
    """``t - t0`` rounded, or None when ``t`` never happened (never 0)."""
    return None if t is None else round(t - t0, 3)


def one_trial(
    job: jstate.ManagedJob, store: str, bucket: str, n: int, args: argparse.Namespace
) -> dict[str, Any]:
    """Wait for a fresh checkpoint in the bucket, preempt, measure the way back. What was not
    seen within ``args.trial_timeout`` is None and the row says why the trial failed.

    Every time here is another process's wall clock (the preemption's, the controller's
    events, the program's log), so the clocks' offset is sampled at the start and at the end:
    a trial during which it moved is invalid (``clock_valid``), its figures untrusted."""
    watch = ClockWatch.start()
    row: dict[str, Any] = {
        "trial": n,
        "detect_s": None,
        "node_back_s": None,
        "running_s": None,
        "first_step_s": None,
        "resumed_from_step": None,
        "error": None,
    }
    have = manifests(store, bucket)
    wait_for(
        "a new checkpoint in the bucket",
        lambda: (manifests(store, bucket) - have) or None,
        120,
    )
    frozen = None
    if args.fault == "freeze-controller":
        frozen = (jstate.get(job.job_id) or job).controller_pid
        if frozen:
            os.kill(frozen, signal.SIGSTOP)
    try:
        hit = preemption.preempt(job.cluster, 0)
        t0 = hit.issued_at
        done = None
        try:
            done = wait_for(
                "the job to run again",
                lambda: event_after(
                    job.job_id,
                    t0,
                    lambda e: (
                        e.to_status == JobStatus.RUNNING and e.from_status == JobStatus.RECOVERING
                    ),
                ),
                args.trial_timeout,
            )
        except TimeoutError as e:
            row["error"] = str(e)
        detect = event_after(job.job_id, t0, lambda e: e.to_status == JobStatus.RECOVERING)
        node_back = event_after(job.job_id, t0, lambda e: e.reason.startswith("nodes up"))
        row["detect_s"] = seconds_since(t0, detect)
        row["node_back_s"] = seconds_since(t0, node_back)
        row["running_s"] = seconds_since(t0, done)

        def first_step() -> tuple[float, int] | None:
            text = log_text(job)
            resumes = [(int(s), float(t)) for s, t in RESUME_RE.findall(text) if float(t) > t0]
            if not resumes:
                return None
            # The old run may log a step or two between the removal and its death: count
            # only steps of the resumed run.
            steps = [float(t) for _, t in STEP_RE.findall(text) if float(t) > resumes[0][1]]
            return (steps[0], resumes[0][0]) if steps else None

        if done is not None:
            try:
                step_t, row["resumed_from_step"] = wait_for("the first new step", first_step, 60)
                row["first_step_s"] = seconds_since(t0, step_t)
            except TimeoutError as e:
                row["error"] = str(e)
    finally:
        if frozen:
            os.kill(frozen, signal.SIGCONT)
    watch.stop()
    row.update(watch.as_json())
    steps = [(k, row[k]) for k in STEPS]
    row["inconsistent"] = negatives(dict(steps)) + in_order(steps)
    missing = [k for k in STEPS if row[k] is None]
    if missing and not row["error"]:
        row["error"] = f"not measured: {', '.join(missing)}"

    def fmt(key: str) -> str:
        return cell(row[key], missing="  --  ", unit="s")

    print(
        f"trial {n}: detect {fmt('detect_s')}  node back {fmt('node_back_s')}  "
        f"running {fmt('running_s')}  first step {fmt('first_step_s')}  "
        + (
            f"FAILED ({row['error']})"
            if row["error"]
            else f"(resumed from step {row['resumed_from_step']})"
        ),
        flush=True,
    )
    return row


def main() -> int:
    parser = arg_parser(__doc__)
    parser.add_argument("--store", default="s3", choices=registry.store_names())
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--ckpt-mib", type=float, default=2.0)
    parser.add_argument("--every", type=int, default=10, help="checkpoint every N steps")
    parser.add_argument("--step-seconds", type=float, default=0.1)
    parser.add_argument(
        "--trial-timeout",
        type=float,
        default=120,
        help="seconds to wait for the job to run again after a preemption",
    )
    parser.add_argument(
        "--fault",
        choices=["freeze-controller"],
        help="inject a fault that must make the run fail (checks that it fails loudly)",
    )
    add_check_option(parser)
    args = parser.parse_args()

    base = Path(tempfile.mkdtemp(prefix="bench-recovery-"))
    fresh_home(base)
    em = emulators.get(args.store)
    bucket = f"bench-recovery-{uuid.uuid4().hex[:10]}"
    url = em.make_bucket(bucket, owner=USER, public=False, objects={})
    job = core.launch(task_yaml(base, url, args), name="bench-recovery", use_spot=True)
    print(f"managed job {job.job_id} on cluster {job.cluster}; log {job.log_path}", flush=True)
    rows: list[dict[str, Any]] = []
    invalid: list[dict[str, Any]] = []
    aborted = None
    try:
        wait_for(
            "the job to run",
            lambda: (jstate.get(job.job_id) or job).status is JobStatus.RUNNING,
            180,
        )
        for n in range(1, args.trials + 1):
            row, drifted = until_valid(
                functools.partial(one_trial, job, args.store, bucket, n, args),
                lambda r: r["clock_valid"] or bool(r["error"]),
            )
            invalid += drifted
            for r in drifted:
                print(f"INVALID trial {n} (clock offset moved {r['clock_drift_ms']} ms): run again")
            if row is None:
                break
            rows.append(row)
            if row["error"]:
                break  # the job is not where the next trial expects it
    except (TimeoutError, chaos.ChaosError) as e:
        aborted = str(e)  # recorded as a failure below, with whatever was measured
    finally:
        core.cancel([job.job_id])
        try:
            final = core.wait(job.job_id, 180)
            print(f"job {job.job_id} {final.status.value}", flush=True)
        except TimeoutError as e:
            print(f"cleanup: {e}", flush=True)
        em.delete_bucket(bucket)
        shutil.rmtree(base, ignore_errors=True)

    def summary(key: str) -> dict[str, float | int | None]:
        values = [r[key] for r in rows if r[key] is not None]
        return {
            "mean": round(statistics.mean(values), 3) if values else None,
            "max": round(max(values), 3) if values else None,
            "min": round(min(values), 3) if values else None,
            "missing": len(rows) - len(values),
        }

    def worst(key: str) -> float | None:
        # Any trial without the figure makes the target unmeasured (missed), never met.
        values = [r[key] for r in rows]
        return None if not values or None in values else max(values)

    keys = STEPS
    totals = {k: summary(k) for k in keys}
    targets = [
        Target("detection (max over trials)", worst("detect_s"), DETECT_TARGET_S),
        Target("back to training (max over trials)", worst("first_step_s"), TRAINING_TARGET_S),
    ]
    failures = [f"trial {r['trial']}: {r['error']}" for r in rows if r["error"]]
    failures += [f"trial {r['trial']}: INCONSISTENT {p}" for r in rows for p in r["inconsistent"]]
    if invalid and len(rows) < args.trials:
        failures.append(f"{len(invalid)} trial(s) invalid (the clocks' offset moved)")
    if aborted:
        failures.append(f"aborted: {aborted}")
    if len(rows) < args.trials:
        failures.append(f"{len(rows)} of {args.trials} trials ran")

    print()
    print_table(
        [("", "<14"), ("mean", ">8"), ("min", ">8"), ("max", ">8"), ("missing", ">8")],
        [
            (k, *(cell(totals[k][s], missing="--") for s in ("mean", "min", "max")),
             totals[k]["missing"])
            for k in keys
        ],
        sep="",
    )  # fmt: skip
    save_results(
        "recovery",
        {
            "store": args.store,
            "ckpt_mib": args.ckpt_mib,
            "every": args.every,
            "step_seconds": args.step_seconds,
            "poll_interval_s": 0.5,
            "trials": rows,
            "invalid_trials": invalid,
            "clock_max_drift_ms": MAX_DRIFT_NS / 1e6,
            "summary": totals,
            "targets": {t.name: t.as_json() for t in targets},
            "failures": failures,
            "fault": args.fault,
            "checked": not args.no_check,
        },
    )
    return verdict(targets, args.no_check, failures)


if __name__ == "__main__":
    sys.exit(main())
