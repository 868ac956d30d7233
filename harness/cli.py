"""``harness``: bring the local cloud up or down, show it, and break it on purpose."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TypeVar

import click
from rich.console import Console
from rich.table import Table

from harness.cloud import cloud
from harness.cloud.chaos import fault_command, preempt_command
from harness.conformance.commands import conform_command, target_command
from harness.emulators.records import EmulatorError
from harness.emulators.registry import EmulatorLoadError, UnknownEmulatorError
from harness.errors import CloudError
from skycore.config import ConfigError

console = Console(highlight=False, width=max(Console().width, 140))
err_console = Console(stderr=True, highlight=False)
F = TypeVar("F", bound=Callable[..., object])


def _say(message: str) -> None:
    console.print(message, markup=False, soft_wrap=True)


@click.group()
def cli() -> None:
    """The local cloud for skycore: dockerd, the node image, the storage emulators."""


def _store_option(what: str) -> Callable[[F], F]:
    return click.option("--store", "stores", multiple=True, metavar="NAME", help=what)


def _selected(stores: tuple[str, ...]) -> tuple[str, ...] | None:
    """The stores named with --store (None: all); a name no package registers is a usage
    error that lists the registered ones."""
    from harness.emulators import registry

    selected = tuple(dict.fromkeys(stores)) or None
    if selected is not None:
        for store in selected:
            registry.check_loaded(store)
        known = registry.store_names()
        unknown = [s for s in selected if s not in known]
        if unknown:
            raise click.BadParameter(
                f"no store named {', '.join(map(repr, unknown))} is registered. Registered "
                f"stores: {', '.join(known) or 'none'}. Name one of them, or install the "
                "package that declares the store (entry-point group 'harness.emulators').",
                param_hint="--store",
            )
    return selected


@cli.command()
@_store_option("Start only what this store needs (repeatable; default: every registered store).")
def up(stores: tuple[str, ...]) -> None:
    """Start everything that is not running yet (safe to run twice): dockerd, the node
    image and the emulators of every store, or only of the stores named with --store. The
    skycore config gets the started stores' sections; every other section is kept. Steps
    that do not need each other run side by side; each prints one line with its time."""
    selected = _selected(stores)
    started = time.monotonic()
    info = cloud.up(say=_say, stores=selected)
    console.print(
        f"[green]Local cloud is up[/green] in {time.monotonic() - started:.1f} s; "
        f"skycore config: {info.config_path}"
    )


@cli.command()
@_store_option(
    "Stop only this store's emulator and gate (repeatable; default: everything up started)."
)
def down(stores: tuple[str, ...]) -> None:
    """Stop what 'harness up' started: the emulators and gates recorded in $HARNESS_HOME
    and a dockerd it started (an engine it found running is left alone). With --store, only
    those stores' emulators and gates; dockerd and the other stores keep running."""
    selected = _selected(stores)
    stopped = cloud.down(say=_say, stores=selected)
    if selected is None:
        console.print("Local cloud is down.")
        return
    for store in selected:
        state = "stopped" if store in stopped else "not running (nothing to stop)"
        console.print(f"{store}: emulator and gate {state}.")


@cli.command()
def status() -> None:
    """Show what runs and where."""
    table = Table("component", "state", "where", "details")
    for column in table.columns:
        column.overflow = "fold"
    for row in cloud.status():
        up, down = (
            ("present", "missing")
            if row.component in ("node image", "skycore config")
            else ("running", "stopped")
        )
        state = f"[green]{up}[/green]" if row.running else f"[red]{down}[/red]"
        table.add_row(row.component, state, row.where, row.details)
    console.print(table)


@cli.command()
def env() -> None:
    """Print shell exports that point tools at the local cloud."""
    for key, value in cloud.env_exports().items():
        click.echo(f"export {key}={value}")


cli.add_command(preempt_command)  # harness preempt CLUSTER [--rank N] [--force]
cli.add_command(fault_command)  # harness fault STORE KIND [--seconds N] [--bucket B] ...
cli.add_command(conform_command)  # harness conform [--store NAME] [--target FILE] [-n N] ...
cli.add_command(target_command)  # harness target STORE > t.yaml


def main() -> None:
    """Entry point: run the CLI, turning known failures into one clear line."""
    try:
        cli(standalone_mode=False)
    except (CloudError, ConfigError, EmulatorError, EmulatorLoadError, UnknownEmulatorError) as e:
        err_console.print(f"[red]Error:[/red] {e}")
        sys.exit(1)
    except click.exceptions.Abort:
        err_console.print("Aborted.")
        sys.exit(130)
    except click.ClickException as e:
        e.show()
        sys.exit(e.exit_code)


if __name__ == "__main__":
    main()
