"""Where the local cloud keeps its runtime state (``$HARNESS_HOME``, default
``~/.skycore-harness``): PIDs, ports, logs, the dockerd data root and the image cache."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path


def harness_home(home: Path | None = None, *, create: bool = True) -> Path:
    """``home``, else ``$HARNESS_HOME``, else ``~/.skycore-harness``; created unless
    ``create`` is False."""
    if home is not None:
        path = Path(home).expanduser()
    else:
        path = Path(os.environ.get("HARNESS_HOME", "~/.skycore-harness")).expanduser()
    if create:
        path.mkdir(parents=True, exist_ok=True)
    return path


def logs_dir() -> Path:
    """Folder for the logs of every process the harness starts."""
    path = harness_home() / "logs"
    path.mkdir(parents=True, exist_ok=True)
    return path


@contextlib.contextmanager
def home_env(home: Path) -> Iterator[Path]:
    """SKYCORE_HOME set to ``home`` while the block runs."""
    previous = os.environ.get("SKYCORE_HOME")
    os.environ["SKYCORE_HOME"] = str(home)
    try:
        yield home
    finally:
        if previous is None:
            os.environ.pop("SKYCORE_HOME", None)
        else:
            os.environ["SKYCORE_HOME"] = previous
