"""A store by any of its names: every ``harness`` command and option that takes a store
takes its name or its alias (the emulator's ``cli_alias``, the one source of aliases), in any
case, through ``registry.resolve_store``; an unknown name lists every store with its alias.

No emulator runs here: each command runs in a fresh harness home, so a resolved store shows
as "the s3 emulator is not running" (or "nothing to stop") and an unresolved one as an
unknown store. ``harness -h`` and ``--version`` are here too, and ``harness status`` of a
harness home where nothing runs."""

from __future__ import annotations

import argparse
import configparser
import importlib.metadata
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from harness import emulator_registry as registry
from harness.cli import _selected, cli
from harness.emulators.records import EmulatorRecord, save_record
from harness.processes import process_start_time
from harness.testing import store_selection
from harness.testing.options import _store_option
from tests.unit.harness_in_one_process import run_harness

REPO = Path(__file__).resolve().parents[3]
ALIASES = {"aws": "s3", "gcp": "gcs", "cloudflare": "r2", "azure": "azure"}
LISTED = "azure, gcs (gcp), r2 (cloudflare), s3 (aws)"


@pytest.fixture
def empty_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """A harness home and a skycore home where nothing was ever started; the environment
    that points at them (for a ``harness`` process of its own)."""
    env = {"HARNESS_HOME": str(tmp_path / "harness"), "SKYCORE_HOME": str(tmp_path / "sky")}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("COLUMNS", "1000")
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    yield {**os.environ, **env}


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


@pytest.mark.parametrize(("name", "store"), [*ALIASES.items(), ("AWS", "s3"), ("S3", "s3")])
def test_resolve_store_takes_a_name_or_an_alias_in_any_case(name: str, store: str) -> None:
    assert registry.resolve_store(name) == store
    assert registry.resolve_store(store) == store


def test_aliases_come_from_the_emulators_alone() -> None:
    declared = {c.cli_alias: s for s, c in registry.emulator_classes().items() if c.cli_alias}
    assert registry.aliases() == declared == ALIASES
    assert store_selection.aliases() == declared  # the pytest options' --aws, --gcp, ...


def test_each_alias_is_its_stores_cloud() -> None:
    from skycore.stores import get_store_class

    for alias, store in registry.aliases().items():
        assert get_store_class(store).cloud == alias, store


def test_an_unknown_store_lists_every_store_with_its_alias() -> None:
    assert registry.described_stores() == LISTED
    with pytest.raises(registry.UnknownEmulatorError) as caught:
        registry.resolve_store("amazon")
    assert "Unknown store 'amazon'" in str(caught.value)
    assert f"Registered stores: {LISTED};" in str(caught.value)


def test_up_and_down_select_stores_by_name_or_alias() -> None:
    assert _selected(("aws", "s3", "cloudflare", "GCP")) == ("s3", "r2", "gcs")
    assert _selected(()) is None


def test_up_refuses_an_unknown_store_listing_the_aliases(empty_home: dict[str, str]) -> None:
    result = invoke("up", "--store", "aws", "--store", "amazon")
    assert result.exit_code == 2, result.output
    assert "no store named 'amazon' is registered" in result.output
    assert LISTED in result.output


def test_down_of_an_alias_stops_its_store(empty_home: dict[str, str]) -> None:
    result = invoke("down", "--store", "aws", "--store", "gcp")
    assert result.exit_code == 0, result.output
    assert "s3: emulator and gate not running (nothing to stop)." in result.output
    assert "gcs: emulator and gate not running (nothing to stop)." in result.output


@pytest.mark.parametrize("argv", [("target", "{}"), ("fault", "{}", "list")])
def test_target_and_fault_resolve_an_alias(
    empty_home: dict[str, str], argv: tuple[str, ...]
) -> None:
    """The alias reaches the emulator of its store (not running in this home); an unknown
    name is an unknown store, listing the aliases."""
    known = invoke(*(a.format("cloudflare") for a in argv))
    assert known.exit_code != 0
    assert "The r2 emulator is not running" in known.output + str(known.exception)
    unknown = invoke(*(a.format("amazon") for a in argv))
    assert isinstance(unknown.exception, registry.UnknownEmulatorError), unknown.output
    assert LISTED in str(unknown.exception)


def test_conform_runs_the_suite_on_the_aliased_store(empty_home: dict[str, str]) -> None:
    """``harness conform --store aws --store s3`` runs the suite once, on s3 (collected
    only here: the suite's pytest gets ``--store s3``)."""
    argv = ["conform", "-y", "--store", "aws", "--store", "s3", "--collect-only", "-q"]
    result = subprocess.run(
        [sys.executable, "-m", "harness.cli", *argv],
        capture_output=True,
        text=True,
        env=empty_home,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "The conformance suite will run on s3 (the local cloud)" in result.stderr
    tests = [line for line in result.stdout.splitlines() if "::" in line]
    assert tests and all(re.search(r"\[aws[-\]]", line) for line in tests), tests


def test_conform_compares_the_resolved_store_with_the_targets(tmp_path: Path) -> None:
    target = tmp_path / "t.yaml"
    target.write_text("store: s3\nuser: {access_key_id: AKIAUSER, secret_access_key: sssssss}\n")
    target.chmod(0o600)
    result = invoke("conform", "-y", "--store", "gcp", "--target", str(target))
    assert result.exit_code == 2, result.output
    assert f"--store gcs conflicts with {target}, a target of store 's3'" in result.output


@pytest.mark.parametrize("value", ["aws", "smoke-aws", "s3", "smoke-s3"])
def test_the_pytest_store_option_takes_an_alias_or_a_tox_env_name(value: str) -> None:
    assert _store_option(value) == "s3"


def test_the_pytest_store_option_lists_the_aliases_of_an_unknown_store() -> None:
    with pytest.raises(argparse.ArgumentTypeError, match=re.escape(LISTED)):
        _store_option("smoke-amazon")


def test_every_smoke_env_of_tox_names_a_store() -> None:
    parser = configparser.ConfigParser()
    parser.read(REPO / "tox.ini")
    match = re.search(r"smoke-\{([^}]*)\}", parser["tox"]["envlist"])
    assert match, parser["tox"]["envlist"]
    envs = [f"smoke-{name.strip()}" for name in match.group(1).split(",")]
    assert {_store_option(env) for env in envs} == set(registry.store_names())
    # `tox -e smoke-NAME` runs for every name of every store: its name and its alias.
    (section,) = (s for s in parser.sections() if s.startswith("testenv:smoke-{"))
    factors = {f.strip() for f in section[len("testenv:smoke-{") : -1].split(",")}
    assert factors == {*registry.store_names(), *registry.aliases()}, section


def test_help_and_version_work_as_skycores() -> None:
    version = importlib.metadata.version("skycore")
    results = run_harness([([], ["-h"]), ([], ["--version"]), ([], ["status", "-h"])])
    (short, long, status) = results
    assert short["code"] == 0 and short["stdout"].startswith("Usage: harness [OPTIONS]")
    assert "-h, --help" in short["stdout"]
    assert long == {"code": 0, "stdout": f"harness, version {version}\n", "stderr": ""}
    assert status["code"] == 0 and "--json" in status["stdout"], status


def test_status_where_nothing_runs(empty_home: dict[str, str]) -> None:
    """Every store listed as stopped, no gate asked for faults, nodes unknown without an
    engine; the plain output fits 100 columns when piped."""
    shown = invoke("status", "--json")
    assert shown.exit_code == 0, shown.output
    status = json.loads(shown.output)
    assert set(status) >= {"dockerd", "image", "emulators", "nodes", "faults"}
    assert status["dockerd"]["running"] is False and status["nodes"] is None
    assert [e["store"] for e in status["emulators"]] == list(registry.store_names())
    assert {e["state"] for e in status["emulators"]} == {"stopped"}
    assert status["faults"] == []
    env = {k: v for k, v in empty_home.items() if k != "COLUMNS"}
    (plain,) = run_harness([([], ["status"])], env=env)
    lines = plain["stdout"].splitlines()
    assert plain["code"] == 0 and "s3 (aws)" in plain["stdout"], plain
    assert max(map(len, lines)) <= 100, lines


SILENT = """
import socket, sys, time
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(16)
print(s.getsockname()[1], flush=True)
time.sleep(120)
"""
"""A process that takes connections and never answers: a gate that does not answer."""


@pytest.fixture
def silent_gate(empty_home: dict[str, str]) -> Iterator[int]:
    """s3's record in the fresh harness home names a live process that listens and never
    answers, as its emulator and as its gate; its port."""
    proc = subprocess.Popen([sys.executable, "-c", SILENT], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline())
        started = process_start_time(proc.pid)
        assert started is not None
        home = Path(empty_home["HARNESS_HOME"])
        logs = home / "logs"
        save_record(
            home,
            EmulatorRecord(
                "s3", port, proc.pid, started, port, proc.pid, started,
                str(logs / "s3.log"), str(logs / "gate-s3.log"), str(home / "state"), 0.0,
            ),
        )  # fmt: skip
        yield port
    finally:
        proc.kill()
        proc.wait()


def test_status_says_unknown_for_a_gate_that_does_not_answer(silent_gate: int) -> None:
    shown = invoke("status", "--json")
    assert shown.exit_code == 0, shown.output
    status = json.loads(shown.output)
    (s3,) = [e for e in status["emulators"] if e["store"] == "s3"]
    assert s3["state"] == "not answering" and s3["endpoint"] == f"http://127.0.0.1:{silent_gate}"
    (faults,) = status["faults"]
    assert faults["store"] == "s3" and faults["known"] is False and faults["active"] == []
    assert "does not answer" in faults["problem"]
    plain = invoke("status")
    (row,) = [line for line in plain.output.splitlines() if line.startswith("s3 (aws)")]
    assert row.split()[-1] == "unknown", row
    assert re.search(r"^s3 +unknown: The s3 access gate", plain.output, re.MULTILINE), plain.output
