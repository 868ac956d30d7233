"""``harness``: bring the local cloud up or down, show it, and break it on purpose."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from typing import TypeVar

import click
from rich.console import Console

from harness.emulator_registry import EmulatorLoadError, UnknownEmulatorError
from harness.emulators.records import EmulatorError
from harness.errors import CloudError
from skycore.errors import ConfigError

console = Console(highlight=False, width=max(Console().width, 140))
err_console = Console(stderr=True, highlight=False)
F = TypeVar("F", bound=Callable[..., object])


def _say(message: str) -> None:
    console.print(message, markup=False, soft_wrap=True)


def _preempt() -> click.Command:
    from harness.cloud.preemption import preempt_command

    return preempt_command


def _fault() -> click.Command:
    from harness.cloud.store_faults import fault_command

    return fault_command


def _conform() -> click.Command:
    from harness.conformance.commands import conform_command

    return conform_command


def _target() -> click.Command:
    from harness.conformance.commands import target_command

    return target_command


LAZY_COMMANDS: dict[str, Callable[[], click.Command]] = {
    "preempt": _preempt,  # harness preempt CLUSTER [--rank N] [--force]
    "fault": _fault,  # harness fault STORE KIND [--seconds N] [--bucket B] ...
    "conform": _conform,  # harness conform [--store NAME] [--target FILE] [-n N] ...
    "target": _target,  # harness target STORE > t.yaml
}
"""Commands whose modules load only when the command runs (or help lists it), so that
``harness up`` does not import the fault and conformance modules, nor they the docker SDK."""


class LazyGroup(click.Group):
    """A group that imports the module of a command of :data:`LAZY_COMMANDS` on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*super().list_commands(ctx), *LAZY_COMMANDS])

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        load = LAZY_COMMANDS.get(cmd_name)
        return load() if load is not None else super().get_command(ctx, cmd_name)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="skycore")
def cli() -> None:
    """The local cloud for skycore: dockerd, the node image, the storage emulators."""


def _store_option(what: str) -> Callable[[F], F]:
    return click.option(
        "--store",
        "stores",
        multiple=True,
        metavar="NAME",
        help=f"{what} NAME: a store or its alias.",
    )


def _selected(stores: tuple[str, ...]) -> tuple[str, ...] | None:
    """The stores named with --store, by name or alias (None: all); a name no package
    registers is a usage error that lists the registered ones with their aliases."""
    from harness import emulator_registry as registry

    if not stores:
        return None
    found = {name: registry.find_store(name) for name in stores}
    unknown = [name for name, store in found.items() if store is None]
    for name in unknown:
        registry.check_loaded(name)
    if unknown:
        raise click.BadParameter(
            f"no store named {', '.join(map(repr, unknown))} is registered. Registered "
            f"stores: {registry.described_stores()}. Name one of them, or install the "
            "package that declares the store (entry-point group 'harness.emulators').",
            param_hint="--store",
        )
    return tuple(dict.fromkeys(registry.resolve_store(name) for name in stores))


@cli.command()
@_store_option("Start only what this store needs (repeatable; default: every registered store).")
def up(stores: tuple[str, ...]) -> None:
    """Start everything that is not running yet (safe to run twice): dockerd, the node
    image and the emulators of every store, or only of the stores named with --store. The
    skycore config gets the started stores' sections; every other section is kept. Steps
    that do not need each other run side by side; each prints one line with its time."""
    from harness.cloud import cloud

    selected = _selected(stores)
    started = time.monotonic()
    info = cloud.up(say=_say, stores=selected)
    console.print(
        f"[green]Local cloud is up[/green] in {time.monotonic() - started:.1f} s; "
        f"skycore config: {info.config_path}"
    )


def _forget_only(stores: tuple[str, ...], forget: bool) -> tuple[str, ...]:
    """The stores named with --store that no package here registers (or whose package fails
    to load) but whose section the skycore config has: with --forget, their section is
    removed though their emulator cannot be stopped from here. Empty without --forget."""
    from harness import emulator_registry as registry
    from skycore.config import store_sections

    if not forget:
        return ()
    return tuple(
        s for s in dict.fromkeys(stores) if registry.find_store(s) is None and store_sections(s)
    )


@cli.command()
@_store_option(
    "Stop only this store's emulator and gate (repeatable; default: everything up started)."
)
@click.option(
    "--forget",
    is_flag=True,
    help="Also remove the stores' sections from the skycore config (config.yaml). Works for "
    "a store whose package is not installed here, too (only its section goes).",
)
@click.option(
    "--wipe",
    is_flag=True,
    help="Also delete the stores' emulator data in $HARNESS_HOME (a persistent emulator's "
    "buckets, the gate's access state): the next 'harness up' starts empty.",
)
def down(stores: tuple[str, ...], forget: bool, wipe: bool) -> None:
    """Stop what 'harness up' started: the emulators and gates recorded in $HARNESS_HOME
    and a dockerd it started (an engine it found running is left alone). With --store, only
    those stores' emulators and gates; dockerd and the other stores keep running. Prints
    what stays in the skycore config: the stores' sections are kept unless --forget."""
    from harness.cloud import cloud, leftovers

    only_config = _forget_only(stores, forget)
    rest = tuple(s for s in stores if s not in only_config)
    notes: list[str] = []
    selected: tuple[str, ...] | None = ()
    if rest or not stores:
        selected = _selected(rest)
        stopped = cloud.down(say=_say, stores=selected, forget=forget, wipe=wipe, note=notes.append)
        if selected is None:
            console.print("Local cloud is down.")
        for store in selected or ():
            state = "stopped" if store in stopped else "not running (nothing to stop)"
            console.print(f"{store}: emulator and gate {state}.")
    if only_config:
        for store in only_config:
            console.print(f"{store}: {leftovers.unstoppable(store)}")
        cloud.forget(only_config, wipe=wipe, note=notes.append)
    for line in notes:
        _say(line)


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object (stable field names).")
@click.option("-v", "--verbose", is_flag=True, help="List every log file.")
def status(as_json: bool, verbose: bool) -> None:
    """Show what runs and where: dockerd, the node image, each store's emulator and gate,
    the node containers, the faults active in each gate (unknown if a gate does not
    answer in 2 s) and the skycore config."""
    from harness.cloud import status as cloud_status
    from harness.cloud import status_view

    found = cloud_status.collect()
    if as_json:
        click.echo(json.dumps(cloud_status.as_json(found), indent=2))
        return
    out = status_view.console()
    with out.capture() as captured:
        for part in status_view.render(found, verbose):
            out.print(part)
    for line in captured.get().splitlines():
        click.echo(line.rstrip())


@cli.command()
def env() -> None:
    """Print shell exports that point tools at the local cloud."""
    from harness.cloud import cloud

    for key, value in cloud.env_exports().items():
        click.echo(f"export {key}={value}")


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
