"""The harness's command-line options (``--store`` and its aliases, ``--target``,
``--run-id``, ``--matrix-report``, ``--keep-on-failure``) and the markers it registers."""

from __future__ import annotations

import argparse

import pytest

from harness import emulator_registry as registry
from harness.emulators.base import CAPABILITIES
from harness.testing.store_selection import CAPABILITY_MARKER, aliases, markers


def _store_option(value: str) -> str:
    """--store's value: a store name or an emulator's alias, optionally as 'smoke-NAME' (the
    per-store tox envs pass their own name); anything else lists the registered stores."""
    try:
        return registry.resolve_store(value.removeprefix("smoke-"))
    except (registry.UnknownEmulatorError, registry.EmulatorLoadError) as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("skycore harness")
    names = registry.store_names()
    group.addoption(
        "--store",
        action="append",
        default=[],
        metavar="NAME",
        type=_store_option,
        help=f"run tests for store NAME or its alias (repeatable; default: all of "
        f"{', '.join(names)}); 'smoke-NAME' (a tox env name) is read as NAME",
    )
    for alias, store in aliases().items():
        group.addoption(
            f"--{alias}", action="store_true", default=False, help=f"the same as --store {store}"
        )
    group.addoption(
        "--matrix-report",
        metavar="PATH",
        default=None,
        help="write the mount matrix and upload-order timeline as HTML (+ .md, .png) to PATH",
    )
    group.addoption(
        "--target",
        metavar="FILE",
        default=None,
        help="run against the endpoint and accounts of a target file instead of the local "
        "cloud ('local', the default); see docs/conformance.md",
    )
    group.addoption(
        "--run-id",
        metavar="ID",
        default=None,
        help="the run id every bucket of a target run carries (default: a new one)",
    )
    group.addoption(
        "--compare-stand-in",
        action="store_true",
        default=False,
        help="in a target run, run the emulator contract's probes on the target and on the "
        "local stand-in, and print where they differ",
    )
    group.addoption(
        "--recipe",
        metavar="NAME",
        default="skycore",
        help="the mount recipe the nodes mount buckets with: skycore (the default) or a "
        "registered one such as skypilot (docs/mount-recipes.md)",
    )
    group.addoption(
        "--keep-on-failure",
        action="store_true",
        default=False,
        help="leave a failed test's cluster up for debugging",
    )


def register_markers(config: pytest.Config) -> None:
    """One marker per store, ``requires_capability``, ``slow``, ``scenario`` and ``cloud``."""
    for store, marker in markers().items():
        config.addinivalue_line("markers", f"{marker}: needs the {store} store")
    config.addinivalue_line(
        "markers",
        f"{CAPABILITY_MARKER}(name): skip for a store whose emulator lacks capability name "
        f"(one of {', '.join(CAPABILITIES)})",
    )
    config.addinivalue_line("markers", "slow: slow end-to-end test")
    config.addinivalue_line(
        "markers",
        "scenario(fn): the test's body fn(store, kit) runs side by side with the module's "
        "other scenarios of its store (harness.testing.side_by_side; the side_by_side fixture)",
    )
    config.addinivalue_line("markers", "cloud: needs dockerd and the node image")
