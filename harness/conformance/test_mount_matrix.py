"""The mount matrix: every store x mode x bucket kind, on one reused cluster per store.

Each case lists its mount, reads the seeded file, writes where access allows and reads the
write back from the store itself, and expects a clear, immediate refusal where it does not.
COPY is a snapshot: writing to it never touches the bucket.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness import emulator_registry as registry
from harness.conformance.contract_kept import emulator_contract_kept  # noqa: F401 (autouse)
from harness.testing import access
from harness.testing.buckets import (
    KINDS,
    PUBLIC_NOT_BY_USER,
    SEED_KEY,
    TestBucket,
    make_test_bucket,
    needs_public,
    public_unavailable,
)
from harness.testing.clusters import Outcome, SmokeCluster
from skycore.storage import mounting

MODES = ("COPY", "MOUNT", "MOUNT_CACHED")


# A write to a public bucket of another account: the error, and a hang guard on how soon it
# comes (the mount refuses it at once, in milliseconds; a store's 403 after a queued upload
# would come seconds later, or never to the writer).
REFUSAL = "Read-only file system"
REFUSAL_WITHIN_S = 2.0


def timed_write(shell, path: str, payload: str) -> tuple[int, str, float]:
    """Write ``payload`` to ``path`` on the node: (exit code, output, seconds the write took,
    measured on the node around the write alone, on the kernel's monotonic clock: the
    uptime, to the hundredth)."""
    code, out = shell(
        f"read -r t0 _ < /proc/uptime; rc=0; echo '{payload}' > {path} || rc=$?; "
        'read -r t1 _ < /proc/uptime; echo "SKYCORE_WRITE_S=$t0 $t1"; exit $rc',
        timeout=30,
    )
    lines = out.splitlines()
    marks = [line for line in lines if line.startswith("SKYCORE_WRITE_S=")]
    assert len(marks) == 1, out
    rest = "\n".join(line for line in lines if not line.startswith("SKYCORE_WRITE_S="))
    t0, t1 = (float(t) for t in marks[0].split("=", 1)[1].split())
    return code, rest, t1 - t0


def mount_point(kind: str, mode: str) -> str:
    return f"/matrix/{kind}-{mode.lower()}"


def cases() -> list:
    out = []
    for store, cls in registry.emulator_classes().items():
        cloud = cls.marker()  # the store's pytest marker and test id
        for mode in MODES:
            for kind in KINDS:
                marks = [getattr(pytest.mark, cloud), pytest.mark.xdist_group(f"matrix-{cloud}")]
                out.append(
                    pytest.param(store, mode, kind, id=f"{cloud}-{mode}-{kind}", marks=marks)
                )
    return out


def matrix_skips(store: str) -> dict[str, str]:
    """The bucket kinds this run cannot make for ``store``, each with the reason: a target
    file without an ``other`` account cannot make a public bucket of another account, and a
    store whose buckets are public only by a setting outside its API (R2) cannot make any
    public bucket against a target."""
    skips: dict[str, str] = {}
    target = access.target()
    if target is not None and not target.has_other:
        skips[PUBLIC_NOT_BY_USER] = access.NO_OTHER_ACCOUNT
    reason = public_unavailable(store)
    if reason:
        skips.update({kind: reason for kind in KINDS if needs_public(kind)})
    return skips


class MatrixCluster:
    """One cluster of a store with a mount per (mode, kind), each on its own bucket."""

    def __init__(self, store: str, workdir: Path) -> None:
        self.store = store
        workdir.mkdir(parents=True, exist_ok=True)
        marker = registry.get_emulator_class(store).marker()
        self.cluster = SmokeCluster.new(f"matrix-{marker}", workdir)
        self.buckets: dict[tuple[str, str], TestBucket] = {}
        self.skips = matrix_skips(store)
        self.kinds = tuple(kind for kind in KINDS if kind not in self.skips)
        mounts = {}
        for mode in MODES:
            for kind in self.kinds:
                bucket = make_test_bucket(store, kind, workdir, prefix="mx")
                self.buckets[(mode, kind)] = bucket
                mounts[mount_point(kind, mode)] = bucket.mount_entry(mode)
        spec = {"name": "matrix", "file_mounts": mounts, "run": "echo ready"}
        self.launch: Outcome | None = None
        self.error: Exception | None = None
        try:
            self.launch = self.cluster.launch(spec)
        except Exception as e:  # recorded once: every case of this store then fails on it
            self.error = e

    def close(self) -> None:
        self.cluster.down()
        for bucket in self.buckets.values():
            bucket.delete()


class Matrices:
    """Builds each store's matrix cluster on first use and tears all of them down at the end."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.built: dict[str, MatrixCluster] = {}

    def get(self, store: str) -> MatrixCluster:
        if store not in self.built:
            self.built[store] = MatrixCluster(store, self.workdir / store)
        return self.built[store]

    def close(self) -> None:
        errors = []
        for matrix in self.built.values():
            try:
                matrix.close()
            except Exception as e:  # close every store's cluster even if one fails
                errors.append(e)
        if errors:
            raise errors[0]


@pytest.fixture(scope="module")
def matrices(local_cloud, tmp_path_factory) -> Iterator[Matrices]:
    built = Matrices(tmp_path_factory.mktemp("matrix"))
    try:
        yield built
    finally:
        built.close()


@pytest.mark.parametrize(("store", "mode", "kind"), cases())
def test_mount(matrices: Matrices, store: str, mode: str, kind: str) -> None:
    matrix = matrices.get(store)
    if kind in matrix.skips:
        pytest.skip(matrix.skips[kind])
    assert matrix.error is None, f"the {store} matrix cluster failed to launch: {matrix.error}"
    assert matrix.launch is not None and matrix.launch.exit_code == 0, matrix.launch
    bucket = matrix.buckets[(mode, kind)]
    dst = mount_point(kind, mode)
    shell = matrix.cluster.shell

    # The mount lists and the seeded object reads back.
    code, out = shell(f"ls -la {dst} && cat {dst}/{SEED_KEY}")
    assert code == 0, out
    assert bucket.seed[SEED_KEY].decode() in out

    key = f"written-{uuid.uuid4().hex[:8]}.txt"
    payload = f"payload {uuid.uuid4().hex}"
    before = set(bucket.list_keys()) if kind == PUBLIC_NOT_BY_USER else set()
    code, out, seconds = timed_write(shell, f"{dst}/{key}", payload)

    if mode == "COPY":
        # A snapshot on the node's disk (no FUSE mount): the write works, the bucket never
        # sees it.
        assert code == 0, out
        code, mounts = shell(f"grep -c ' {dst} ' /proc/mounts || true")
        assert mounts.strip() == "0", f"COPY destination {dst} is a mount: {mounts}"
        assert key not in bucket.list_keys()
        return

    if kind == PUBLIC_NOT_BY_USER:
        # Someone else's bucket: skycore finds it not writable and mounts it read-only, so
        # every store refuses the same way (EROFS from the mount, never a store's 403 after
        # a queued upload), at once; after a drain the bucket holds nothing new.
        assert code != 0, f"a write to someone else's bucket succeeded: {out}"
        assert REFUSAL in out, out
        assert seconds <= REFUSAL_WITHIN_S, f"refused only after {seconds:.2f} s: {out}"
        code, drained = shell(mounting.drain_command(dst, 60), timeout=90)
        assert code == 0, drained
        assert set(bucket.list_keys()) == before, "the refused write reached the bucket"
        return

    assert code == 0, out
    if mode == "MOUNT_CACHED":
        code, out = shell(mounting.drain_command(dst, 60), timeout=90)
        assert code == 0, out
    assert bucket.read(key).decode().strip() == payload
    code, out = shell(f"cat {dst}/{key}")
    assert code == 0 and payload in out, out
