"""Every error type skycore raises, in one place (the modules that raise them re-export
their own, so ``skycore.storage.StorageError`` and the like keep working).

``UserError`` is the base of every error a user can cause (bad task YAML, a bucket they cannot
access, a missing config section). Its message is a single paragraph that names the field and
the fix; the CLI prints it without a traceback and exits with ``exit_code``. ``StageError`` is
a stage that failed for a reason outside the user's code (it carries the log path);
``ConfigError`` and ``ProvisionError`` are broken config files and providers; the two
transition errors are bugs (a status change the state machine forbids), never user errors.
"""

from __future__ import annotations

from pathlib import Path


class UserError(Exception):
    """An error the user can fix. ``str(e)`` is one paragraph; the CLI exits with exit_code."""

    exit_code: int = 2

    def __init__(self, message: str, *, exit_code: int | None = None) -> None:
        super().__init__(" ".join(message.split()))
        if exit_code is not None:
            self.exit_code = exit_code

    @property
    def message(self) -> str:
        """The single-paragraph message."""
        return str(self.args[0]) if self.args else ""


class ClusterError(UserError):
    """The cluster is not in a state that allows the command; the message says what to run."""


class StageError(Exception):
    """A stage failed for a reason outside the user's code: the log path, the log's last
    lines, and ``reason``, the line to record as the cluster's status reason (the message if
    not given)."""

    exit_code = 1

    def __init__(
        self, message: str, log_path: Path | None = None, tail: str = "", reason: str = ""
    ) -> None:
        super().__init__(message)
        self.message = message
        self.log_path = log_path
        self.tail = tail
        self.reason = reason or message


class ConfigError(Exception):
    """The config file is missing or malformed; the message says how to fix it."""


class TaskError(UserError):
    """The task YAML is invalid; the message names the field and the fix."""


class UserPathError(UserError):
    """A path the user gave cannot be used. ``field``/``shown``/``problem``/``fix`` are the
    parts of the one-paragraph message: ``{field}: the {noun} '{shown}' {problem}. {fix}``."""

    def __init__(self, field: str, shown: str, problem: str, fix: str, noun: str) -> None:
        super().__init__(f"{field}: the {noun} '{shown}' {problem}. {fix}")
        self.field = field
        self.shown = shown
        self.problem = problem
        self.fix = fix


class StorageError(UserError):
    """A storage problem the user can fix (bad spec, access, name); one paragraph."""


class StorageSpecError(StorageError):
    """A file_mounts storage entry is inconsistent (e.g. COPY without a source)."""


class BucketNameError(StorageError):
    """A bucket name breaks its store's naming rules."""


class StorageAccessError(StorageError):
    """A bucket does not exist, is private to someone else, or its name is taken."""


class UnknownStoreError(StorageError):
    """A store name, URL scheme or config section that no registered store has."""


class StoreLoadError(StorageError):
    """A registered store could not be imported or does not follow the contract."""


class StorageInUse(StorageError):
    """A bucket that the recorded mounts of another cluster still use."""

    def __init__(self, message: str, clusters: list[str]) -> None:
        super().__init__(message)
        self.clusters = clusters


class ProvisionError(Exception):
    """Nodes could not be created, resumed, stopped or removed; the message says why."""


class ClusterTransitionError(RuntimeError):
    """A status change the cluster state machine forbids (a bug, never a user error)."""


class JobNotFound(UserError):
    """No managed job has the given id."""


class TransitionError(Exception):
    """A status change the state machine does not allow (a bug, not a user error)."""
