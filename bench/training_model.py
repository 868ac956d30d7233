"""What a training run's checkpoints must look like in the store, from the training program's
log (tests/fixtures/train/train.py), the gate's write events and rclone's cache cleaner
lines (pure: no I/O). Shared by bench/training_run.py and tests/smoke/test_training_run.py.

The run's attempts are told apart by the program's ``RESUME`` lines, the gate's events by
how many it had recorded when the job was marked RECOVERING (the preempted node was gone and
the next not up yet). Each checkpoint is a data file and then its marker (the manifest
``checkpoint-<step>.json``); the creation order is data-then-marker by ascending step, a
checkpoint written again after a recovery taking its place, and ``result.json`` last. A
checkpoint whose write failed was removed by the program (its files leave the order); files a
preempted attempt saved that were not in the store when the next attempt began went with its
node (they leave the order, unless written again). So each attempt's epoch has its own order:
what the store held of the steps up to where it resumed, then what it saved. What the store
holds must at every moment be a prefix of the epoch's order (the gate's events replayed,
deletes included; files of later steps an earlier attempt left in the store are stale, and
count again once written anew), every file of the last order must be there at the end and
no other, and each recovered attempt must resume from the newest checkpoint whose data and
marker were in the store when it was recovered.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from harness.testing.order_check import (
    DELETE_OPS,
    WRITE_OPS,
    Event,
    lost_keys,
    visible_prefix_violations,
)

PREFIX = "ckpt/"
RESULT_KEY = PREFIX + "result.json"
KEY_RE = re.compile(r"^ckpt/checkpoint-(\d+)\.(bin|json)$")
_LINE_PREFIX = r"^(?:\([^)]*\) )?"  # a multi-node job log's "(head, rank=0) "
_LOG_RE = re.compile(
    _LINE_PREFIX + r"(?:RESUME step=(?P<resume>\d+) \S+ t=(?P<rt>[\d.]+)"
    r"|saved checkpoint (?P<saved>\d+) \S+ bytes\) t=(?P<st>[\d.]+)"
    r"|checkpoint (?P<failed>\d+) failed: (?P<errno>\S+) .* writing (?P<file>\S+); "
    r"removed (?P<removed>\S+) t=(?P<ft>[\d.]+)"
    r"|RESULT sha256=(?P<result>[0-9a-f]+) steps=\d+)$",
    re.M,
)


def names(step: int) -> tuple[str, str]:
    """(data key, marker key) of checkpoint ``step`` in the bucket."""
    return f"{PREFIX}checkpoint-{step:06d}.bin", f"{PREFIX}checkpoint-{step:06d}.json"


def step_of(key: str) -> tuple[int, int] | None:
    """(step, 0 for data / 1 for marker) of a checkpoint key; None for any other key."""
    m = KEY_RE.match(key)
    return (int(m.group(1)), 0 if m.group(2) == "bin" else 1) if m else None


@dataclass(frozen=True)
class Failure:
    """A checkpoint the program could not write (and removed)."""

    step: int
    errno: str
    file: str
    t: float


@dataclass
class Attempt:
    """One run of the program: where it resumed, what it saved and what failed."""

    resumed_from: int
    resumed_at: float
    saved: list[tuple[int, float]] = field(default_factory=list)
    failed: list[Failure] = field(default_factory=list)
    result: str | None = None

    @property
    def saved_steps(self) -> list[int]:
        return [s for s, _ in self.saved]

    @property
    def tries(self) -> list[tuple[float, int]]:
        """(time, step) of every checkpoint it tried (saved or failed), in its order."""
        return sorted([(t, s) for s, t in self.saved] + [(f.t, f.step) for f in self.failed])

    @property
    def tried(self) -> list[int]:
        """Every checkpoint step it tried (saved or failed), in its order."""
        return [s for _, s in self.tries]


def attempts(log: str) -> list[Attempt]:
    """The program's attempts in a job log, oldest first (lines before the first RESUME are
    ignored)."""
    found: list[Attempt] = []
    for m in _LOG_RE.finditer(log):
        if m.group("resume") is not None:
            found.append(Attempt(int(m.group("resume")), float(m.group("rt"))))
        elif not found:
            continue
        elif m.group("saved") is not None:
            found[-1].saved.append((int(m.group("saved")), float(m.group("st"))))
        elif m.group("failed") is not None:
            step, t = int(m.group("failed")), float(m.group("ft"))
            found[-1].failed.append(Failure(step, m.group("errno"), m.group("file"), t))
        else:
            found[-1].result = m.group("result")
    return found


# --- the store, replayed -------------------------------------------------------------------


def replayed(events: Iterable[Event], prefix: str = PREFIX) -> Iterator[tuple[Event, set[str]]]:
    """Each event under ``prefix`` in completion order, with the keys under ``prefix`` in the
    store right after it (a write shows its key, a delete hides it; the set is live)."""
    visible: set[str] = set()
    for e in sorted(events, key=lambda e: e.t_ns):
        if not e.key.startswith(prefix):
            continue
        if e.op in WRITE_OPS:
            visible.add(e.key)
        elif e.op in DELETE_OPS:
            visible.discard(e.key)
        yield e, visible


def visible_after(events: Iterable[Event], prefix: str = PREFIX) -> set[str]:
    """The keys under ``prefix`` in the store after ``events`` (in completion order)."""
    visible: set[str] = set()
    for _, now in replayed(events, prefix):
        visible = now
    return visible


def newest_complete(visible: Iterable[str]) -> int:
    """The newest step whose data and marker are both in ``visible`` (0: none)."""
    keys = set(visible)
    steps = [s for s, kind in filter(None, map(step_of, keys)) if kind == 1]
    return max((s for s in steps if names(s)[0] in keys), default=0)


# --- the expected order --------------------------------------------------------------------


@dataclass(frozen=True)
class _Synthetic:
    """A key already in the store when an epoch began (replayed as a write before its events)."""

    key: str
    t_ns: int
    op: str = "put"
    size: int = -1


@dataclass(frozen=True)
class Epoch:
    """The store while one attempt ran: ``order``, the creation order its files must follow
    (the previous epochs' files of steps up to where the attempt resumed, then what it saved,
    data before marker by ascending step, then its result); ``removed``, the files of the
    checkpoints it failed to write (and removed); ``went_with_node``, the previous attempt's
    files not in the store when this one began (they went with its node; some may be written
    again by this one)."""

    resumed_from: int
    order: tuple[str, ...]
    removed: tuple[str, ...]
    went_with_node: tuple[str, ...]
    start: frozenset[str]
    events: tuple[Event, ...]


def epochs(runs: Sequence[Attempt], events: Sequence[Event], bounds: Sequence[int]) -> list[Epoch]:
    """One Epoch per attempt. ``events`` are the gate's, in completion order; ``bounds[i]`` is
    how many of them the gate had recorded when the job was marked RECOVERING after attempt
    ``i`` was preempted: the attempt's node was gone by then and the next one not yet up, so
    the events before it are attempt ``i``'s and those after it the next one's."""
    if len(bounds) != len(runs) - 1:
        raise ValueError(f"{len(runs)} attempts need {len(runs) - 1} bounds, not {len(bounds)}")
    cuts = [0, *bounds, len(events)]
    found: list[Epoch] = []
    previous: tuple[str, ...] = ()
    for n, run in enumerate(runs):
        start = frozenset(visible_after(events[: cuts[n]]))
        kept = [k for k in previous if _step(k) <= run.resumed_from]
        saved = [k for s in run.saved_steps for k in names(s)]
        removed = {k for f in run.failed for k in names(f.step)} - set(saved)
        order = sorted(dict.fromkeys([*kept, *saved]), key=lambda k: step_of(k) or (0, 0))
        if run.result is not None:
            order.append(RESULT_KEY)
        gone = tuple(k for k in previous if k not in start)
        found.append(
            Epoch(run.resumed_from, tuple(order), tuple(sorted(removed)), gone, start,
                  tuple(events[cuts[n] : cuts[n + 1]]))
        )  # fmt: skip
        previous = tuple(order)
    return found


@dataclass(frozen=True)
class OrderVerdict:
    """The store against the epochs: ``violations`` (one line each: a moment the files in the
    store were not a prefix of the epoch's order, or a removed checkpoint's file reached the
    store before an older file of the order), ``lost`` (files of the last epoch's order not in
    the store at the end), ``left`` (files in the store at the end that are not in that order:
    a removed checkpoint's, or a preempted attempt's never written again), ``removed_seen``
    (removed files that reached the store at some moment), ``went_with_node`` (files the
    preempted attempts saved that were not in the store when the next one began: written
    again, or not expected any more)."""

    order: tuple[str, ...]
    violations: tuple[str, ...]
    lost: tuple[str, ...]
    left: tuple[str, ...]
    removed_seen: tuple[str, ...]
    went_with_node: tuple[str, ...]


def check_order(
    runs: Sequence[Attempt], events: Sequence[Event], bounds: Sequence[int]
) -> OrderVerdict:
    """Replay ``events`` epoch by epoch (see ``epochs``), each from the files of its order that
    were in the store when it began (a preempted attempt's files of later steps left there are
    stale: they count again once written anew): after every event, the files in the store are
    a prefix of the epoch's creation order (harness.testing.order_check, deletes included); a
    removed checkpoint's file is left out of that check, but must not reach the store before
    an older file of the order."""
    found = epochs(runs, events, bounds)
    lines: list[str] = []
    seen: set[str] = set()
    for n, epoch in enumerate(found):
        removed = set(epoch.removed)
        first = [k for k in epoch.order if k in epoch.start and _step(k) <= epoch.resumed_from]
        base = min((e.t_ns for e in epoch.events), default=len(first)) - len(first)
        replay: list[Event] = [_Synthetic(k, base + i) for i, k in enumerate(first)]
        replay += epoch.events
        main = [e for e in replay if e.key not in removed]
        tag = f"attempt {n + 1}: "
        lines += [tag + v.describe() for v in visible_prefix_violations(main, epoch.order, PREFIX)]
        for e, visible in replayed(replay):
            if e.op in DELETE_OPS:
                continue
            if e.key in removed and not isinstance(e, _Synthetic):
                seen.add(e.key)
                place = step_of(e.key) or (0, 0)
                older = [k for k in epoch.order if (step_of(k) or (1 << 62, 0)) < place]
                missing = [k for k in older if k not in visible]
                if missing:
                    lines.append(f"{tag}removed file {e.key} reached the store before {missing[0]}")
    order = found[-1].order if found else ()
    return OrderVerdict(
        order=order,
        violations=tuple(lines),
        lost=tuple(lost_keys(list(events), order, PREFIX)) if order else (),
        left=tuple(sorted(visible_after(events) - set(order))),
        removed_seen=tuple(sorted(seen)),
        went_with_node=tuple(k for epoch in found for k in epoch.went_with_node),
    )


def _step(key: str) -> int:
    """The step of a checkpoint key (others: after every step)."""
    return (step_of(key) or (1 << 62, 0))[0]


# --- rclone's cache cleaner ----------------------------------------------------------------

CLEANED_RE = re.compile(
    r"vfs cache: cleaned: objects (\d+) \(was (\d+)\) in use (\d+), to upload (\d+), "
    r"uploading (\d+), total size (\S+) \(was (\S+)\)"
)
_UNITS = " KMGTPE"


def size_range(text: str) -> tuple[float, float]:
    """The bytes a size as rclone logs it (``0``, ``1023``, ``200Mi``, ``1.500Gi``) may stand
    for: (low, high), as it is rounded to three decimals."""
    m = re.fullmatch(r"([\d.]+)([KMGTPE]i)?", text)
    if not m:
        raise ValueError(f"not a size rclone logs: {text!r}")
    unit = 1 << (10 * _UNITS.index((m.group(2) or " ")[0]))
    value = float(m.group(1))
    slack = 0.0005 if "." in m.group(1) or m.group(2) else 0.0
    return max(0.0, (value - slack) * unit), (value + slack) * unit


@dataclass(frozen=True)
class CleanerPass:
    """One ``vfs cache: cleaned:`` line of rclone's cache cleaner."""

    objects: int
    objects_before: int
    in_use: int
    to_upload: int
    uploading: int
    total: tuple[float, float]
    total_before: tuple[float, float]

    @property
    def idle(self) -> bool:
        """Nothing open or dirty (in use), queued or uploading: the cleaner could evict any
        file of the cache, so it must have brought it under its bound."""
        return self.in_use == 0 and self.to_upload == 0 and self.uploading == 0

    def over(self, bound: int) -> bool:
        """The pass ended idle with more than ``bound`` bytes cached (surely: the logged
        size, rounded, is above the bound whichever way it was rounded)."""
        return self.idle and self.total[0] > bound

    def evicted_over(self, bound: int) -> bool:
        """The pass began above ``bound`` and ended idle: it had to enforce the bound."""
        return self.idle and self.total_before[0] > bound


def cleaner_passes(text: str) -> list[CleanerPass]:
    """Every cleaner line in ``text`` (rclone's log), in order."""
    return [
        CleanerPass(
            objects=int(m.group(1)),
            objects_before=int(m.group(2)),
            in_use=int(m.group(3)),
            to_upload=int(m.group(4)),
            uploading=int(m.group(5)),
            total=size_range(m.group(6)),
            total_before=size_range(m.group(7)),
        )
        for m in CLEANED_RE.finditer(text)
    ]
