"""``harness status`` as lines for a person: one line per component, emulator (with its
gate), node and active fault, in 100 columns; the log paths in a footer (every one with
``-v``)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from rich.console import Console, RenderableType
from rich.table import Table
from rich.text import Text

from harness.cloud.status import CloudStatus

WIDTH = 100
"""The width of the output when stdout is not a terminal and COLUMNS is not set."""

_STYLE = {"running": "green", "present": "green", "not answering": "yellow", "unknown": "yellow"}


def console() -> Console:
    """A console as wide as the terminal (or COLUMNS); :data:`WIDTH` when piped."""
    tty = sys.stdout.isatty() or bool(os.environ.get("COLUMNS"))
    return Console(highlight=False, width=None if tty else WIDTH)


def _table(*columns: str) -> Table:
    """A borderless table: every cell on one line, shortened with an ellipsis if the
    window is too narrow, except the last column's, which folds."""
    table = Table(box=None, header_style="bold", pad_edge=False, show_edge=False)
    for i, column in enumerate(columns):
        last = i == len(columns) - 1
        table.add_column(column, no_wrap=not last, overflow="fold" if last else "ellipsis")
    return table


def _state(word: str) -> Text:
    return Text(word, style=_STYLE.get(word, "red"))


def _pid(pid: int | None) -> str:
    return "-" if pid is None else str(pid)


def render(status: CloudStatus, verbose: bool = False) -> list[RenderableType]:
    """The sections of the plain output, in order: components, emulators, nodes, faults,
    logs."""
    return [
        _components(status),
        Text(""),
        _emulators(status),
        Text(""),
        _nodes(status),
        Text(""),
        _faults(status),
        Text(""),
        _logs(status) if verbose else _logs_footer(status),
    ]


def _components(status: CloudStatus) -> Table:
    table = _table("COMPONENT", "STATE", "WHERE")
    engine = status.dockerd
    if engine.running:
        owner = f" (pid {engine.pid})" if engine.pid else " (not started by harness)"
        table.add_row("dockerd", _state("running"), f"{engine.host}{owner}")
    else:
        table.add_row("dockerd", _state("stopped"), "run 'harness up'")
    image = status.image
    where = (image.tag or "-") + (f" ({image.problem})" if image.problem else "")
    state = {True: "present", False: "missing", None: "unknown"}[image.present]
    table.add_row("node image", _state(state), where)
    config = "present" if status.config_present else "missing"
    table.add_row("skycore config", _state(config), status.config)
    return table


def _emulators(status: CloudStatus) -> Table:
    known = {f.store: f for f in status.faults}
    table = _table("STORE", "SERVED BY", "STATE", "ENDPOINT (GATE)", "GATE PID", "PID", "FAULTS")
    for e in status.emulators:
        name = f"{e.store} ({e.alias})" if e.alias and e.alias != e.store else e.store
        faults = known.get(e.store)
        count = "-" if faults is None else str(len(faults.active)) if faults.known else "unknown"
        table.add_row(
            name,
            e.implementation,
            _state(e.state),
            e.endpoint or "-",
            _pid(e.gate_pid),
            _pid(e.pid),
            count,
        )
    return table


def _nodes(status: CloudStatus) -> RenderableType:
    if status.nodes is None:
        return Text(f"Nodes: unknown ({status.nodes_problem}).")
    if not status.nodes:
        return Text("Nodes: none.")
    table = _table("NODE", "CLUSTER", "RANK", "STATE")
    for node in status.nodes:
        rank = "-" if node.rank is None else str(node.rank)
        table.add_row(node.name, node.cluster, rank, _state(node.state))
    return table


def _faults(status: CloudStatus) -> RenderableType:
    rows = [(f.store, d["description"]) for f in status.faults for d in f.active]
    rows += [(f.store, f"unknown: {f.problem}") for f in status.faults if not f.known]
    if not rows:
        return Text("Faults: none." if status.faults else "Faults: none (no gate is running).")
    table = _table("STORE", "ACTIVE FAULT")
    for store, text in rows:
        table.add_row(store, text)
    return table


def _logs_footer(status: CloudStatus) -> Text:
    folders = {str(Path(p).parent) for e in status.emulators for p in (e.log, e.gate_log) if p}
    where = ", ".join(sorted(folders)) or "-"
    return Text(f"Logs: {where} (STORE.log, gate-STORE.log); 'harness status -v' lists each.")


def _logs(status: CloudStatus) -> Table:
    table = _table("LOG OF", "PATH")
    if status.dockerd.log:
        table.add_row("dockerd", status.dockerd.log)
    for e in status.emulators:
        table.add_row(f"{e.store} gate", e.gate_log or "-")
        table.add_row(f"{e.store} {e.implementation}", e.log or "-")
    return table
