"""``launch --dryrun`` plan: validates against the emulators and changes nothing."""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from rich.console import Console

from harness.emulators.fleet import RunningEmulator
from harness.testing.buckets import list_keys
from skycore import state as core_state
from skycore.config import SkycoreConfig
from skycore.plan import dryrun_plan, stages
from skycore.storage import StorageAccessError, make_store, parse_url
from skycore.task import Task
from tests.integration.helpers import emulator_bucket


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SKYCORE_HOME", str(tmp_path / "home"))


COLUMNS = ("Destination", "Store", "Mode", "Kind", "Bucket / URL", "Action")


def render(renderable: object) -> str:
    buf = io.StringIO()
    Console(file=buf, width=400).print(renderable)
    return buf.getvalue()


def table_rows(out: str) -> dict[str, dict[str, str]]:
    """The File mounts table of a rendered plan: {destination: {column: cell}}, a cell folded
    over several lines joined with spaces."""
    rows: dict[str, dict[str, str]] = {}
    last: dict[str, str] | None = None
    for line in out.splitlines():
        if line.count("│") != len(COLUMNS) + 1:
            continue
        cells = [c.strip() for c in line.split("│")[1:-1]]
        if cells[0] == "Destination":
            continue
        if cells[0] and cells[0] not in rows:
            last = rows[cells[0]] = dict(zip(COLUMNS, cells, strict=True))
        elif last is not None:
            for col, cell in zip(COLUMNS, cells, strict=True):
                last[col] = f"{last[col]} {cell}".strip()
    return rows


def test_dryrun_plan_lists_everything_and_changes_nothing(
    store: str,
    store_emulator: RunningEmulator,
    store_config: SkycoreConfig,
    tmp_path: Path,
    src: Path,
    unique_name: Callable[[str], str],
) -> None:
    em = store_emulator
    pub = unique_name("pub")
    pub_url = em.make_bucket(pub, owner="other", public=True, objects={"x/y.txt": b"y"})
    # A bucket of the user's: the gate lets the user write there, so any write the dry run
    # made would be recorded (the public one above refuses writes whatever skycore does).
    mine = unique_name("mine")
    mine_url = em.make_bucket(mine, owner="user", public=False, objects={"k.txt": b"k"})
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
                        "/mine": {"source": mine_url, "mode": "MOUNT_CACHED"},
                    },
                    "setup": "echo s",
                    "run": "echo r",
                }
            )
        )
        task = Task.from_yaml(f)
        mine_before = (em.events(mine), list_keys(store, mine))
        assert stages(task) == ["PROVISION", "SYNC_WORKDIR", "SYNC_FILE_MOUNTS", "SETUP", "EXEC"]
        out = render(dryrun_plan(task, store_config))
        assert "PROVISION -> SYNC_WORKDIR -> SYNC_FILE_MOUNTS -> SETUP -> EXEC" in out
        assert "Nodes: 2 on docker" in out
        assert "create bucket, upload 1 files" in out and "MOUNT_CACHED" in out
        assert "external" in out and "read-only" in out and "sky-managed" in out
        scheme = pub_url.split("://", 1)[0]
        assert f"Buckets to create: {scheme}://" in out and managed in out
        assert mine in out
        # Nothing changed: no bucket created, no write to a bucket the user may write to,
        # nothing recorded in skycore's state.
        assert not make_store(parse_url(pub_url).store, managed, store_config).exists()
        assert (em.events(mine), list_keys(store, mine)) == mine_before
        assert core_state.list_storage() == [] and core_state.list_clusters() == []
    finally:
        em.delete_bucket(pub)
        em.delete_bucket(mine)


def test_dryrun_fails_cleanly_for_private_bucket(
    store_emulator: RunningEmulator, store_config: SkycoreConfig
) -> None:
    with emulator_bucket(store_emulator, "prv", owner="other", public=False) as (_name, url):
        task = Task.from_dict({"file_mounts": {"/p": {"source": url}, "/c": url + "/k"}})
        with pytest.raises(StorageAccessError) as info:
            dryrun_plan(task, store_config)
        assert info.value.exit_code == 2 and "\n" not in str(info.value)


def test_dryrun_shows_presets_node_shape_and_order_given_up(
    store: str, store_config: SkycoreConfig, src: Path, unique_name: Callable[[str], str]
) -> None:
    """A SkyPilot YAML with type presets, config.mount_cached and resources runs unchanged:
    the plan shows each node's shape, a read-only preset as read-only (a bucket to create is
    not), and once per mount that uploading several files at once gives up creation order."""
    ckpt, data = unique_name("ckpt"), unique_name("data")
    task = Task.from_dict(
        {
            "resources": {"cloud": "docker", "cpus": "2+", "memory": "4GB", "disk_size": 20},
            "file_mounts": {
                "/ckpt": {
                    "name": ckpt,
                    "source": str(src),
                    "store": store,
                    "mode": "MOUNT_CACHED",
                    "type": "MODEL_CHECKPOINT_RW",
                    "config": {"mount_cached": {"vfs_cache_max_size": "5G"}},
                },
                "/data": {
                    "name": data,
                    "store": store,
                    "mode": "MOUNT_CACHED",
                    "type": "DATASET_RO",
                },
            },
            "run": "echo r",
        }
    )
    out = render(dryrun_plan(task, store_config))
    assert "Nodes: 1 on docker, 2 CPUs, 4 GiB memory, 20 GiB disk" in out
    rows = {line.split("│")[1].strip(): line for line in out.splitlines() if line.count("│") > 2}
    assert "create bucket" in rows["/ckpt"] and "read-only" not in rows["/ckpt"]
    assert "create bucket" in rows["/data"] and "read-only" in rows["/data"]
    order = [line for line in out.splitlines() if "creation order" in line]
    assert order == [
        "/ckpt: type MODEL_CHECKPOINT_RW uploads 8 files at once: files may reach the bucket in "
        "another order than they were written (set config.mount_cached.transfers: 1 to keep "
        "creation order)"
    ]
    assert core_state.list_storage() == [] and core_state.list_clusters() == []


def test_dryrun_action_states_each_mounts_access(
    store: str,
    store_emulator: RunningEmulator,
    store_config: SkycoreConfig,
    src: Path,
    unique_name: Callable[[str], str],
) -> None:
    """The Action cell says how every node gets each entry: a new sky-managed bucket (with
    or without a source, MOUNT or MOUNT_CACHED) is read-write, an external bucket is what
    the user's credentials allow (theirs, private or public: read-write; another account's
    public one: read-only), and a copy says what it copies."""
    em = store_emulator
    new = {m: unique_name(f"new-{m}") for m in ("mount", "cached", "scratch", "copy")}
    with (
        emulator_bucket(em, "prv", owner="user", public=False) as (_p, private_url),
        emulator_bucket(em, "pub", owner="user", public=True) as (_q, public_url),
        emulator_bucket(em, "oth", owner="other", public=True, objects={"x/y": b"y"}) as (
            _o,
            other_url,
        ),
    ):
        task = Task.from_dict(
            {
                "file_mounts": {
                    "/new-mount": {"name": new["mount"], "source": str(src), "store": store},
                    "/new-cached": {
                        "name": new["cached"],
                        "source": str(src),
                        "store": store,
                        "mode": "MOUNT_CACHED",
                    },
                    "/new-scratch": {"name": new["scratch"], "store": store, "mode": "MOUNT"},
                    "/new-copy": {
                        "name": new["copy"],
                        "source": str(src),
                        "store": store,
                        "mode": "COPY",
                    },
                    "/private": {"source": private_url, "mode": "MOUNT_CACHED"},
                    "/public": {"source": public_url, "mode": "MOUNT"},
                    "/other": {"source": other_url, "mode": "MOUNT"},
                    "/other-cached": {"source": other_url, "mode": "MOUNT_CACHED"},
                    "/other-copy": {"source": other_url, "mode": "COPY"},
                    "/plain-url": other_url + "/x/y",
                    "/plain-local": str(src),
                },
                "run": "true",
            }
        )
        rows = table_rows(render(dryrun_plan(task, store_config)))
        assert core_state.list_storage() == []
    upload = f"upload 1 files (1 B) from {src}"
    read_write = "mount read-write on every node"
    read_only = "mount read-only on every node (your credentials cannot write to it)"
    snapshot = "copy the bucket's objects to every node (a snapshot: writes stay on the node)"
    assert {dst: row["Action"] for dst, row in rows.items()} == {
        "/new-mount": f"create bucket, {upload}, {read_write}",
        "/new-cached": f"create bucket, {upload}, {read_write}",
        "/new-scratch": f"create bucket, {read_write}",
        "/new-copy": f"create bucket, {upload}, {snapshot}",
        "/private": read_write,
        "/public": read_write,
        "/other": read_only,
        "/other-cached": read_only,
        "/other-copy": snapshot,
        "/plain-url": f"copy bucket path {other_url}/x/y to every node",
        "/plain-local": f"copy local folder {src} to every node",
    }
    assert {dst: row["Mode"] for dst, row in rows.items() if dst.startswith("/new")} == {
        "/new-mount": "MOUNT",
        "/new-cached": "MOUNT_CACHED",
        "/new-scratch": "MOUNT",
        "/new-copy": "COPY",
    }
    assert rows["/private"]["Kind"] == "external" and rows["/new-mount"]["Kind"] == "sky-managed"
