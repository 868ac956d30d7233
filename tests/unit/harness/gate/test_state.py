"""The gate's state: bucket settings and object metadata persisted, changed atomically, and
reset when a bucket changes hands."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from harness.gate.state import GateState


def test_settings_and_object_metadata_survive_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    state = GateState(path)
    state.set_bucket("b", "user", public=False)
    state.update_settings("b", access={"ownership": "ObjectWriter"}, cors=[{"x": 1}])
    state.update_settings("b", cors=None)
    state.set_object_meta("b", "k", {"owner": "other"})
    state.set_objects_meta("b", {"k2": {"acl": "public-read"}, "gone": None})
    again = GateState(path)
    bucket = again.bucket("b")
    assert bucket is not None and bucket.owner == "user"
    assert dict(bucket.settings) == {"access": {"ownership": "ObjectWriter"}}
    assert again.object_meta("b", "k") == {"owner": "other"}
    assert again.object_meta("b", "k2") == {"acl": "public-read"}
    assert again.object_meta("b", "gone") is None


def test_a_bucket_given_to_another_owner_starts_without_settings(tmp_path: Path) -> None:
    state = GateState(tmp_path / "state.json")
    state.set_bucket("b", "user", public=False, settings={"access": {"acl": "mine"}})
    state.set_object_meta("b", "k", {"owner": "user"})
    state.set_bucket("b", "user", public=True)  # same owner: the settings stay
    assert dict(state.buckets()["b"].settings) == {"access": {"acl": "mine"}}
    state.set_bucket("b", "other", public=False)
    assert dict(state.buckets()["b"].settings) == {}
    assert state.object_meta("b", "k") is None


def test_dropping_a_bucket_drops_its_objects(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    state = GateState(path)
    state.set_bucket("b", "user", public=False)
    state.set_object_meta("b", "k", {"owner": "other"})
    state.drop_bucket("b")
    assert state.bucket("b") is None and state.object_meta("b", "k") is None
    assert GateState(path).object_meta("b", "k") is None


def test_concurrent_setting_changes_are_not_lost(tmp_path: Path) -> None:
    """Each thread adds its own key with a read-modify-write that takes a while: all keys
    are there in the end, in memory and in the file."""
    path = tmp_path / "state.json"
    state = GateState(path)
    state.set_bucket("b", "user", public=False)

    def add(n: int) -> None:
        def change(settings: dict[str, Any]) -> dict[str, Any]:
            seen = dict(settings)
            time.sleep(0.002)  # a slow change widens any window for a lost update
            seen[f"k{n}"] = n
            return seen

        state.modify_settings("b", change)

    threads = [threading.Thread(target=add, args=(n,)) for n in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wanted = {f"k{n}": n for n in range(20)}
    bucket = state.bucket("b")
    assert bucket is not None and dict(bucket.settings) == wanted
    reloaded = GateState(path).bucket("b")
    assert reloaded is not None and dict(reloaded.settings) == wanted


def test_the_file_ends_with_the_newest_state_after_concurrent_saves(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    state = GateState(path)
    state.set_bucket("b", "user", public=False)

    def write(n: int) -> None:
        for i in range(30):
            state.set_object_meta("b", f"t{n}-{i}", {"owner": "other", "i": i})

    threads = [threading.Thread(target=write, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    reloaded = GateState(path)
    for n in range(4):
        for i in range(30):
            assert reloaded.object_meta("b", f"t{n}-{i}") == {"owner": "other", "i": i}


def test_modify_settings_of_an_unknown_bucket_is_none(tmp_path: Path) -> None:
    state = GateState(tmp_path / "state.json")
    assert state.modify_settings("nope", lambda s: {**s, "x": 1}) is None
    assert not (tmp_path / "state.json").exists()


def test_modify_settings_for_an_owner_who_no_longer_owns_the_bucket(tmp_path: Path) -> None:
    state = GateState(tmp_path / "state.json")
    state.set_bucket("b", "other", public=False)
    assert state.modify_settings("b", lambda s: {**s, "x": 1}, owner="user") is None
    assert state.modify_settings("b", lambda s: {**s, "x": 1}, owner="other") == {"x": 1}
