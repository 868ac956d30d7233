"""What the ``skycore`` command lines share: known failures become one clear paragraph and
an exit code (never a traceback), cluster names, and the one sentence for a missing
cluster."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

from rich.console import Console
from rich.markup import escape

from skycore.config import ConfigError
from skycore.core.nodes import cluster_name_problem
from skycore.errors import ProvisionError, StageError, UserError
from skycore.state.clusters import ClusterRecord, get_cluster

F = TypeVar("F", bound=Callable[..., Any])

err_console = Console(stderr=True, highlight=False, soft_wrap=True)


def fail(message: str, code: int) -> NoReturn:
    """Print ``message`` as an error and exit with ``code``."""
    err_console.print(f"[bold red]Error:[/bold red] {escape(message)}", soft_wrap=True)
    sys.exit(code)


def handle_errors(interrupted: str = "Interrupted.") -> Callable[[F], F]:
    """Decorator: UserError / ConfigError / StageError / ProvisionError / Ctrl-C become a
    message and an exit code (the error's own, 2 for config, 1 for infrastructure, 130)."""

    def decorate(fn: F) -> F:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            try:
                return fn(*args, **kwargs)
            except UserError as e:
                fail(e.message, e.exit_code)
            except ConfigError as e:
                fail(str(e), 2)
            except StageError as e:
                # The stage line, the log tail and the path were printed already.
                fail(e.message, e.exit_code)
            except ProvisionError as e:
                fail(str(e), 1)
            except KeyboardInterrupt:
                fail(interrupted, 130)

        return wrapper  # type: ignore[return-value]

    return decorate


def check_cluster_name(name: str, field: str = "cluster name") -> str:
    """``name`` if it is a valid cluster name, else a UserError (exit 2) naming the fix;
    called before anything touches the filesystem."""
    problem = cluster_name_problem(name)
    if problem:
        raise UserError(f"{field}: {problem}")
    return name


def missing_clusters(names: list[str]) -> UserError:
    """The one error (exit 2) for clusters that do not exist, the same for every command."""
    shown = ", ".join(f"'{n}'" for n in names)
    subject = f"Cluster {shown} does" if len(names) == 1 else f"Clusters {shown} do"
    return UserError(
        f"{subject} not exist: 'skycore status' lists the clusters, and 'skycore launch -c "
        "NAME TASK.yaml' creates one."
    )


def require_clusters(names: list[str] | tuple[str, ...]) -> list[ClusterRecord]:
    """The records of the clusters ``names`` (valid names first, then the missing-cluster
    error naming every one that does not exist)."""
    for name in names:
        check_cluster_name(name, "CLUSTER")
    records = {n: get_cluster(n) for n in names}
    missing = [n for n, r in records.items() if r is None]
    if missing:
        raise missing_clusters(missing)
    return [r for r in records.values() if r is not None]


def require_cluster(name: str) -> ClusterRecord:
    """The record of cluster ``name``, or the missing-cluster error (exit 2)."""
    return require_clusters([name])[0]
