"""A new state database used by several threads at once: every one of them is answered.

The dry run checks its mounts in parallel, so its first use of a new skycore home opens the
database from several threads together; switching a new file to WAL from two connections
at once made SQLite answer one "database is locked" without waiting (about 1 in 80 rounds
of 8 threads, before the database was made ready once per file)."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from skycore.state import storages

ROUNDS = 200
THREADS = 8


def first_use(together: threading.Barrier) -> None:
    """Open the database with the other threads, all at once, and read from it."""
    together.wait()
    assert storages.get_storage("never-made") is None


def test_threads_opening_a_new_database_together_all_get_an_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    failures: list[BaseException] = []
    for round_ in range(ROUNDS):
        monkeypatch.setenv("SKYCORE_HOME", str(tmp_path / f"home-{round_}"))
        together = threading.Barrier(THREADS)

        with ThreadPoolExecutor(THREADS) as pool:
            for done in [pool.submit(first_use, together) for _ in range(THREADS)]:
                if done.exception() is not None:
                    failures.append(done.exception())  # type: ignore[arg-type]
    assert failures == [], f"{len(failures)} of {ROUNDS * THREADS}: {failures[0]!r}"
