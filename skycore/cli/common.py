"""What the ``skycore`` command lines share: known failures become one clear paragraph and
an exit code (never a traceback), and ``--env KEY=VALUE`` parsing."""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

from rich.console import Console
from rich.markup import escape

from skycore import core
from skycore.config import ConfigError
from skycore.errors import ProvisionError, StageError, UserError

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


def parse_envs(pairs: tuple[str, ...]) -> dict[str, str]:
    """``--env KEY=VALUE`` options as a dict; ``--env KEY`` takes KEY's value from the local
    environment (as SkyPilot does). A clear UserError for an unset or malformed one."""
    envs: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not key:
            raise UserError(f"--env {pair!r}: expected KEY=VALUE or KEY (e.g. --env RUN_ID=abc).")
        if not sep:
            if key not in os.environ:
                raise UserError(
                    f"--env {key}: {key} is not set in your environment; pass --env {key}=VALUE "
                    f"or export {key} first."
                )
            value = os.environ[key]
        envs[key] = value
    return envs


def check_cluster_name(name: str, field: str = "cluster name") -> str:
    """``name`` if it is a valid cluster name, else a UserError (exit 2) naming the fix;
    called before anything touches the filesystem."""
    problem = core.cluster_name_problem(name)
    if problem:
        raise UserError(f"{field}: {problem}")
    return name
