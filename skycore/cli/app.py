"""The ``skycore`` click group, its console and what every command shares."""

from __future__ import annotations

import click
from rich.console import Console

from skycore.cli.output import make_console

console: Console = make_console()

JSON_HELP = "Print JSON (stable field names, listed in README) instead of a table."

_STATUS_STYLE = {
    "UP": "green",
    "INIT": "yellow",
    "STOPPED": "dim",
    "SUCCEEDED": "green",
    "RUNNING": "cyan",
    "SETTING_UP": "cyan",
    "PENDING": "yellow",
    "FAILED": "red",
    "FAILED_SETUP": "red",
    "FAILED_DRIVER": "red",
    "CANCELLED": "dim",
}


def styled(status: str) -> str:
    """``status`` with its colour (rich markup)."""
    style = _STATUS_STYLE.get(status, "")
    return f"[{style}]{status}[/{style}]" if style else status


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="skycore")
def cli() -> None:
    """skycore: launch tasks on clusters of nodes (SkyPilot-style)."""
