"""A training run's lifetime: a managed spot job's checkpoints on a small disk, through faults.

A managed spot job writes checkpoints through an ordered MOUNT_CACHED mount on a node whose
disk is smaller than all it writes, over a WAN, through a 503 storm, an outage and a
preemption.

The job (``skycore jobs launch`` path, use_spot, FAILOVER recovery) runs the training program
(tests/fixtures/train/train.py): ``--checkpoints`` checkpoints of ``--ckpt-mib`` MiB, each a
data file and then its marker (the manifest ``checkpoint-<step>.json``), one every
``--every-s`` seconds of training (the write's own time comes on top), into
``/checkpoints/ckpt`` (the run's bucket, MOUNT_CACHED, transfers 1: ordered), on a node with
``resources.disk_size: --disk-gib`` and ``config.mount_cached.vfs_cache_max_size:
--cache-max``. A checkpoint whose write fails for space (the cache is full of files the store
does not have yet) is removed by the program, which says so and trains on.

Network and faults, all scoped to the run's bucket (the gate's faults):
- ``--wan`` profile for the whole run (on by default; ``--no-wan``): 30 ms a request, 8 MiB/s
  a stream;
- a 503 storm (rate ``--storm-rate``): from the moment checkpoint ``--storm-at`` was tried
  (saved or failed) until ``--storm-checkpoints`` more were;
- an outage of ``--outage-s`` seconds from the moment checkpoint ``--outage-at`` was tried;
- one preemption (``harness.cloud.preemption.preempt``: the node and its disk are gone) as soon as
  a checkpoint at or after ``--preempt-at`` was tried once the outage had ended, so that the
  checkpoints before it may still be uploading (files only in its cache go with the node);
  the job recovers from the newest complete checkpoint in the store.

Checks (each a failure, exit 1): the job SUCCEEDED with the result of an uninterrupted run;
what the store held was at every moment a prefix of the creation order (data-then-marker by
ascending step, a checkpoint written again after the recovery taking its place, a removed
one leaving it; the gate's write events replayed, deletes included: bench/training_model.py
has the rules); every file of it is in the store at the end, whole (data matching its
marker), and no other (a removed checkpoint's, a preempted attempt's never written again),
other than those that went with the preempted node; the recovered attempt resumed from the
newest checkpoint whose data and marker were in the store when the job was recovered (the
gate's writes up to the controller marking the job RECOVERING, and up to the resumed
program's RESUME line); the cache kept its bound: no cleaner pass of rclone (every 10 s,
logged per mount) ended with its total size above the bound while nothing was in use (open,
or not yet uploaded), queued or uploading, as rclone never evicts a file the store does not
have yet; every figure consistent (bench/bench_consistency.py); the faults hit requests.

Reported: checkpoints tried, saved, failed (which and why) and durable; order (kept or the
first violation); the peak cache size against the bound and the disk (rclone's own count,
sampled from the host every 0.5 s through the rc socket on the node's disk, and every cleaner
line); where recovery resumed against the newest complete checkpoint; how long each
checkpoint took from saved to in the store; CPU-seconds per node per minute (the node
container's cgroup); store requests per checkpoint (the gate's log on the bucket).

    .venv/bin/python bench/training_run.py [--store s3] [--checkpoints 16] [--ckpt-mib 128]
        [--every-s 4] [--disk-gib 1] [--cache-max 256M] [--no-wan] [--no-check]

Every duration is monotonic; the gate's and the program's wall-clock times are mapped onto it
by the clocks' offset, sampled at the start, after the job and at the end (bench_clock): a
run whose offset moved by more than 50 ms, or whose WAN faults did not last it, is invalid
and run again (3 runs at most). Writes JSON to bench/results/training_run-<time>.json.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import training_model as tm
from bench_checks import add_check_option, verdict
from bench_clock import MAX_DRIFT_NS, ClockWatch, until_valid
from bench_network import WAN_LATENCY_MS, WAN_STREAM_MIBPS, Network, behind, not_held
from common import (
    TRAIN_DIR,
    arg_parser,
    cell,
    gate_log_offset,
    gate_requests,
    print_table,
    save_results,
    write_train_task,
)
from node_watch import NodeWatch
from recovery import fresh_home
from training_figures import durable_in_store, figures, judge
from training_schedule import Schedule, ScheduleError

from harness import emulator_registry as registry
from harness.accounts import USER
from harness.emulators import fleet as emulators
from skycore.managed import core
from skycore.state import managed_jobs as jstate
from skycore.storage.units import read_size

MOUNT = "/checkpoints"
MIB = 1 << 20


def task_yaml(base: Path, url: str, args: argparse.Namespace) -> Path:
    """The training task: checkpoints at steps 1..K, then the result at step K + 1."""
    entry = {
        "source": url,
        "mode": "MOUNT_CACHED",
        "config": {"mount_cached": {"vfs_cache_max_size": args.cache_max}},
    }
    resources = {
        "disk_size": args.disk_gib,
        "job_recovery": {"strategy": "FAILOVER", "max_restarts_on_errors": 0},
    }
    return write_train_task(
        base,
        "training-run",
        {MOUNT: entry},
        f"python3 train.py --ckpt-dir {MOUNT}/ckpt --steps {args.checkpoints + 1} "
        f"--every 1 --ckpt-mib {args.ckpt_mib} --step-seconds {args.every_s}",
        resources,
    )


def uninterrupted_result(steps: int) -> str:
    """The sha256 of the final weights of an uninterrupted run (the program on this host)."""
    with tempfile.TemporaryDirectory() as tmp:
        argv = [sys.executable, str(TRAIN_DIR / "train.py"), "--ckpt-dir", tmp,
                "--steps", str(steps), "--every", "0", "--step-seconds", "0"]  # fmt: skip
        out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    m = re.search(r"RESULT sha256=([0-9a-f]+)", out)
    if not m:
        raise RuntimeError(f"the training program gave no result: {out[-500:]}")
    return m.group(1)


def head_container(cluster: str) -> Any:
    """A function giving (container name, init pid) of node 0 of ``cluster``, or None."""
    from skycore.config import load_config
    from skycore.provision import docker as provider

    config = load_config()

    def find() -> tuple[str, int] | None:
        client = provider.client(config)
        for c in client.containers.list(filters={"label": f"{provider.LABEL_CLUSTER}={cluster}"}):
            pid = int(c.attrs["State"]["Pid"] or 0)
            if int(c.labels.get(provider.LABEL_RANK, -1)) == 0 and pid:
                return c.name or "", pid
        return None

    return find


def mounts_dir(cluster: str) -> Any:
    """A function giving the host folder bound into node 0 (its disk's ``fs/mounts``)."""
    from skycore.provision import disks

    return lambda: disks.disk_of(cluster, 0).source


def result_sha(em: Any, bucket: str) -> str | None:
    """The weights' sha256 that result.json in the store records (None: none)."""
    try:
        return str(json.loads(em.read_object(bucket, tm.RESULT_KEY))["sha256"])
    except Exception:  # absent or unreadable: no result
        return None


def one_run(args: argparse.Namespace, network: Network | None, expected: str) -> dict[str, Any]:
    """One training run from launch to teardown; its figures and failures."""
    watch = ClockWatch.start()
    t0 = time.monotonic()
    base = Path(tempfile.mkdtemp(prefix="btr-"))  # short: the node disks' paths hang under it
    fresh_home(base)
    em = emulators.get(args.store)
    bucket = f"training-run-{uuid.uuid4().hex[:10]}"
    url = em.make_bucket(bucket, owner=USER, public=False, objects={})
    row: dict[str, Any] = {"bucket": bucket, "failures": [], "inconsistent": []}
    job = None
    try:
        offset = gate_log_offset(em)
        net = network or Network()
        with behind(em, bucket, net) as held:
            job = core.launch(task_yaml(base, url, args), name="training-run", use_spot=True)
            print(f"managed job {job.job_id} on cluster {job.cluster}; log {job.log_path}")
            nodes = NodeWatch(mounts_dir(job.cluster), head_container(job.cluster), MOUNT)
            schedule = Schedule(args, em, bucket, job, t0)
            nodes.start()
            try:
                schedule.run()
            except ScheduleError as e:
                row["failures"].append(f"schedule: {e}")
            finally:
                schedule.clear_faults()
                nodes.stop()
        watch.mark()
        row["faults"] = schedule.faults
        row["network"] = net.as_json() if network else None
        row["network_faults"] = held
        row["network_problems"] = not_held(net, held) if network else []
        final = jstate.get(job.job_id) or job
        row["job"] = {"status": final.status.value, "reason": final.status_reason,
                      "recoveries": final.recovery_count}  # fmt: skip

        def mono(wall_s: float) -> float:
            """A wall-clock time in seconds since the run's start on the monotonic clock."""
            return round(watch.to_monotonic_ns(int(wall_s * 1e9)) / 1e9 - t0, 3)

        events = em.events(bucket)
        figures(
            row,
            log=schedule.log(),
            events=events,
            requests=gate_requests(em, bucket, offset),
            schedule=schedule,
            nodes=nodes.nodes,
            bound=read_size(args.cache_max, "256M", rclone_forms=True),
            mono=mono,
            t0=t0,
        )
        row["watch_errors"] = nodes.errors[:10]
        row["store"] = durable_in_store(
            lambda key: bytes(em.read_object(bucket, key)), row["order"]["expected"]
        )
        row["result_matches_uninterrupted"] = result_sha(em, bucket) == expected
        row["failures"] += judge(row, final.status.value, final.status_reason)
    finally:
        if job is not None and not (jstate.get(job.job_id) or job).status.terminal:
            core.cancel([job.job_id])
            try:
                core.wait(job.job_id, 300)
            except TimeoutError as e:
                row["failures"].append(f"cleanup: {e}")
        em.delete_bucket(bucket)
        if row["failures"]:
            row["logs"] = str(base)  # the job's and the launches' logs, kept for a look
            print(f"logs kept in {base}")
        else:
            shutil.rmtree(base, ignore_errors=True)
    watch.stop()
    row.update(watch.as_json())
    row["valid"] = watch.valid and not row.get("network_problems")
    row["wall_s"] = round(time.monotonic() - t0, 3)
    return row


# --- output --------------------------------------------------------------------------------


def mib(n: float | None) -> str:
    return cell(None if n is None else n / MIB, ".1f", missing="--", unit=" MiB")


def report(row: dict[str, Any]) -> None:
    """The run's tables: the checkpoints per attempt, then the figures."""
    print()
    print_table(
        [("attempt", "<8"), ("resumed", ">8"), ("tried", ">6"), ("saved", ">6"), ("", "<2"),
         ("failed (errno, file)", "<40")],
        [
            (n + 1, a["resumed_from"], len(a["tried"]), len(a["saved"]), "",
             ", ".join(f"{f['step']} {f['errno']} ({f['file']})" for f in a["failed"]) or "-")
            for n, a in enumerate(row["attempts"])
        ],
    )  # fmt: skip
    order, cache, req = row["order"], row["cache"], row["requests"]
    durable = row["store"]["durable"]
    lag = row["saved_to_store_s"]
    lines = [
        ("job", f"{row['job']['status']} after {row['job']['recoveries']} recovery(ies); "
         f"result {'matches' if row['result_matches_uninterrupted'] else 'DIFFERS from'} an "
         "uninterrupted run"),
        ("checkpoints durable", f"{len(durable)} of {len(order['expected']) // 2} expected, whole "
         f"(steps {_span(durable)}); failed and removed: "
         f"{sum(len(a['failed']) for a in row['attempts'])} (files of them that reached the "
         f"store: {len(order['removed_seen_in_store'])}, left there: "
         f"{len(order['left_in_store'])})"),
        ("order", f"kept at every moment ({order['events']} write events, {order['deletes']} "
         "deletes)" if order["kept"] else f"BROKEN: {order['first_violation']}"),
        ("lost", ", ".join(order["lost"]) or "none"),
        ("cache peak", f"{mib(cache['peak_sampled_bytes'])} sampled, "
         f"{mib(cache['peak_logged_bytes'])} logged; bound {mib(cache['bound_bytes'])}, disk "
         f"{mib(cache['disk_bytes'])} (used at most {mib(cache['peak_disk_used_bytes'])})"),
        ("cleaner passes", f"{cache['cleaner_passes']}: {cache['idle_passes']} idle, "
         f"{cache['passes_that_evicted_over_bound']} brought it down to the bound, "
         f"{cache['over_bound_passes']} over it"),
    ]  # fmt: skip
    for rec in row["recoveries"]:
        lines.append(
            ("recovery", f"preempted after checkpoint {rec['after_checkpoint']}; went with the "
             f"node: {rec['went_with_node'] or 'none'}; resumed from {rec['resumed_from']} "
             f"(newest complete when recovered: {rec['newest_complete_at_recovering']}, at "
             f"resume: {rec['newest_complete_at_resume']})"),
        )  # fmt: skip
    lines.append(
        ("saved -> in store", f"median {cell(lag['median'], unit=' s')}, max "
         f"{cell(lag['max'], unit=' s')} ({lag['count']} checkpoints)"),
    )  # fmt: skip
    for n, node in enumerate(cache["nodes"]):
        lines.append(
            (f"node {n + 1} CPU", f"{cell(node['cpu_s_per_min'], missing='--')} CPU-s a "
             f"minute over {node['watched_s']} s"),
        )  # fmt: skip
    counts = sorted(req["per_step"].values())
    if counts:
        lines.append(
            ("requests", f"{req['total']} on the bucket; per checkpoint median "
             f"{counts[len(counts) // 2]}, max {counts[-1]}; {req['not_a_checkpoint']} naming "
             f"no checkpoint"),
        )  # fmt: skip
        lines.append(("requests by kind", json.dumps(req["by_kind"])))
    lines.append(("timeline (s)", json.dumps(row["timeline"])))
    print_table([("", "<20"), ("", "<0")], lines)


def _span(steps: list[int]) -> str:
    return f"{min(steps)}..{max(steps)}" if steps else "none"


def parse_args() -> argparse.Namespace:
    p = arg_parser(__doc__)
    p.add_argument("--store", default="s3", choices=registry.store_names())
    p.add_argument("--checkpoints", type=int, default=16)
    p.add_argument("--ckpt-mib", type=float, default=128.0)
    p.add_argument("--every-s", type=float, default=4.0, help="training seconds a checkpoint")
    p.add_argument("--disk-gib", type=int, default=1, help="resources.disk_size")
    p.add_argument("--cache-max", default="256M", help="vfs_cache_max_size of the mount")
    p.add_argument("--storm-at", type=int, help="start the 503 storm after this checkpoint")
    p.add_argument("--storm-checkpoints", type=int, default=2, help="checkpoints it lasts")
    p.add_argument("--storm-rate", type=float, default=0.5)
    p.add_argument("--outage-at", type=int, help="start the outage after this checkpoint")
    p.add_argument("--outage-s", type=float, default=30.0)
    p.add_argument("--preempt-at", type=int, help="preempt after this checkpoint or a later one")
    p.add_argument("--no-wan", action="store_true", help="no modelled WAN (0 ms, no cap)")
    p.add_argument("--wan-latency-ms", type=float, default=WAN_LATENCY_MS)
    p.add_argument("--wan-stream-mibps", type=float, default=WAN_STREAM_MIBPS)
    p.add_argument("--job-timeout", type=float, default=1200.0, help="hang guard of a run")
    add_check_option(p)
    args = p.parse_args()
    k = args.checkpoints
    args.storm_at = args.storm_at or max(1, k // 8)
    args.outage_at = args.outage_at or args.storm_at + args.storm_checkpoints + 2
    args.preempt_at = args.preempt_at or max(args.outage_at + 1, (3 * k) // 4)
    if not 0 < args.storm_at < args.storm_at + args.storm_checkpoints < args.outage_at < k:
        p.error("the storm must end before the outage starts, and both before the last checkpoint")
    if not args.outage_at < args.preempt_at < k:
        p.error("--preempt-at must come after the outage starts and before the last checkpoint")
    return args


def main() -> int:
    args = parse_args()
    network = None if args.no_wan else Network(args.wan_latency_ms, args.wan_stream_mibps)
    expected = uninterrupted_result(args.checkpoints + 1)
    row, invalid = until_valid(lambda: one_run(args, network, expected), lambda r: r["valid"])
    for r in invalid:
        why = r.get("network_problems") or f"the clocks' offset moved {r['clock_drift_ms']} ms"
        print(f"INVALID run ({why}): run again")
    failures: list[str] = []
    if row is None:
        failures.append(f"no valid run in {len(invalid)} (clocks or WAN faults)")
    else:
        if "order" in row:
            report(row)
        failures += row["failures"]
    save_results(
        "training_run",
        {
            "args": vars(args),
            "run": row,
            "invalid_runs": invalid,
            "clock_max_drift_ms": MAX_DRIFT_NS / 1e6,
            "failures": failures,
            "checked": not args.no_check,
        },
    )
    return verdict([], args.no_check, failures)


if __name__ == "__main__":
    sys.exit(main())
