"""Local log folders: one ``~/sky_logs/sky-<timestamp>/`` per launch or exec.

A folder holds provision.log, workdir_sync.log, file_mounts.log, setup-<rank>.log and
run-<rank>.log (the node output, streamed as it comes).
"""

from __future__ import annotations

import os
import time
from datetime import datetime
from pathlib import Path

from skycore.config import SkycoreConfig


def new_log_dir(config: SkycoreConfig) -> Path:
    """Create and return a fresh log folder under the config's logs path."""
    base = config.logs_path()
    base.mkdir(parents=True, exist_ok=True)
    while True:
        stamp = datetime.now().strftime("%Y-%m-%d-%H-%M-%S-%f")
        path = base / f"sky-{stamp}"
        try:
            path.mkdir()
            return path
        except FileExistsError:
            time.sleep(0.001)


def tail(path: Path, lines: int = 20) -> str:
    """The last ``lines`` lines of a text file ('' if it is missing)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - 64 * 1024))
            data = f.read().decode(errors="replace")
    except OSError:
        return ""
    return "\n".join(data.rstrip("\n").splitlines()[-lines:])


def append(path: Path, text: str) -> None:
    """Append a line of text to a log file, stamped with the wall-clock time."""
    path.parent.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now().strftime("%H:%M:%S.%f")[:-3]
    with open(path, "a") as f:
        f.write(f"[{stamp}] " + text.rstrip("\n") + "\n")


def _complete_marker(log_dir: Path, kind: str) -> Path:
    return log_dir / f".{kind}-logs-complete"


def mark_complete(log_dir: Path, kind: str) -> None:
    """Record that the local ``<kind>-<rank>.log`` copies of a job hold the nodes' whole
    logs (its terminal followed the part to its end, or they were fetched afterwards)."""
    log_dir.mkdir(parents=True, exist_ok=True)
    _complete_marker(log_dir, kind).touch()


def is_complete(log_dir: Path, kind: str) -> bool:
    """True once ``mark_complete`` was called for this log folder and part."""
    return _complete_marker(log_dir, kind).exists()
