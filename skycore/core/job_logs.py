"""A job's log as the user reads it: the local copy printed as it grows, completed from the
nodes' job table when its terminal is gone, or followed on the nodes themselves."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from skycore.backend.handle import get_handle
from skycore.backend.job_parts import follow_job
from skycore.config import SkycoreConfig
from skycore.core.jobs import complete_job_logs, reconcile_job, refresh_jobs
from skycore.processes import pid_alive
from skycore.state.clusters import ClusterRecord
from skycore.state.jobs import JOB_RUNNING, JOB_TERMINAL, JobRecord, get_job


class LogPrinter:
    """Prints the complete lines a job's local log files gained since the last call (run
    logs, or the setup logs of a job that never ran), prefixed by rank on several nodes."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.files = sorted(log_dir.glob("run-*.log")) or sorted(log_dir.glob("setup-*.log"))
        self.offsets = {f: 0 for f in self.files}

    def print_new(self) -> None:
        """Print what the files gained (a file swapped for a longer copy keeps its offset)."""
        current = set(self.log_dir.glob("run-*.log")) | set(self.files)
        multi = len(current) > 1
        for f in sorted(current):
            self.offsets.setdefault(f, 0)
            try:
                with open(f, "rb") as fh:
                    fh.seek(self.offsets[f])
                    data = fh.read()
            except OSError:
                continue
            complete = data[: data.rfind(b"\n") + 1] if b"\n" in data else b""
            self.offsets[f] += len(complete)
            rank = f.stem.split("-")[-1]
            for line in complete.decode(errors="replace").splitlines():
                sys.stdout.write((f"(rank={rank}) " if multi else "") + line + "\n")
        sys.stdout.flush()


def print_job_log(
    record: ClusterRecord, job: JobRecord, follow: bool, config: SkycoreConfig
) -> tuple[str | None, str | None]:
    """Print ``job``'s log to stdout; with ``follow``, until the job ends. Returns (its status
    at the end, or None if it is gone; one line saying where the rest of a short copy is,
    or None when the copy is whole)."""
    cluster = record.name
    log_dir = Path(job.log_dir)
    if follow and job.status == JOB_RUNNING and not pid_alive(job.driver_pid):
        # No terminal drives it: follow the nodes' own job logs until the run ends.
        handle = get_handle(record, config)
        follow_job(handle, job.job_id, job.num_nodes, "run", log_dir, stream=True)
        reconcile_job(record, job, config)
        final = get_job(cluster, job.job_id)
        return (final.status if final else "?"), None
    # An ended job whose local copy is short (its terminal died) is completed from the
    # nodes' job table first, once; what cannot be fetched now is said after the log.
    missing = complete_job_logs(record, job, config)
    printer = LogPrinter(log_dir)
    while True:
        printer.print_new()
        current = get_job(cluster, job.job_id)
        if not follow or current is None or current.status in JOB_TERMINAL:
            break
        if not pid_alive(current.driver_pid):
            # Its terminal is gone: the cluster's job table decides, and an ended job's
            # log is completed from the nodes before the rest of it is printed.
            refresh_jobs(cluster)
            current = get_job(cluster, job.job_id)
            if current is not None and current.status in JOB_TERMINAL:
                missing = complete_job_logs(record, current, config)
            printer.print_new()
            break
        time.sleep(0.5)
    final = get_job(cluster, job.job_id)
    return (final.status if final else None), missing
