"""The recipe matrix: the same scenarios run on each mount recipe, one :class:`Row` each.

A row says what a run saw: order kept at every moment (and the first moment it was not),
files lost, whether the writer waited for the store (and its longest write), and the time
from the writer's last close to the last object in the store. :data:`PROMISES` says which
promises each recipe makes; :func:`check` fails a test only for a promise its recipe makes,
and records the row either way (a pytest user property, :data:`ROW_PROPERTY`). At the end
of a session :class:`SessionRows` writes one JSON file per store and recipe
(``<store>-<recipe>.json``, one row per scenario), which harness.recipes.matrix_report
turns into the side-by-side report.
"""

from __future__ import annotations

import json
import shlex
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

ROW_PROPERTY = "recipe_matrix_row"
"""The user property holding a scenario's row (JSON); the last one a test records wins."""

Record = Callable[[str, object], None]
"""pytest's ``record_property`` (or a side-by-side kit's)."""


class Promise(Enum):
    """What MOUNT_CACHED may promise about files written on a node."""

    ORDER = "order kept"
    """No file is visible in the store before one created earlier, at any moment."""
    NOTHING_LOST_AT_JOB_END = "nothing lost at a job's end"
    """Every file a job wrote is in the store once the job has ended."""
    NOTHING_LOST = "nothing lost"
    """Every file written is in the store in the end, whatever came between (a stop)."""
    WRITER_NEVER_WAITS = "writer never waits"
    """A write returns without waiting for the store, whatever the store does."""
    DRAINED_BEFORE_STOP = "drained before a stop"
    """Once ``stop`` returned, every file written before it is in the store."""

    @property
    def column(self) -> str:
        """The report's column this promise is about."""
        return _COLUMNS[self]


ORDER_COLUMN, LOST_COLUMN, WRITER_COLUMN, DURABLE_COLUMN = (
    "order kept",
    "files lost",
    "writer blocked (longest)",
    "time to durable",
)
COLUMNS = (ORDER_COLUMN, LOST_COLUMN, WRITER_COLUMN, DURABLE_COLUMN)
_COLUMNS = {
    Promise.ORDER: ORDER_COLUMN,
    Promise.NOTHING_LOST_AT_JOB_END: LOST_COLUMN,
    Promise.NOTHING_LOST: LOST_COLUMN,
    Promise.DRAINED_BEFORE_STOP: LOST_COLUMN,
    Promise.WRITER_NEVER_WAITS: WRITER_COLUMN,
}


@dataclass(frozen=True)
class Term:
    """One promise a recipe makes, and when: ``transfers`` set, only for a mount with that
    many transfers (its entry's ``config.mount_cached.transfers``)."""

    promise: Promise
    when: str
    transfers: int | None = None


PROMISES: dict[str, tuple[Term, ...]] = {
    "skycore": (
        Term(Promise.ORDER, "always (one upload at a time, the next once the last is stored)"),
        Term(Promise.NOTHING_LOST_AT_JOB_END, "always (a job ends once its node drained)"),
        Term(Promise.NOTHING_LOST, "always, faults, stops and starts included"),
        Term(Promise.WRITER_NEVER_WAITS, "always, faults included (listings kept for good)"),
        Term(Promise.DRAINED_BEFORE_STOP, "always (stop and down drain first)"),
    ),
    "skypilot": (
        Term(Promise.ORDER, "only with transfers: 1 (rclone --transfers 1)", transfers=1),
        Term(Promise.NOTHING_LOST_AT_JOB_END, "at a job's end: the flush script after the run"),
    ),
}
"""Per recipe, the promises it makes. skycore makes all of them. SkyPilot's MOUNT_CACHED
(rclone mount --vfs-cache-mode full --vfs-write-back 1s, 4 transfers by default) keeps the
order only when the entry asks for one transfer, flushes after a job's run, and runs nothing
before a stop. A recipe not listed here makes none (its rows are recorded, never failed)."""


KNOWN_BROKEN: dict[tuple[str, Promise, str], str] = {
    ("skypilot", Promise.ORDER, "order-1"): (
        "with transfers: 1, a write the store answers corrupt is deleted by rclone and "
        "uploaded again after the newer files (both stores of the matrix, every run)"
    ),
}
"""Promises a recipe makes and, measured, breaks in one scenario: (recipe, promise,
scenario) -> what was seen. Such a test is an expected failure (xfail) that still records
its row and marks the cell broken; once the promise holds there, the test fails until its
entry is removed, so a fix never goes unnoticed."""


class KnownBrokenHolds(AssertionError):
    """A promise listed in KNOWN_BROKEN held: remove its entry."""


def makes(recipe: str, promise: Promise, transfers: int | None = None) -> Term | None:
    """The term under which ``recipe`` makes ``promise`` for a mount with ``transfers``
    (None: the recipe's default), or None if it does not make it."""
    for term in PROMISES.get(recipe, ()):
        if term.promise is promise and term.transfers in (None, transfers):
            return term
    return None


@dataclass
class Verdict:
    """One promise checked in a scenario: whether it held, whether the recipe makes it."""

    promise: str
    ok: bool
    made: bool
    detail: str


@dataclass
class Row:
    """What one scenario saw on one store with one recipe (None: not measured there)."""

    scenario: str
    store: str
    recipe: str
    transfers: int | None = None
    """The entry's transfers (None: the recipe's default)."""
    order_kept: bool | None = None
    first_violation: str | None = None
    files: int | None = None
    """How many files the writer wrote (the files that could be lost)."""
    files_lost: int | None = None
    lost_note: str = ""
    """A few words shown beside files lost (``20 not there at stop``)."""
    writer_blocked: bool | None = None
    longest_wait_s: float | None = None
    durable_s: float | None = None
    """From the writer's last close to the last of its objects in the store."""
    note: str = ""
    verdicts: list[Verdict] = field(default_factory=list)
    outcome: str | None = None
    """The test's outcome (passed, failed, error, skipped), added by :class:`SessionRows`."""
    failure: str | None = None

    def add_note(self, text: str) -> None:
        """Append ``text`` to the note (sentences joined by '; ')."""
        self.note = f"{self.note}; {text}" if self.note else text

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Row:
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        known["verdicts"] = [Verdict(**v) for v in data.get("verdicts", [])]
        return cls(**known)


class PromiseBroken(AssertionError):
    """A recipe broke a promise it makes."""


def record_row(row: Row, record: Record) -> None:
    """Record ``row`` as the test's :data:`ROW_PROPERTY` (again: the last one wins)."""
    record(ROW_PROPERTY, json.dumps(row.to_dict()))


def check(
    recipe: str, promise: Promise, ok: bool, detail: str, *, row: Row, record: Record
) -> None:
    """Record whether ``promise`` held in ``row``'s scenario (``detail``: what was seen) and
    record the row; raise PromiseBroken if it did not hold and ``recipe`` makes it."""
    check_all(recipe, [(promise, ok, detail)], row=row, record=record)


def check_all(
    recipe: str,
    verdicts: Iterable[tuple[Promise, bool, str]],
    *,
    row: Row,
    record: Record,
) -> None:
    """:func:`check` for several promises: every verdict is recorded before a failure is
    raised (naming every broken promise the recipe makes)."""
    if recipe != row.recipe:
        raise ValueError(f"checking {recipe}'s promises on a row of {row.recipe}")
    broken, known, healed = [], [], []
    for promise, ok, detail in verdicts:
        term = makes(recipe, promise, row.transfers)
        row.verdicts.append(Verdict(promise.value, bool(ok), term is not None, detail))
        expected = KNOWN_BROKEN.get((recipe, promise, row.scenario))
        if expected is not None and ok:
            healed.append(f"'{promise.value}' held ({expected!r} no longer happens)")
        elif expected is not None and term is not None:
            known.append(f"{recipe} breaks '{promise.value}' ({term.when}): {expected}")
        elif term is not None and not ok:
            broken.append(f"{recipe} promises '{promise.value}' ({term.when}): {detail}")
    record_row(row, record)
    where = f"{row.scenario} on {row.store}: "
    if broken:
        raise PromiseBroken(where + "; ".join(broken))
    if healed:
        raise KnownBrokenHolds(
            where + "; ".join(healed) + ": remove its entry from KNOWN_BROKEN "
            "(harness/recipes/matrix.py)"
        )
    if known:
        import pytest

        pytest.xfail(where + "; ".join(known))


# --- the session's rows, written as JSON by the controller -------------------------------


def _outcome(report: Any) -> str | None:
    """passed / failed / skipped / error for the phase that decides it (None: no verdict)."""
    if report.when == "call":
        return "xfailed" if hasattr(report, "wasxfail") else str(report.outcome)
    if report.failed:
        return "error"
    if report.when == "setup" and report.skipped:
        return "skipped"
    return None


def _failure(report: Any) -> str:
    """The first line of a failed report's message (its crash line), at most 300 chars."""
    crash = getattr(report.longrepr, "reprcrash", None)
    text = crash.message if crash is not None else str(report.longrepr or "")
    return text.strip().splitlines()[0][:300] if text.strip() else ""


@dataclass
class SessionRows:
    """The rows of one pytest session (the controller's, under xdist), written at its end
    as ``<store>-<recipe>.json`` per store and recipe met."""

    command: str
    started: float = field(default_factory=time.time)
    _began: float = field(default_factory=time.monotonic)
    rows: dict[str, Row] = field(default_factory=dict)
    spans: dict[str, tuple[float, float]] = field(default_factory=dict)
    outcomes: dict[str, tuple[str, str | None]] = field(default_factory=dict)

    @classmethod
    def for_invocation(cls, args: Sequence[str]) -> SessionRows:
        """Rows of a session run as ``pytest ARGS``."""
        return cls(command=shlex.join(["pytest", *args]))

    def add(self, report: Any) -> None:
        """Take a test report: its newest row, its outcome and its phase's times."""
        nodeid = str(report.nodeid)
        first, last = self.spans.get(nodeid, (report.start, report.stop))
        self.spans[nodeid] = (min(first, report.start), max(last, report.stop))
        values = [v for name, v in report.user_properties if name == ROW_PROPERTY]
        if values:
            self.rows[nodeid] = Row.from_dict(json.loads(str(values[-1])))
        outcome = _outcome(report)
        if outcome is not None and self.outcomes.get(nodeid, ("passed", None))[0] == "passed":
            failed = outcome in ("failed", "error")
            self.outcomes[nodeid] = (outcome, _failure(report) if failed else None)

    def runs(self) -> dict[tuple[str, str], dict[str, Any]]:
        """{(store, recipe): the run's JSON document}: its rows (one per scenario, the last
        test's if two share one), the command, the session's time and the store's."""
        out: dict[tuple[str, str], dict[str, Any]] = {}
        session_s = round(time.monotonic() - self._began, 1)
        for nodeid, row in self.rows.items():
            doc = out.setdefault(
                (row.store, row.recipe),
                {
                    "store": row.store,
                    "recipe": row.recipe,
                    "command": self.command,
                    "started": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.started)),
                    "session_s": session_s,
                    "span": [float("inf"), 0.0],
                    "rows": {},
                },
            )
            row.outcome, row.failure = self.outcomes.get(nodeid, (None, None))
            first, last = self.spans.get(nodeid, (self.started, self.started))
            doc["span"] = [min(doc["span"][0], first), max(doc["span"][1], last)]
            doc["rows"][row.scenario] = row.to_dict()
        for doc in out.values():
            first, last = doc.pop("span")
            doc["store_s"] = round(max(0.0, last - first), 1)
            doc["rows"] = list(doc["rows"].values())
        return out

    def write(self, out_dir: Path) -> list[Path]:
        """Write each run's JSON into ``out_dir``; the files written."""
        written = []
        for (store, recipe), doc in sorted(self.runs().items()):
            out_dir.mkdir(parents=True, exist_ok=True)
            path = out_dir / f"{store}-{recipe}.json"
            path.write_text(json.dumps(doc, indent=1) + "\n")
            written.append(path)
        return written


# --- the scenarios, in the report's order ----------------------------------------------------

SCENARIOS: dict[str, str] = {
    "comp": "comp test: its MOUNT_CACHED entries written, the job ends, all there",
    "order-default": "upload order, the recipe's default transfers, corrupt first writes",
    "order-1": "upload order, transfers: 1, corrupt first writes",
    "writer-deny": "writer during a 403 (deny) until it finished",
    "writer-outage": "writer during an outage until it finished",
    "writer-503": "writer during a 503 storm until it finished",
    "corrupt": "corrupt answers (half the writes), default transfers",
    "stop-start": "files written, stop at once, start, a job",
    "preemption": "managed job preempted mid-run, recovers (lost: checkpoints saved, not "
    "in the store when the node vanished)",
    "job-scale": "1 GiB checkpoint and 200 small files, a fault that comes and goes",
}
"""Scenario id -> what it does (the report's row titles, in this order)."""


def scenario_order(scenario: str) -> tuple[int, str]:
    """Sort key: the catalogue's order, unknown scenarios after it by name."""
    ids = list(SCENARIOS)
    return (ids.index(scenario), "") if scenario in ids else (len(ids), scenario)
