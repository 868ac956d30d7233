"""``harness conform`` (run the conformance suite from any directory, on the local cloud or a
target file) and ``harness target`` (write a target file for the local cloud's gate)."""

from __future__ import annotations

import importlib.util
import os
import stat
import subprocess
import sys

import click

from harness.accounts import OTHER, USER
from harness.targets import Target, dump_target, load_target, new_run_id, run_tag
from harness.testing import target_cleanup as cleanup
from harness.testing import target_plan as plan


def _echo(line: str) -> None:
    click.echo(line, err=True)


def _confirm(text: str, yes: bool) -> None:
    """Print what the run creates; ask unless ``yes`` (a run on the local cloud asks
    nothing: what it creates there costs nothing and is its own)."""
    _echo(text)
    if yes:
        return
    if not sys.stdin.isatty():
        raise click.UsageError(
            "The conformance suite asks before it creates buckets, and stdin is not a "
            "terminal: pass -y to run without asking."
        )
    if not click.confirm("Run it?", default=False, err=True):
        raise click.exceptions.Abort()


TEST_DEPENDENCIES = {"pytest": "pytest", "xdist": "pytest-xdist"}
"""Modules the suite runs on (import name -> distribution), installed by the harness extra."""


def require_test_dependencies(workers: int) -> None:
    """A UsageError naming the harness extra when pytest (or, with workers, pytest-xdist)
    is not installed where ``harness conform`` runs."""
    wanted = {m: d for m, d in TEST_DEPENDENCIES.items() if m != "xdist" or workers > 0}
    missing = [dist for module, dist in wanted.items() if importlib.util.find_spec(module) is None]
    if missing:
        raise click.UsageError(
            f"harness conform runs the suite with pytest, and {', '.join(missing)} "
            f"{'is' if len(missing) == 1 else 'are'} not installed in this environment "
            f"({sys.executable}). Install skycore with its harness extra: "
            "pip install 'skycore[harness]' (or the extra of the package you installed it from)."
        )


def _pytest_argv(
    stores: tuple[str, ...], target: str | None, workers: int, run_id: str, extra: tuple[str, ...]
) -> list[str]:
    argv = [sys.executable, "-m", "pytest", "--pyargs", "harness.conformance"]
    argv += ["-p", "no:cacheprovider", "--run-id", run_id, "-rfEs"]
    if workers > 0:
        argv += ["-n", str(workers), "--dist", "loadgroup"]
    else:
        argv += ["-p", "no:xdist"]
    for store in stores:
        argv += ["--store", store]
    if target:
        argv += ["--target", target]
    return argv + list(extra)


INTERRUPTED_EXIT = 130
"""What ``harness conform`` exits with after Ctrl-C when the suite itself reported no error."""


def _run(argv: list[str]) -> int:
    """Run pytest; on Ctrl-C let it tear down (it got the signal too) and return. A run the
    user interrupted never exits 0, even if the suite went on to pass."""
    proc = subprocess.Popen(argv, env={**os.environ, plan.PLAN_SHOWN_ENV: "1"})
    try:
        return proc.wait()
    except KeyboardInterrupt:
        _echo("interrupted: waiting for the suite to clean up...")
        try:
            return proc.wait(timeout=300) or INTERRUPTED_EXIT
        except (KeyboardInterrupt, subprocess.TimeoutExpired):
            proc.kill()
            return INTERRUPTED_EXIT


@click.command(
    "conform",
    context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
)
@click.option(
    "--store",
    "stores",
    multiple=True,
    metavar="NAME",
    help="store to check, by name or alias (repeatable; default: all, or the target's)",
)
@click.option(
    "--target",
    "target_path",
    default="local",
    show_default=True,
    metavar="FILE|local",
    help="a target file naming a real endpoint and its accounts",
)
@click.option(
    "-n", "workers", type=int, default=2, show_default=True, help="pytest-xdist workers (0: none)"
)
@click.option("-y", "--yes", is_flag=True, help="do not ask before creating buckets")
@click.option(
    "--compare-stand-in",
    is_flag=True,
    help="with --target: also run the emulator contract's probes on the target and on the "
    "local stand-in of its store, and print where they differ",
)
@click.option(
    "--sweep",
    is_flag=True,
    help="delete the target's leftover buckets (prefix, older than an hour) and exit",
)
@click.argument("pytest_args", nargs=-1, type=click.UNPROCESSED)
def conform_command(
    stores: tuple[str, ...],
    target_path: str,
    workers: int,
    yes: bool,
    compare_stand_in: bool,
    sweep: bool,
    pytest_args: tuple[str, ...],
) -> None:
    """Run the conformance suite (mount matrix, comp_test, stop/start, upload order,
    multinode) from any directory. Arguments after the options go to pytest."""
    require_test_dependencies(workers)
    target: Target | None = None if target_path == "local" else load_target(target_path)
    if compare_stand_in:
        if target is None:
            raise click.UsageError(
                "--compare-stand-in needs --target FILE: it compares the local stand-in with "
                "the service the file names."
            )
        pytest_args = ("--compare-stand-in", *pytest_args)
    if sweep:
        if target is None:
            raise click.UsageError("--sweep needs --target FILE (the local cloud is yours).")
        for line in cleanup.sweep(target):
            click.echo(line)
        return
    from harness import emulator_registry as registry

    stores = tuple(dict.fromkeys(registry.resolve_store(s) for s in stores))
    if target is not None:
        if stores and stores != (target.store,):
            raise click.UsageError(
                f"--store {' '.join(stores)} conflicts with {target_path}, a target of store "
                f"'{target.store}'."
            )
        stores = (target.store,)
    registry.check_stores(stores)
    label = "the local cloud" if target is None else f"the endpoint in {target_path}"
    run_id = new_run_id()
    _confirm(plan.describe(list(stores or registry.store_names()), label), yes or target is None)
    if target is not None:
        _echo(f"run id {run_id}: every bucket is named {run_tag(target.bucket_prefix, run_id)}-*")
    code = _run(
        _pytest_argv(stores, None if target is None else target_path, workers, run_id, pytest_args)
    )
    if target is not None:
        for line in cleanup.delete_run_buckets(target, run_id):
            _echo(line)
    sys.exit(code)


@click.command("target")
@click.argument("store")
def target_command(store: str) -> None:
    """Print a target file for STORE (a store or its alias) on the local cloud: the gate's
    endpoint, the user's and the other account's credentials (never the admin token).
    Redirected into a file, the file is made readable by its owner only."""
    from harness import emulator_registry as registry
    from harness.emulators import fleet

    store = registry.resolve_store(store)
    emulator = fleet.get(store)
    text = dump_target(
        store,
        emulator.config_section(USER),
        emulator.config_section(OTHER),
        emulator.bucket_url(emulator.public_dataset, OTHER),
    )
    out = sys.stdout.fileno()
    if stat.S_ISREG(os.fstat(out).st_mode):
        os.fchmod(out, 0o600)
    click.echo(
        f"# A target file for the local cloud's {store} gate (harness target {store}).\n"
        f"# Run: harness conform --target FILE\n" + text,
        nl=False,
    )
