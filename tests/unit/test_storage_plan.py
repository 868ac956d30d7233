"""``launch --dryrun`` plan: validates against the emulators and changes nothing."""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from rich.console import Console

from harness.emulators import RunningEmulator
from skycore.config import SkycoreConfig
from skycore.plan import dryrun_plan, stages
from skycore.storage import StorageAccessError, StoreType, make_store
from skycore.task import Task


@pytest.fixture
def config(emulators: dict[str, RunningEmulator]) -> SkycoreConfig:
    sections = {"s3": "aws", "gcs": "gcp", "azure": "azure"}
    return SkycoreConfig(**{sections[s]: em.config_section() for s, em in emulators.items()})


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SKYCORE_HOME", str(tmp_path / "home"))


def render(renderable: object) -> str:
    buf = io.StringIO()
    Console(file=buf, width=250).print(renderable)
    return buf.getvalue()


def test_dryrun_plan_lists_everything_and_changes_nothing(
    store: str,
    emulators: dict[str, RunningEmulator],
    config: SkycoreConfig,
    tmp_path: Path,
    unique_name: Callable[[str], str],
) -> None:
    em = emulators[store]
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.txt").write_text("a")
    pub = unique_name("pub")
    pub_url = em.make_bucket(pub, owner="other", public=True, objects={"x/y.txt": b"y"})
    managed = unique_name("mgd")
    try:
        f = tmp_path / "task.yaml"
        f.write_text(
            yaml.safe_dump(
                {
                    "name": "plan-test",
                    "workdir": str(tmp_path),
                    "num_nodes": 2,
                    "resources": {"cloud": "docker"},
                    "file_mounts": {
                        "/managed": {
                            "name": managed,
                            "source": str(src),
                            "store": store,
                            "mode": "MOUNT_CACHED",
                        },
                        "/public": {"source": pub_url, "mode": "MOUNT"},
                        "/obj": pub_url + "/x/y.txt",
                    },
                    "setup": "echo s",
                    "run": "echo r",
                }
            )
        )
        task = Task.from_yaml(f)
        assert stages(task) == ["PROVISION", "SYNC_WORKDIR", "SYNC_FILE_MOUNTS", "SETUP", "EXEC"]
        out = render(dryrun_plan(task, config))
        assert "PROVISION -> SYNC_WORKDIR -> SYNC_FILE_MOUNTS -> SETUP -> EXEC" in out
        assert "Nodes: 2 on docker" in out
        assert "create bucket, upload 1 files" in out and "MOUNT_CACHED" in out
        assert "external" in out and "read-only" in out and "sky-managed" in out
        assert f"Buckets to create: {StoreType(store).scheme}://" in out and managed in out
        assert not make_store(StoreType(store), managed, config).exists()
        assert em.events(pub) == [e for e in em.events(pub) if e.key == "x/y.txt"]
    finally:
        em.delete_bucket(pub)


def test_dryrun_fails_cleanly_for_private_bucket(
    store: str,
    emulators: dict[str, RunningEmulator],
    config: SkycoreConfig,
    unique_name: Callable[[str], str],
) -> None:
    em = emulators[store]
    name = unique_name("prv")
    url = em.make_bucket(name, owner="other", public=False)
    try:
        task = Task.from_dict({"file_mounts": {"/p": {"source": url}, "/c": url + "/k"}})
        with pytest.raises(StorageAccessError) as info:
            dryrun_plan(task, config)
        assert info.value.exit_code == 2 and "\n" not in str(info.value)
    finally:
        em.delete_bucket(name)
