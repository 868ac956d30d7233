"""What the recipe matrix's scenarios share: a scenario's row (recorded from its start, so a
scenario that fails early still has one), a cluster with the scenario's bucket mounted
MOUNT_CACHED, a writer job run in the background (its end is the recipe's drain), faults
ended on events, the row's measures read from the gate's write events and the bucket's
listing, and a module's table of scenarios (a test case each).

Everything here is recipe-neutral: skycore's own commands (launch, exec, stop, start), the
gate's faults and events, and the store. A node is reached only to make a folder on its
mount, run the writer, and read the writer's done file (node-local, outside the mount).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import pytest

from harness.recipes import matrix
from harness.recipes.matrix import Promise, Row
from harness.testing.background import Background
from harness.testing.buckets import TestBucket
from harness.testing.clusters import Outcome, SmokeCluster
from harness.testing.order_check import DELETE_OPS, visible_prefix_violations
from harness.testing.side_by_side import Scenario, ScenarioKit, scenario
from skycore.config import load_config
from tests.matrix import node_writer
from tests.matrix.node_writer import Written

MIB = 1 << 20
CKPT = "/ckpt"
WRITE_HANG_S = 120.0
"""Hang guard of a burst of writes (they take a second or so; pass 10x a longer writer's)."""
HIT_HANG_S = 120.0
"""Hang guard of a wait for a fault to meet a request (uploads start within seconds)."""
JOB_HANG_S = 900.0
"""Hang guard of a writer job and its drain (seconds; the 1 GiB one about a minute)."""


class Recorder:
    """The row of one scenario on its kit's store, with the session's recipe (the skycore
    home's ``mount_recipe``), recorded at once and again after every change that counts."""

    def __init__(self, kit: ScenarioKit, scenario: str, transfers: int | None = None) -> None:
        self.kit = kit
        self.row = Row(scenario, kit.store, load_config().mount_recipe, transfers)
        self.save()

    @property
    def recipe(self) -> str:
        return self.row.recipe

    def save(self) -> None:
        matrix.record_row(self.row, self.kit.record_property)

    def note(self, text: str) -> None:
        self.row.add_note(text)
        self.save()

    def writes(self, written: Written) -> None:
        """The writer's measures: how many files it wrote (those whose write failed were
        not written: they are the writer's failures, not files lost), the longest write."""
        self.row.files = len(written.paths) - len(written.errors)
        self.row.longest_wait_s = round(written.longest, 3)
        if written.errors:
            path, error = next(iter(written.errors.items()))
            self.row.add_note(f"{len(written.errors)} write(s) failed, first {path}: {error}")
        self.save()

    def order(self, events: Sequence[Any], expected: Sequence[str], prefix: str) -> bool:
        """Replay the write events under ``prefix`` (deletes included) against the creation
        order ``expected``; the row's order kept and first violation (its time counted from
        the first event under ``prefix``). Whether it was kept."""
        events = [e for e in events if e.key.startswith(prefix)]
        found = visible_prefix_violations(events, expected, prefix)
        self.row.order_kept = not found
        self.row.first_violation = (
            f"{found[0].describe()} [{len(found)} of {len(events)} events were violations]"
            if found
            else None
        )
        self.save()
        return not found

    def lost(self, bucket: TestBucket, expected: Sequence[str]) -> list[str]:
        """The keys of ``expected`` not in the bucket now (listed from the store)."""
        listed = set(bucket.list_keys())
        lost = [k for k in expected if k not in listed]
        self.row.files_lost = len(lost)
        self.save()
        return lost

    def durable(self, events: Iterable[Any], keys: Iterable[str], last_close: float) -> None:
        """Time to durable: from the writer's last close (the node's clock) to the last write
        of ``keys`` the gate recorded (the host's: the same machine's clock)."""
        wanted = set(keys)
        ends = [e.t_ns for e in events if e.key in wanted and e.op not in DELETE_OPS]
        if ends:
            self.row.durable_s = round(max(ends) / 1e9 - last_close, 2)
        self.save()

    def measure(
        self, bucket: TestBucket, expected: Sequence[str], prefix: str, last_close: float
    ) -> tuple[list[Any], list[str]]:
        """The row's order, files lost and time to durable of the writer's ``expected`` keys
        (under ``prefix``; its last close ``last_close``): the bucket's write events and the
        lost keys."""
        events = bucket.events()
        self.order(events, expected, prefix)
        lost = self.lost(bucket, expected)
        self.durable(events, expected, last_close)
        return events, lost

    def check(self, *verdicts: tuple[Promise, bool, str]) -> None:
        """matrix.check_all on this row (fails only for a promise the recipe makes)."""
        matrix.check_all(self.recipe, verdicts, row=self.row, record=self.kit.record_property)


def cached_entry(bucket: TestBucket, transfers: int | None = None) -> dict[str, Any]:
    """The bucket's MOUNT_CACHED entry; ``transfers`` as SkyPilot's YAML gives it
    (``config.mount_cached.transfers``), None for the recipe's default."""
    entry = bucket.mount_entry("MOUNT_CACHED")
    if transfers is not None:
        entry["config"] = {"mount_cached": {"transfers": transfers}}
    return entry


def shell(cluster: SmokeCluster, cmd: str, timeout: float = 300) -> str:
    """Run ``cmd`` on the head node; its output (AssertionError with it on failure)."""
    code, out = cluster.shell(cmd, timeout=timeout)
    assert code == 0, f"exit {code} on {cluster.name}: {cmd[:200]}\n{out[-3000:]}"
    return str(out)


def cached_cluster(
    kit: ScenarioKit,
    bucket: TestBucket,
    transfers: int | None = None,
    folders: Sequence[str] = (),
    name: str = "matrix",
) -> SmokeCluster:
    """A new cluster with ``bucket`` mounted MOUNT_CACHED at /ckpt (its job: ``true``), and
    /ckpt/FOLDER made for each of ``folders`` (before any fault: a new folder is listed)."""
    cluster: SmokeCluster = kit.cluster_factory(name)
    spec = {"name": name, "file_mounts": {CKPT: cached_entry(bucket, transfers)}, "run": "true"}
    outcome = cluster.launch(spec)
    assert outcome.exit_code == 0, outcome.output + outcome.run_log()
    if folders:
        paths = " ".join(f"{CKPT}/{f}" for f in folders)
        shell(cluster, f"mkdir -p {paths} && ls {paths}")
    return cluster


class WriterJob:
    """A job (``skycore exec``) running the matrix writer on a cluster, in the background:
    whether the writer finished (its done file on the node), then the job's outcome, which
    comes once the recipe drained the cluster's cached mounts."""

    def __init__(
        self, cluster: SmokeCluster, files: list[tuple[str, int]], spacing_s: float = 0.0
    ) -> None:
        self.cluster = cluster
        self.files = files
        self.done = f"/tmp/matrix-writer-{uuid.uuid4().hex[:8]}.done"
        spec = {"name": "writer", "run": node_writer.command(files, self.done, spacing_s)}
        self._job = Background(lambda: cluster.exec(spec), f"writer job on {cluster.name}")

    def written(self) -> Written | None:
        """The writer's result once it finished (None before)."""
        code, out = self.cluster.shell(f"cat {self.done} 2>/dev/null; true")
        return node_writer.parse(out) if code == 0 else None

    def wait_written(self, timeout: float) -> Written | None:
        """Wait until the writer finished; None if it has not after ``timeout`` s (a hang
        guard: the caller says what that means) or its job ended without it."""
        deadline = time.monotonic() + timeout
        while True:
            found = self.written()
            if found is not None or not self._job.running():
                return found or self.written()
            if time.monotonic() > deadline:
                return None
            time.sleep(0.2)

    def outcome(self, timeout: float = JOB_HANG_S) -> Outcome:
        """The job's outcome (``skycore exec`` returned: the run ended and was drained)."""
        found: Outcome = self._job.result(timeout)
        return found

    def finished(self) -> bool:
        """True once the job (run and drain) ended."""
        return not self._job.running()


def job_under_fault(
    rec: Recorder,
    bucket: TestBucket,
    cluster: SmokeCluster,
    files: list[tuple[str, int]],
    kind: str,
    **options: Any,
) -> tuple[Outcome, Written, int]:
    """The writer job run to its end (the recipe's drain) while fault ``kind`` (with
    ``options``) holds on ``bucket``: the job's outcome, what the writer wrote (the row has
    the writer's measures) and how many requests the fault hit."""
    kit = rec.kit
    with kit.store_faults.hold(kit.store, kind, bucket=bucket.name, **options) as fault:
        job = WriterJob(cluster, files)
        outcome = job.outcome()
        hits = int(kit.store_faults.state(kit.store, fault)["hits"])
    written = writer_result(job, outcome)
    rec.writes(written)
    return outcome, written, hits


def fault_lasts(kit: ScenarioKit, fault: dict[str, Any]) -> bool:
    """True while ``fault`` (started on the kit's store) has not ended."""
    return kit.store_faults.state(kit.store, fault).get("ended") is None


def fault_hits(kit: ScenarioKit, fault: dict[str, Any]) -> int:
    """How many requests ``fault`` has hit so far."""
    return int(kit.store_faults.state(kit.store, fault)["hits"])


def write_through_fault(
    rec: Recorder,
    cluster: SmokeCluster,
    fault: dict[str, Any],
    files: list[tuple[str, int]],
    spacing_s: float = 0.0,
    hang_s: float = WRITE_HANG_S,
) -> tuple[WriterJob, Written, bool]:
    """Run the writer job while ``fault`` is on. The fault ends on events: once the writer
    finished and the fault met a request of the bucket (an upload it held or refused). A
    writer still writing after ``hang_s`` waits for the store: the fault ends then, so it can
    finish. Returns the job, what the writer wrote and whether it waited for the store (it
    had not finished while the fault lasted, or a write failed); the row has the measures."""
    kit = rec.kit
    job = WriterJob(cluster, files, spacing_s)
    written = job.wait_written(hang_s)
    finished_in_fault = written is not None and fault_lasts(kit, fault)
    if written is None:
        rec.note(f"the writer had not finished {hang_s:.0f} s into the {fault['kind']} fault")
    else:
        hit = wait_hits(kit, fault, 1, HIT_HANG_S)
        rec.note(f"the {fault['kind']} fault met {hit} request(s) before it ended")
    kit.store_faults.stop(kit.store, fault)
    if written is None:
        written = job.wait_written(JOB_HANG_S)
    assert written is not None, f"the writer never finished: {job.outcome().run_log()[-3000:]}"
    rec.writes(written)
    blocked = not finished_in_fault or bool(written.errors)
    rec.row.writer_blocked = blocked
    rec.save()
    return job, written, blocked


def wait_hits(
    kit: ScenarioKit,
    fault: dict[str, Any],
    n: int,
    timeout: float,
    until: Callable[[], bool] = lambda: False,
) -> int:
    """Wait until ``fault`` hit ``n`` requests, ended (a fault with max_hits) or ``until()``
    holds; its hits then. AssertionError after ``timeout`` s (a hang guard)."""
    deadline = time.monotonic() + timeout
    while True:
        state = kit.store_faults.state(kit.store, fault)
        if state["hits"] >= n or state.get("ended") is not None or until():
            return int(state["hits"])
        assert time.monotonic() < deadline, f"fault {fault['kind']} hit nothing in {timeout} s"
        time.sleep(0.1)


def writer_verdict(written: Written, blocked: bool, kind: str) -> tuple[Promise, bool, str]:
    """The writer-never-waits verdict of a writer run through a ``kind`` fault."""
    how = (
        f"{len(written.errors)} write(s) failed"
        if written.errors
        else ("finished with the fault on" if not blocked else "finished only after it ended")
    )
    detail = f"during the {kind}: {how}; longest write {written.longest:.2f} s"
    return Promise.WRITER_NEVER_WAITS, not blocked, detail


def lost_verdict(promise: Promise, lost: Sequence[str], total: int, when: str) -> tuple:
    """A files-lost verdict: none of ``total`` lost ``when``."""
    shown = ", ".join(lost[:3]) + (", ..." if len(lost) > 3 else "")
    detail = f"{len(lost)} of {total} files not in the store {when}" + (
        f" ({shown})" if lost else ""
    )
    return promise, not lost, detail


def order_verdict(rec: Recorder) -> tuple[Promise, bool, str]:
    """The order verdict of what :meth:`Recorder.order` found."""
    return Promise.ORDER, bool(rec.row.order_kept), rec.row.first_violation or "kept"


def job_verdict(lost: list[str], total: int, outcome: Any) -> tuple[Promise, bool, str]:
    """Nothing lost at the job's end: the job succeeded and every file is in the store."""
    promise, ok, detail = lost_verdict(
        Promise.NOTHING_LOST_AT_JOB_END, lost, total, "when the job ended"
    )
    if outcome.exit_code != 0:
        detail += f"; the job ended {outcome.job_status} (exit {outcome.exit_code})"
    return promise, ok and outcome.exit_code == 0, detail


def writer_result(job: WriterJob, outcome: Any) -> node_writer.Written:
    """What the job's writer wrote (from its run log, else its done file)."""
    found = node_writer.parse(outcome.run_log()) or job.written()
    assert found is not None, outcome.output + outcome.run_log()[-3000:]
    return found


def keys_of(files: list[tuple[str, int]], written: Written | None = None) -> list[str]:
    """The object keys of files under /ckpt, in creation order; with ``written``, of those
    the writer wrote (its failed writes left out)."""
    failed = written.errors if written is not None else {}
    return [path.removeprefix(CKPT + "/") for path, _ in files if path not in failed]


def scenario_cases(cases: dict[str, Scenario]) -> pytest.MarkDecorator:
    """``parametrize("case", ...)`` with one case per scenario (its id the case's name),
    each marked ``@scenario(fn)``: the store's scenarios run side by side and each test
    joins its own (harness.testing.side_by_side)."""
    params = [pytest.param(case, marks=scenario(fn)) for case, fn in cases.items()]
    return pytest.mark.parametrize("case", params)
