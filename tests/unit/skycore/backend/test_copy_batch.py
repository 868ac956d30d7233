"""COPY snapshots go through the node's rclone daemon: a node batch merges the copy and mount
steps into one run of the node program, and the node program finds the object an rclone
path names. Pure functions, no cloud."""

from __future__ import annotations

import subprocess

from hypothesis import given
from hypothesis import strategies as st

from skycore import backend, node
from skycore.backend.batch import ShellStep
from skycore.node.mountd.copying import split_remote
from skycore.storage import mounting
from skycore.storage.common import StorageMode

SEGMENT = st.text(alphabet="abcdefghij-_.0123456789", min_size=1, max_size=8)


def test_copy_script_names_its_request_and_starts_no_rclone_of_its_own() -> None:
    script = mounting.copy_with_fallback_command(["r:b/p", "r-anon:b/p"], "~/d")
    step = mounting.copy_step(["r:b/p", "r-anon:b/p"], "~/d")
    assert step.copies == (mounting.CopyRequest(("r:b/p", "r-anon:b/p"), "~/d"),)
    assert step.env == mounting.NODE_ENV and not step.mounts
    assert step.script() == script and node.request_env(step.request()) in script
    assert " copyto " not in script and "copy-many" in script
    assert subprocess.run(["bash", "-n", "-c", script], check=False).returncode == 0


def test_a_batch_merges_copies_and_mounts_into_one_entry() -> None:
    copy = ("copy /c (b)", mounting.copy_step(["r:b"], "/c"))
    mount = ("mount /m (MOUNT)", mounting.mount_step("r:m", "/m", StorageMode.MOUNT))
    other = ("copy s3://x -> /x", ShellStep("echo not a mount step"))
    merged = backend.merge_mounts([copy, other, mount])
    assert merged[0] == other
    assert len(merged) == 2
    what, step = merged[1]
    assert what == "copy /c (b); mount /m (MOUNT)"
    assert isinstance(step, mounting.MountStep)
    script = step.script()
    assert node.request_env(step.request()) in script and "up-many" in script
    assert [r.dst for r in step.mounts] == ["/m"]
    assert [r.dst for r in step.copies] == ["/c"]
    assert [c["dst"] for c in step.request()["copies"]] == ["/c"]
    assert subprocess.run(["bash", "-n", "-c", script], check=False).returncode == 0


def test_a_lone_copy_is_not_rewritten() -> None:
    copy = ("copy /c (b)", mounting.copy_step(["r:b"], "/c"))
    assert backend.merge_mounts([copy]) == [copy]


@given(st.lists(SEGMENT, min_size=1, max_size=4))
def test_split_remote_finds_the_leaf(parts: list[str]) -> None:
    path = "remote:" + "/".join(parts)
    parent, leaf = split_remote(path)
    if len(parts) == 1:
        assert (parent, leaf) == (path, "")
    else:
        assert leaf == parts[-1]
        assert parent == "remote:" + "/".join(parts[:-1])


def test_split_remote_skips_quoted_connection_string_values() -> None:
    path = ':azureblob,account=a,endpoint="http://127.0.0.1:3/a":box/dir/f.txt'
    assert split_remote(path) == (
        ':azureblob,account=a,endpoint="http://127.0.0.1:3/a":box/dir',
        "f.txt",
    )
    assert split_remote(':s3,endpoint="http://h:1/x":bkt') == (
        ':s3,endpoint="http://h:1/x":bkt',
        "",
    )
