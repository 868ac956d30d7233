"""The seed's comprehensive manual test, automated: launch comp_test.yaml (the part of the
selected store, the store's own twin comp_test_<store>.yaml, or the YAML its emulator's
package ships) and check its output the way the test plan does."""

from __future__ import annotations

import inspect
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness import emulator_registry as registry
from harness.accounts import OTHER, USER
from harness.conformance.contract_kept import emulator_contract_kept  # noqa: F401 (autouse)
from harness.testing import access
from harness.testing.buckets import list_keys, public_unavailable, read_object
from skycore.storage.common import parse_url

FIXTURES = Path(__file__).resolve().parent / "fixtures"
REPO_FIXTURES = Path("tests", "fixtures")
"""How a comp test YAML names the suite's fixtures (the repository's layout, so that
``skycore launch tests/fixtures/comp_test.yaml`` works from a checkout's root)."""
WRITABLE = ("sky-managed-mount", "sky-managed-mount-cached", "external-private-by-user",
            "external-public-by-user")  # fmt: skip
PUBLIC_NOT_BY_USER = "-public-not-by-user"


def prefix(store: str) -> str:
    """The mount points of ``store`` in the comp test start with this."""
    return f"/{store}-"


def comp_test_yaml(store: str) -> Path:
    """The comp test YAML of ``store``: its emulator's own (``comp_test``, else
    ``comp_test_<store>.yaml`` beside the emulator's module), its built-in twin, or the
    seed's."""
    emulator = registry.get_emulator_class(store)
    if emulator.comp_test is not None:
        return Path(emulator.comp_test)
    name = f"comp_test_{store}.yaml"
    for candidate in (Path(inspect.getfile(emulator)).with_name(name), FIXTURES / name):
        if candidate.exists():
            return candidate
    return FIXTURES / "comp_test.yaml"


def local_path(value: str, yaml_dir: Path) -> str:
    """A local source or workdir of the YAML as an absolute path: ``tests/fixtures/X`` is the
    suite's packaged fixture X; any other relative path is relative to the YAML's folder."""
    path = Path(value).expanduser()
    if path.is_absolute():
        return str(path)
    if path.parts[:2] == REPO_FIXTURES.parts:
        return str(FIXTURES.joinpath(*path.parts[2:]))
    return str(yaml_dir / path)


def task_for(store: str) -> dict:
    """comp_test.yaml cut down to one store (its mounts and the run lines that use them), its
    local paths made absolute; in a target run the public bucket of another account is the
    target file's ``public_bucket``."""
    source = comp_test_yaml(store)
    spec = yaml.safe_load(source.read_text())
    others = [prefix(s) for s in registry.store_names() if s != store]
    mounts: dict[str, Any] = {
        dst: v for dst, v in spec["file_mounts"].items() if dst.startswith(prefix(store))
    }
    if not mounts:
        pytest.skip(
            f"no comp test for store {store}: {source.name} has no {prefix(store)}* mounts; "
            "ship one with the emulator class's comp_test attribute (docs/backends.md)"
        )
    target = access.target()
    for dst, value in mounts.items():
        if not isinstance(value, dict):
            continue
        if "://" not in str(value.get("source", "://")):
            value["source"] = local_path(value["source"], source.parent)
        if target is not None and dst.endswith(PUBLIC_NOT_BY_USER):
            if not target.public_bucket:
                pytest.skip(access.NO_PUBLIC_BUCKET)
            value["source"] = target.public_bucket
    spec["file_mounts"] = mounts
    if spec.get("workdir"):
        spec["workdir"] = local_path(spec["workdir"], source.parent)
    spec["run"] = "\n".join(
        line for line in spec["run"].splitlines() if not any(o in line for o in others)
    )
    return spec


def public_dataset(store: str, spec: dict) -> tuple[str, str | None]:
    """(bucket, owner to list it with) of the comp test's public bucket of another account."""
    url = next(
        v["source"] for d, v in spec["file_mounts"].items() if d.endswith(PUBLIC_NOT_BY_USER)
    )
    target = access.target()
    owner = OTHER if target is None or target.has_other else None
    return parse_url(url).bucket, owner


def new_run_id() -> str:
    """A RUN_ID for the comp test's bucket names (carrying the run's tag in a target run)."""
    tag = access.bucket_tag()
    return f"{tag}-{uuid.uuid4().hex[:6]}" if tag else uuid.uuid4().hex[:10]


@pytest.fixture
def run_id(store: str) -> Iterator[str]:
    """A unique RUN_ID with the user's external buckets made for it; all removed afterwards."""
    yield from run_buckets(store)


def run_buckets(store: str) -> Iterator[str]:
    """Make the external buckets of a fresh RUN_ID, yield it, then remove every bucket."""
    reason = public_unavailable(store)
    if reason:  # the comp test's external public bucket cannot be made in this run
        pytest.skip(reason)
    rid = new_run_id()
    emu = access.store_access(store)
    external = [f"{store}-external-private-by-user-{rid}", f"{store}-external-public-by-user-{rid}"]
    for name in external:
        emu.make_bucket(
            name, owner=USER, public="public" in name, objects={"existing.txt": b"existing\n"}
        )
    yield rid
    managed = [f"{store}-sky-managed-{m}-{rid}" for m in ("copy", "mount", "mount-cached")]
    for name in external + managed:
        emu.delete_bucket(name)


def test_comp_test(store, run_id, cluster_factory) -> None:
    check_comp_test(store, run_id, cluster_factory("comp"), task_for(store))


def check_comp_test(store: str, run_id: str, cluster, spec: dict) -> None:
    """Launch the comp test ``spec`` with RUN_ID ``run_id`` and check it as the test plan
    does."""
    outcome = cluster.launch(spec, env={"RUN_ID": run_id})
    log = outcome.run_log()
    assert outcome.exit_code == 0, outcome.output + log
    assert outcome.job_status == "SUCCEEDED"
    assert cluster.status() == "UP"
    setup_log = (outcome.result.log_dir / "setup-0.log").read_text()
    assert "hi" in setup_log

    # Every mount listed: the workdir, the seeded source, the pre-existing objects, the dataset.
    assert "README.txt" in log and "main.py" in log
    assert log.count("hello.txt") >= 3  # copy, mount and mount-cached of the local source
    assert "existing.txt" in log
    assert "scratch.tmp" not in log  # the source's .gitignore is honoured

    # Four writes read back on the node, and the refused write to someone else's bucket.
    assert log.count(" UTC ") >= 4
    assert "UNEXPECTED" not in log
    assert "refused, as expected" in log
    assert "Read-only file system" in log

    # The writes are in the store itself (the job ended only after cached mounts drained).
    bucket_prefix = prefix(store).strip("/")
    for mount in WRITABLE:
        bucket = f"{bucket_prefix}{mount}-{run_id}"
        assert read_object(store, bucket, "hellotest.txt").strip(), bucket
    # The COPY bucket was not written to, and neither was the public dataset.
    assert "hellotest.txt" not in list_keys(store, f"{bucket_prefix}sky-managed-copy-{run_id}")
    dataset, owner = public_dataset(store, spec)
    assert "hellotest.txt" not in list_keys(store, dataset, owner=owner)
