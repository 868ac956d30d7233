"""Where the local cloud keeps its runtime state (``$HARNESS_HOME``, default
``~/.skycore-harness``): PIDs, ports, logs, the dockerd data root and the image cache."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path


def harness_home_path(home: Path | None = None) -> Path:
    """``home``, else ``$HARNESS_HOME``, else ``~/.skycore-harness`` (not created)."""
    if home is not None:
        return Path(home).expanduser()
    return Path(os.environ.get("HARNESS_HOME", "~/.skycore-harness")).expanduser()


def harness_home() -> Path:
    """The harness state folder, created on first use."""
    home = harness_home_path()
    home.mkdir(parents=True, exist_ok=True)
    return home


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
