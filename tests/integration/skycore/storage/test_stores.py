"""Stores against the real emulators behind their access gates (no mocks).

``store`` is parametrized by the harness plugin over the selected stores (s3, gcs, azure).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from harness.emulators.fleet import RunningEmulator
from skycore import state
from skycore.config import SkycoreConfig
from skycore.storage import (
    Storage,
    StorageAccessError,
    StorageError,
    StorageSpecError,
    get_store_class,
    make_store,
    parse_url,
    store_names,
)
from skycore.storage.catalog import delete_storage, list_storage_rows
from skycore.storage.upload import list_upload_files
from tests.integration.helpers import REPO, emulator_bucket


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    h = tmp_path / "home"
    monkeypatch.setenv("SKYCORE_HOME", str(h))
    return h


def spec(store: str, **kw: object) -> Storage:
    args: dict[str, object] = {"name": None, "source": None, "store": store, "mode": "MOUNT"}
    args.update(kw)
    return Storage.from_spec(field="file_mounts./data", **args)  # type: ignore[arg-type]


def test_create_upload_list_delete(
    store: str, store_config: SkycoreConfig, tmp_path: Path, unique_name: Callable[[str], str]
) -> None:
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / "a.txt").write_text("a")
    (src / "sub" / "b.bin").write_bytes(b"b" * 5000)
    name = unique_name("scm")
    st = make_store(store, name, store_config)
    assert not st.exists()
    st.create()
    try:
        assert st.exists()
        info = st.access()
        assert info.exists and info.can_read and info.can_write and not info.anonymous
        res = st.upload(src, list_upload_files(src))
        assert (res.files, res.bytes) == (2, 5001)
        assert sorted(st.list_keys()) == ["a.txt", "sub/b.bin"]
        assert st.is_object("sub/b.bin") and not st.is_object("sub")
    finally:
        assert st.delete() == 2
    assert not st.exists()


@pytest.mark.parametrize("owner_public", [("user", False), ("user", True), ("other", True)])
def test_access_of_readable_buckets(
    store_emulator: RunningEmulator, store_config: SkycoreConfig, owner_public: tuple[str, bool]
) -> None:
    owner, public = owner_public
    objects = {"d/x.txt": b"x"}
    with emulator_bucket(store_emulator, "acc", owner=owner, public=public, objects=objects) as (
        _name,
        url,
    ):
        st = Storage.from_spec(name=None, source=url, store=None, mode="MOUNT_CACHED")
        plan = st.check(store_config)
        info = plan.access
        assert info.exists and info.can_read
        assert info.can_write is (owner == "user")
        assert plan.read_only is (owner != "user") and not plan.create
        step = st.mount_step("/data", store_config)
        assert step.mounts[0].options.read_only is (owner != "user")
        assert ('"ReadOnly": true' in step.script()) is (owner != "user")
        assert st.kind == "external"


def test_private_other_and_missing(
    store: str,
    store_emulator: RunningEmulator,
    store_config: SkycoreConfig,
    unique_name: Callable[[str], str],
) -> None:
    with emulator_bucket(
        store_emulator, "prv", owner="other", public=False, objects={"x": b"x"}
    ) as (name, url):
        st = Storage.from_spec(name=None, source=url, store=None, field="file_mounts./p")
        info = st.access(store_config)
        assert info.exists and not info.can_read
        with pytest.raises(StorageAccessError, match="private"):
            st.check(store_config)
    missing = url.replace(name, unique_name("nope"))
    st = Storage.from_spec(name=None, source=missing, store=None, field="file_mounts./m")
    with pytest.raises(StorageAccessError, match="does not exist"):
        st.check(store_config)
    if store == "azure":
        # anonymous callers cannot tell missing from private; with the key we can
        assert "private to account 'skyother' or does not exist" in st.access(store_config).detail
        missing = f"azure://skyuser/{unique_name('nope')}"
        st = Storage.from_spec(name=None, source=missing, store=None)
    assert not st.access(store_config).exists


def test_name_taken_by_other_account(
    store: str, store_emulator: RunningEmulator, store_config: SkycoreConfig
) -> None:
    em = store_emulator
    with emulator_bucket(em, "tkn", owner="other", public=True) as (name, _):
        st = spec(store, name=name)
        if store == "azure":
            # Container names are per storage account: the other account's container does
            # not block ours; skycore creates its own in the user's account.
            st.check(store_config)
            st.prepare(store_config, progress=False)
            assert state.get_storage(name) is not None
            assert em.client("user").get_container_client(name).exists()
            em.client("user").delete_container(name)
            return
        with pytest.raises(StorageAccessError, match="already taken by another account"):
            st.check(store_config)
        with pytest.raises(StorageAccessError):
            st.prepare(store_config)
        assert state.get_storage(name) is None


def test_mount_of_single_object_refused(
    store_emulator: RunningEmulator, store_config: SkycoreConfig
) -> None:
    objects = {"dir/file.txt": b"x"}
    with emulator_bucket(store_emulator, "obj", owner="user", objects=objects) as (_name, url):
        st = Storage.from_spec(name=None, source=url + "/dir/file.txt", store=None, mode="MOUNT")
        with pytest.raises(StorageSpecError, match="single object"):
            st.check(store_config)
        copy = Storage.from_spec(name=None, source=url + "/dir/file.txt", store=None, mode="COPY")
        copy.check(store_config)
        folder = Storage.from_spec(name=None, source=url + "/dir", store=None, mode="MOUNT")
        folder.check(store_config)


def test_prepare_sky_managed_honours_gitignore_and_catalog(
    store: str, store_config: SkycoreConfig, tmp_path: Path, unique_name: Callable[[str], str]
) -> None:
    src = tmp_path / "proj"
    (src / "logs").mkdir(parents=True)
    (src / "pkg" / "build").mkdir(parents=True)
    (src / ".git").mkdir()
    (src / ".git" / "HEAD").write_text("ref")
    (src / ".gitignore").write_text("*.log\nlogs/\n!keep.log\n")
    (src / "pkg" / ".gitignore").write_text("build/\n")
    for rel in ["main.py", "debug.log", "keep.log", "logs/a.txt", "pkg/m.py", "pkg/build/o.bin"]:
        (src / rel).write_text(rel)
    name = unique_name("mgd")
    st = spec(store, name=name, source=str(src), mode="COPY")
    plan = st.check(store_config)
    assert plan.create and plan.upload_files == 5  # incl. both .gitignore files
    assert not make_store(store, name, store_config).exists()  # check changed nothing
    st.prepare(store_config, progress=False)
    keys = sorted(make_store(store, name, store_config).list_keys())
    assert keys == [".gitignore", "keep.log", "main.py", "pkg/.gitignore", "pkg/m.py"]
    rows = {r.name: r for r in list_storage_rows()}
    assert rows[name].kind == "sky-managed" and rows[name].status == "READY"
    assert rows[name].store == store
    # prepared again: reuses the bucket
    spec(store, name=name, source=str(src), mode="COPY").prepare(store_config, progress=False)
    # the same name for another store is refused
    other = next(s for s in store_names() if s != store)
    if store_config.section(get_store_class(other).config_section) is not None:
        with pytest.raises(StorageAccessError, match=f"created earlier for the {store} store"):
            spec(other, name=name).check(store_config)
    assert "Deleted" in delete_storage(name, store_config)
    assert state.get_storage(name) is None
    assert not make_store(store, name, store_config).exists()
    with pytest.raises(StorageError, match="No storage named"):
        delete_storage(name, store_config)


def test_skyignore_wins(tmp_path: Path) -> None:
    src = tmp_path / "p"
    src.mkdir()
    (src / ".gitignore").write_text("a.txt\n")
    (src / ".skyignore").write_text("b.txt\n")
    for f in ("a.txt", "b.txt", "c.txt"):
        (src / f).write_text(f)
    assert list_upload_files(src) == [".gitignore", ".skyignore", "a.txt", "c.txt"]


def test_external_bucket_never_deleted(
    store_emulator: RunningEmulator, store_config: SkycoreConfig
) -> None:
    with emulator_bucket(store_emulator, "ext", owner="user", objects={"k": b"v"}) as (name, url):
        st = Storage.from_spec(name=None, source=url, store=None, mode="MOUNT")
        st.prepare(store_config)
        row = next(r for r in list_storage_rows() if r.name == name)
        assert row.kind == "external"
        with pytest.raises(StorageError, match="never deletes buckets it did not create"):
            delete_storage(name, store_config)
        with pytest.raises(StorageError, match="not created by skycore"):
            st.delete(store_config)
        p = parse_url(url)
        assert make_store(p.store, p.bucket, store_config, p.account).exists()


def test_scratch_bucket_and_nonpersistent_delete(
    store: str, store_config: SkycoreConfig, unique_name: Callable[[str], str]
) -> None:
    name = unique_name("scr")
    st = spec(store, name=name, mode="MOUNT_CACHED", persistent=False)
    assert st.check(store_config).create
    st.prepare(store_config)
    store_obj = make_store(store, name, store_config)
    assert store_obj.exists() and store_obj.list_keys() == []
    assert st.delete(store_config) == 0
    assert not store_obj.exists()


def test_delete_bucket_with_1000_objects(
    store: str, store_config: SkycoreConfig, tmp_path: Path, unique_name: Callable[[str], str]
) -> None:
    src = tmp_path / "many"
    src.mkdir()
    for i in range(1000):
        (src / f"o{i:04d}").write_text(str(i))
    name = unique_name("big")
    st = spec(store, name=name, source=str(src), mode="COPY")
    st.prepare(store_config, progress=True)
    assert len(make_store(store, name, store_config).list_keys()) == 1000
    assert "(1000 objects)" in delete_storage(name, store_config)
    assert not make_store(store, name, store_config).exists()


def test_anonymous_read_of_public_bucket(
    store: str, store_emulator: RunningEmulator, store_config: SkycoreConfig, tmp_path: Path
) -> None:
    """Credentials that grant nothing on a bucket: public ones are still read anonymously,
    through the SDK and through rclone's anonymous remote; private ones are refused."""
    import subprocess

    from skycore.storage import mounting

    section_name = get_store_class(store).config_section
    section = store_config.section(section_name)
    assert section is not None
    if hasattr(section, "access_key_id"):  # key-signed stores
        unknown = {"access_key_id": "AKIAUNKNOWN000000000"}
    elif hasattr(section, "access_token"):  # bearer-token stores
        unknown = {"access_token": "ya29.unknown"}
    else:
        unknown = {}  # another account's containers are always read anonymously
    bad = SkycoreConfig.model_validate(
        {
            **store_config.model_dump(exclude_none=True),
            section_name: section.model_copy(update=unknown).model_dump(exclude_none=True),
        }
    )
    pub_spec = {"owner": "other", "public": True, "objects": {"d/f.txt": b"hello"}}
    prv_spec = {"owner": "other", "public": False, "objects": {"d/f.txt": b"no"}}
    with (
        emulator_bucket(store_emulator, "anp", **pub_spec) as (_pub, pub_url),
        emulator_bucket(store_emulator, "anq", **prv_spec) as (_prv, prv_url),
    ):
        st = Storage.from_spec(name=None, source=pub_url + "/d", store=None, mode="COPY")
        plan = st.check(bad)
        assert plan.access.anonymous and plan.access.can_read and not plan.access.can_write
        p = parse_url(pub_url)
        assert make_store(p.store, p.bucket, bad, p.account).list_keys() == ["d/f.txt"]
        conf = tmp_path / "rclone.conf"
        conf.write_text(mounting.rclone_config_text(bad))
        rclone = REPO / ".venv" / "bin" / "rclone"
        env = mounting.RcloneEnv(str(rclone), str(conf), str(tmp_path / "m"))
        cmd = st.copy_command(str(tmp_path / "out"), bad, env=env)
        assert "-anon:" in cmd or ":azureblob," in cmd
        r = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        assert (tmp_path / "out" / "f.txt").read_text() == "hello"
        private = Storage.from_spec(name=None, source=prv_url, store=None, mode="MOUNT")
        with pytest.raises(StorageAccessError, match="private"):
            private.check(bad)


@pytest.mark.parametrize("status", [405, 501])
def test_a_request_the_server_does_not_implement_is_named_as_such(
    store_emulator: RunningEmulator, store_config: SkycoreConfig, status: int
) -> None:
    """A 405 or 501 answer says the server does not implement the request, not that the
    config is wrong (and the sentence has one period)."""
    with emulator_bucket(store_emulator, "nimp") as (name, url):
        st = Storage.from_spec(name=None, source=url, store=None, mode="MOUNT")
        fault = store_emulator.add_fault("errors", bucket=name, status=status)
        try:
            with pytest.raises(StorageError) as caught:
                st.check(store_config)
        finally:
            store_emulator.clear_faults(fault_id=fault["id"])
    message = str(caught.value)
    assert f"HTTP {status} means the server at the" in message, message
    assert "does not implement this request" in message, message
    assert "section of the skycore config" not in message, message
    assert ".." not in message, message
