"""Output the ``skycore`` commands share: tables that never lose data, and ``--json``.

At a terminal, tables are rich tables sized to the window. Anywhere else (a pipe, a file, a
script) every table prints whole: no column is truncated, wrapped away or dropped. ``--json``
prints one JSON document with stable field names (README lists them).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

# Wide enough that rich never truncates or folds a cell when stdout is not a terminal.
_UNBOUNDED = 1_000_000


def make_console() -> Console:
    """The stdout console: the window's width at a terminal, unbounded otherwise."""
    return Console(
        highlight=False, soft_wrap=True, width=None if sys.stdout.isatty() else _UNBOUNDED
    )


def is_terminal() -> bool:
    """True when stdout is a terminal (tables may then be shortened to fit the window)."""
    return sys.stdout.isatty()


def table(columns: Sequence[str], title: str | None = None) -> Table:
    """A table whose cells never wrap (at a terminal, the last column folds)."""
    t = Table(box=None, header_style="bold", title=title)
    for i, col in enumerate(columns):
        last = i == len(columns) - 1
        t.add_column(col, no_wrap=not last, overflow="fold" if last else "ellipsis")
    return t


def print_json(data: Any) -> None:
    """Print ``data`` as one JSON document on stdout."""
    sys.stdout.write(json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")
    sys.stdout.flush()
