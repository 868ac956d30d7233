"""What the contract, its gate client and its launcher share: the record of a running
emulator (``$HARNESS_HOME/emulators/<store>.json``), the write events a gate reports and the
one error type."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path


class EmulatorError(Exception):
    """An emulator could not be started or used; the message names the cause and the fix."""


@dataclass(frozen=True)
class WriteEvent:
    """A completed write seen by a gate, in completion order.

    ``op`` names the kind of write in the protocol's terms (put, copy, multipart,
    resumable, rewrite, compose, commit, delete...). ``size`` is -1 when unknown.
    """

    bucket: str
    key: str
    size: int
    op: str
    t_ns: int


@dataclass
class EmulatorRecord:
    """The state file of one running emulator and its gate."""

    store: str
    port: int
    pid: int
    start_time: int
    gate_port: int
    gate_pid: int
    gate_start_time: int
    log: str
    gate_log: str
    gate_state: str
    started_at: float
    gate_version: str = ""
    gate_mtime: float = 0.0
    """The newest modification time of the running gate's code (see gate_code_mtime)."""
    sealed: bool = False
    """The emulator runs in a private network namespace (only its gate reaches it)."""


def state_file(home: Path, store: str) -> Path:
    """``$HARNESS_HOME/emulators/<store>.json``."""
    return home / "emulators" / f"{store}.json"


def save_record(home: Path, record: EmulatorRecord) -> None:
    """Write ``record`` to its state file (atomically)."""
    path = state_file(home, record.store)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(asdict(record), indent=1))
    tmp.replace(path)
