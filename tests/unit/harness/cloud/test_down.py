"""``harness down``: the line on what stays in the skycore config, ``--forget`` (also for a
store no package here registers) and ``--wipe`` (a persistent emulator's data in the harness
home, never the harness's own folders). No emulator runs: the stores are down already."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner, Result

from harness import emulator_registry as registry
from harness.cli import cli
from harness.cloud import leftovers
from harness.emulators.s3 import S3Emulator
from skycore.config import SkycoreConfig, merge_config, read_origins
from skycore.storage.s3 import AwsConfig

DATA = "fakedisk-data"


class FakeDiskEmulator(S3Emulator):
    """A persistent emulator whose command serves a folder of the harness home."""

    store = "fakedisk"
    persistent = True

    @classmethod
    def command(cls, home: Path, port: int, gate_port: int) -> tuple[list[str], dict[str, str]]:
        server = home / "bin" / "server"
        return [str(server), "serve", str(home / DATA), f"--log-dir={home / 'logs'}"], {}


@pytest.fixture
def homes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, Path]]:
    """(harness home, skycore config path), both fresh; the fake emulator registered."""
    harness_home, config = tmp_path / "harness", tmp_path / "skycore" / "config.yaml"
    harness_home.mkdir()
    monkeypatch.setenv("HARNESS_HOME", str(harness_home))
    monkeypatch.setenv("SKYCORE_HOME", str(config.parent))
    monkeypatch.setenv("COLUMNS", "1000")
    registry.add_emulator(FakeDiskEmulator)
    merge_config(SkycoreConfig(aws=AwsConfig(endpoint_url="http://127.0.0.1:1")), config)
    with config.open("a") as f:
        f.write("backblaze:\n  key: x\n")  # a section of a store not installed here
    try:
        yield harness_home, config
    finally:
        registry.reset()


def down(*args: str) -> Result:
    return CliRunner().invoke(cli, ["down", *args])


def test_down_says_what_it_left_in_the_config_and_keeps_it(homes: tuple[Path, Path]) -> None:
    _, config = homes
    before = config.read_text()
    result = down("--store", "s3")
    assert result.exit_code == 0, result.output
    (line,) = [x for x in result.output.splitlines() if x.startswith("skycore config")]
    assert f"{config}: kept the section(s) aws" in line
    assert "'harness down --store s3 --forget' removes them" in line
    assert config.read_text() == before


def test_forget_removes_the_stores_section_only(homes: tuple[Path, Path]) -> None:
    _, config = homes
    result = down("--store", "s3", "--forget")
    assert result.exit_code == 0, result.output
    assert f"skycore config {config}: removed the section(s) aws." in result.output
    assert set(yaml.safe_load(config.read_text())) == {"backblaze"}
    assert "aws" not in read_origins(config)


def test_forget_works_for_a_store_no_package_here_registers(homes: tuple[Path, Path]) -> None:
    _, config = homes
    refused = down("--store", "backblaze")  # nothing to stop: still a usage error
    assert refused.exit_code == 2 and "no store named 'backblaze'" in refused.output
    result = down("--store", "backblaze", "--forget")
    assert result.exit_code == 0, result.output
    assert "backblaze: no emulator of it recorded as running here" in result.output
    assert "removed the section(s) backblaze." in result.output
    assert set(yaml.safe_load(config.read_text())) == {"aws"}


def test_wipe_removes_the_served_folder_and_the_gate_state_only(
    homes: tuple[Path, Path],
) -> None:
    home, _ = homes
    for folder in (DATA, "bin", "logs", "emulators"):
        (home / folder).mkdir()
    (home / DATA / "bucket").mkdir()
    gate_state = home / "emulators" / "fakedisk-gate-state.json"
    gate_state.write_text("{}")
    (home / "bin" / "server").write_text("")
    result = down("--store", "fakedisk", "--wipe")
    assert result.exit_code == 0, result.output
    assert f"fakedisk: wiped {gate_state}, {home / DATA}." in result.output
    assert not (home / DATA).exists() and not gate_state.exists()
    assert (home / "bin" / "server").exists() and (home / "logs").is_dir()
    again = down("--store", "fakedisk", "--wipe")
    assert "fakedisk: nothing to wipe" in again.output


def test_wipe_leaves_a_running_emulators_data(homes: tuple[Path, Path]) -> None:
    home, _ = homes
    (home / DATA).mkdir()
    (home / "emulators").mkdir()
    (home / "emulators" / "fakedisk.json").write_text("{}")  # recorded, so not stopped
    assert "still recorded as running" in leftovers.wipe("fakedisk", home)
    assert (home / DATA).is_dir()
