"""Upload order seen from outside: list the bucket over and over while a node writes, and
find a later file listed before an earlier one. Needs strong read-after-write listing
consistency (S3, GCS and Azure all give it): a file that completed is in every later
listing."""

from __future__ import annotations

import itertools
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

DEFAULT_INTERVAL_S = 0.05


@dataclass
class Snapshot:
    """One listing: when it started and ended (monotonic seconds), and the keys seen."""

    started: float
    ended: float
    keys: frozenset[str]


@dataclass
class ListingPoller:
    """Lists ``list_keys()`` every ``interval`` seconds in a thread until stopped."""

    list_keys: Callable[[], list[str]]
    interval: float = DEFAULT_INTERVAL_S
    snapshots: list[Snapshot] = field(default_factory=list)
    errors: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __enter__(self) -> ListingPoller:
        self._thread = threading.Thread(target=self._run, name="order-poll", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=60)

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                keys = frozenset(self.list_keys())
            except Exception:  # the bucket may not exist yet (a sky-managed one is made at launch)
                self.errors += 1
            else:
                self.snapshots.append(Snapshot(started, time.monotonic(), keys))
            self._stop.wait(max(0.0, self.interval - (time.monotonic() - started)))

    def violations(self, expected: list[str]) -> list[tuple[Snapshot, str, str]]:
        """Every listing that shows a file without one created before it:
        (the listing, the later file, the first earlier file missing)."""
        found = []
        for snap in self.snapshots:
            for later, key in enumerate(expected):
                if key not in snap.keys:
                    continue
                missing = [k for k in expected[:later] if k not in snap.keys]
                if missing:
                    found.append((snap, key, missing[0]))
                    break
        return found

    def first_violation(self, expected: list[str]) -> str | None:
        """The first listing that shows a file without one created before it, described
        (with how many listings showed a violation), or None."""
        found = self.violations(expected)
        if not found:
            return None
        snap, key, missing = found[0]
        return (
            f"a listing at +{snap.started - self.snapshots[0].started:.2f} s shows {key} but "
            f"not {missing}, created before it ({len(found)} of {len(self.snapshots)} listings "
            "showed a later file without an earlier one)"
        )

    def first_seen(self, expected: list[str]) -> list[str]:
        """``expected``'s keys in the order the listings first showed them."""
        seen: dict[str, float] = {}
        for snap in self.snapshots:
            for key in expected:
                if key in snap.keys and key not in seen:
                    seen[key] = snap.started
        return sorted(seen, key=lambda k: (seen[k], expected.index(k)))

    def describe(self, expected: list[str] | None = None) -> str:
        """The poll interval, the listings made and the time resolution while files were
        arriving (from the first listing that showed one of ``expected``)."""
        if not self.snapshots:
            return f"interval {self.interval * 1000:.0f} ms, no listing succeeded"
        took = [s.ended - s.started for s in self.snapshots]
        window = self.snapshots
        if expected:
            wanted = set(expected)
            first = next((i for i, s in enumerate(self.snapshots) if s.keys & wanted), 0)
            window = self.snapshots[max(0, first - 1) :]
        gaps = [b.started - a.started for a, b in itertools.pairwise(window)] or took[:1]
        return (
            f"interval {self.interval * 1000:.0f} ms, {len(self.snapshots)} listings "
            f"(median {statistics.median(took) * 1000:.0f} ms each; {self.errors} listings "
            "refused, e.g. before the bucket existed); "
            f"while files arrived a listing every {statistics.median(gaps) * 1000:.0f} ms "
            f"(worst gap {max(gaps) * 1000:.0f} ms): uploads completing closer together than "
            "that cannot be ordered"
        )
