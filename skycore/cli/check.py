"""``skycore check``: can skycore reach each configured store and the docker engine?

Every check only reads: a store is asked about a bucket no one created, the engine is
pinged and asked for the node image. One line each; exit 1 if any failed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

from rich.markup import escape

from skycore import stores
from skycore.cli.app import cli, console
from skycore.cli.common import handle_errors
from skycore.config import SkycoreConfig, load_config
from skycore.errors import ConfigError, ProvisionError, UserError

Check = tuple[str, Callable[[], str]]
"""A line's label and what it runs: the ok detail, or an exception whose text is the reason."""


def _store_checks(config: SkycoreConfig) -> list[Check]:
    """One check per configured store section (a store that failed to load fails its own)."""
    checks: list[Check] = []
    present = config.sections()
    for cls in stores.store_classes().values():
        if cls.config_section not in present:
            continue
        label = cls.store_name  # and its cloud, as 'harness status' and resources.cloud say
        cloud = getattr(cls, "cloud", None)
        if cloud and cloud != cls.store_name:
            label += f" ({cloud})"
        checks.append((label, lambda cls=cls: cls.check_account(config)))  # type: ignore[misc]
    for name in stores.broken_store_names():
        problem = stores.load_problem(name) or "it failed to load"
        checks.append((name, lambda problem=problem: _raise(problem)))  # type: ignore[misc]
    return checks


def _raise(message: str) -> str:
    raise UserError(message)


def _docker_checks(config: SkycoreConfig) -> list[Check]:
    """The engine (a ping) and the node image (present on the engine; never pulled), through
    the engine client and image check that PROVISION uses (``skycore.node_images``)."""
    from skycore import node_images

    host = config.docker.host

    def engine() -> str:
        with _engine_errors(f"cannot reach the docker engine at {host}"):
            version = node_images.client(config).version().get("Version", "?")
        return f"engine at {host}, Docker {version}"

    def node_image() -> str:
        with _engine_errors(f"cannot ask the engine at {host} for {config.docker.image}"):
            image = node_images.usable_image(None, config)
            found = node_images.client(config).images.get(image)
        return f"{image} ({found.short_id})"

    return [("docker", engine), ("node image", node_image)]


def _recipe_check(config: SkycoreConfig) -> Check:
    """The mount recipe config names: loadable, and which modes it mounts itself."""
    from skycore.storage import recipes

    return ("mount recipe", lambda: recipes.active(config).describe())


@contextmanager
def _engine_errors(what: str) -> Iterator[None]:
    """The engine's failures as one UserError: ProvisionError's own message (it names the
    engine and the fix), else ``what`` with the SDK's reason and the fix."""
    import docker.errors

    try:
        yield
    except ProvisionError as e:
        raise UserError(str(e)) from None
    except docker.errors.DockerException as e:
        raise UserError(
            f"{what} ({_first_line(e)}). Start it with 'harness up', or fix docker.host in the "
            "skycore config."
        ) from None


def _first_line(e: BaseException) -> str:
    text = " ".join(str(e).split())
    return text if len(text) <= 200 else text[:197] + "..."


def _run(check: Callable[[], str]) -> tuple[bool, str]:
    try:
        return True, check()
    except UserError as e:
        return False, e.message
    except ConfigError as e:
        return False, " ".join(str(e).split())
    except Exception as e:  # an SDK's own error: still one line, never a traceback
        return False, (
            f"{type(e).__name__}: {_first_line(e)}. Check the endpoint and the credentials of "
            "this section of the skycore config."
        )


@cli.command()
@handle_errors()
def check() -> None:
    """Check each configured store (its endpoint and credentials), the docker engine, the
    node image and the mount recipe, changing nothing; exit 1 if any check failed."""
    config = load_config()
    checks = _store_checks(config) + _docker_checks(config) + [_recipe_check(config)]
    with ThreadPoolExecutor(max_workers=len(checks), thread_name_prefix="check") as pool:
        results = list(pool.map(lambda c: _run(c[1]), checks))
    for (label, _), (ok, detail) in zip(checks, results, strict=True):
        verdict = "[green]ok[/green]" if ok else "[bold red]FAILED[/bold red]"
        console.print(f"{escape(label)}: {verdict} — {escape(detail)}")
    failed = [label for (label, _), (ok, _) in zip(checks, results, strict=True) if not ok]
    if failed:
        raise UserError(f"{len(failed)} check(s) failed: {', '.join(failed)}.", exit_code=1)
