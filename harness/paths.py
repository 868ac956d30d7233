"""Where the local cloud keeps its runtime state (``$HARNESS_HOME``, default
``~/.skycore-harness``): PIDs, ports, logs, the dockerd data root and the image cache."""

from __future__ import annotations

import os
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
