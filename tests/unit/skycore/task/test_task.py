"""Task YAML: validation messages, env substitution, round trips (hypothesis)."""

from __future__ import annotations

import string
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from skycore.config import SkycoreConfig
from skycore.errors import UserError
from skycore.storage import StorageMode
from skycore.storage.s3 import AwsConfig
from skycore.task import Task, TaskError, substitute
from tests.unit.hypothesis_budget import examples
from tests.unit.skycore.task_messages import problems_of


def err(data: Any) -> str:
    with pytest.raises(TaskError) as info:
        Task.from_dict(data)
    msg = str(info.value)
    assert len(problems_of(msg)) == 1, msg
    assert info.value.exit_code == 2
    return msg


def test_full_task_parses(tmp_path: Path, src: Path) -> None:
    f = tmp_path / "t.yaml"
    f.write_text(
        yaml.safe_dump(
            {
                "name": "demo",
                "workdir": str(tmp_path),
                "num_nodes": 2,
                "resources": {
                    "cloud": "docker",
                    "use_spot": True,
                    "image_id": "skycore-node:latest",
                    "job_recovery": {"strategy": "failover", "max_restarts_on_errors": 3},
                },
                "envs": {"BUCKET": "b-one", "N": 3, "FLAG": True},
                "file_mounts": {
                    "/plain": str(src),
                    "~/obj": "s3://some-bucket/key.txt",
                    "/m/${BUCKET}": {
                        "name": "${BUCKET}-x",
                        "source": str(src),
                        "store": "S3",
                        "mode": "mount_cached",
                        "persistent": False,
                    },
                    "/ext": {"source": "gs://ext-bucket/sub/dir", "mode": "MOUNT"},
                    "/az": {"source": "azure://skyother/pub"},
                    "/scratch": {"name": "scratch-b", "store": "azure"},
                },
                "setup": "echo setup",
                "run": "echo run",
            }
        )
    )
    t = Task.from_yaml(f, {"BUCKET": "b-two"})
    assert t.workdir == tmp_path and t.num_nodes == 2
    assert t.resources.job_recovery and t.resources.job_recovery.strategy == "FAILOVER"
    assert t.envs == {"BUCKET": "b-two", "N": "3", "FLAG": "true"}
    assert t.file_mounts == {"/plain": str(src), "~/obj": "s3://some-bucket/key.txt"}
    m = t.storage_mounts["/m/b-two"]
    assert (m.name, m.store, m.mode, m.kind, m.persistent) == (
        "b-two-x",
        "s3",
        StorageMode.MOUNT_CACHED,
        "sky_managed",
        False,
    )
    ext = t.storage_mounts["/ext"]
    assert (ext.kind, ext.store, ext.name, ext.prefix) == (
        "external",
        "gcs",
        "ext-bucket",
        "sub/dir",
    )
    az = t.storage_mounts["/az"]
    assert (az.account, az.name, az.mode) == ("skyother", "pub", StorageMode.MOUNT)
    assert t.storage_mounts["/scratch"].source is None
    assert Task.from_dict(t.to_yaml_dict()) == t


def test_yaml_errors_are_one_paragraph(tmp_path: Path) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text("name: [unclosed\n")
    with pytest.raises(TaskError, match=r"not valid YAML at line \d"):
        Task.from_yaml(f)
    with pytest.raises(TaskError, match="Cannot read"):
        Task.from_yaml(tmp_path / "missing.yaml")
    assert isinstance(TaskError("x"), UserError)


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"wrkdir": "."}, "did you mean 'workdir'?"),
        ({"resources": {"clod": "aws"}}, "resources.clod' (did you mean 'cloud'?)"),
        (
            {"resources": {"job_recovery": {"max_restart": 1}}},
            "did you mean 'max_restarts_on_errors'",
        ),
        ({"num_nodes": "two"}, "num_nodes: should be a valid integer"),
        ({"num_nodes": 0}, "num_nodes"),
        ({"resources": {"cloud": "awz"}}, "resources.cloud: 'awz' is not one of"),
        ({"resources": {"use_spot": "maybe"}}, "resources.use_spot"),
        ({"envs": {"A": [1]}}, "envs.A"),
        ({"envs": {"1A": "x"}}, "not a valid variable name"),
        ({"envs": {"A": None}}, "--env A=VALUE"),
        ({"file_mounts": {"/a/": "/tmp"}}, "must not end with '/'"),
        ({"file_mounts": {"rel": "/tmp"}}, "absolute path or start with ~/"),
        ({"file_mounts": {"s3://x": "/tmp"}}, "is a URL"),
        ({"file_mounts": {"/a": "/definitely/not/here"}}, "does not exist"),
        ({"file_mounts": {"/a": "${NOPE}"}}, "'${NOPE}' is not defined"),
        ({"file_mounts": {"/a": "ftp://host/x"}}, "scheme 'ftp://'"),
        ({"file_mounts": {"/a": [1, 2]}}, "expected a path or URL"),
        ({"file_mounts": {"/a": {"nme": "x"}}}, "file_mounts./a.nme' (did you mean 'name'?)"),
        ({"file_mounts": {"/a": {"name": "x", "store": "dropbox"}}}, "file_mounts./a.store"),
        ({"file_mounts": {"/a": {"name": "abc", "mode": "SYNC", "store": "s3"}}}, ".mode"),
        ({"file_mounts": {"/a": {"name": "abc", "source": "s3://b"}}}, "remove name"),
        (
            {"file_mounts": {"/a": {"name": "abc", "store": "s3", "mode": "COPY"}}},
            "COPY needs a source",
        ),
        ({"file_mounts": {"/a": {"source": "s3://b", "store": "gcs"}}}, "does not match"),
        ({"file_mounts": {"/a": {"name": "abc"}}}, "add store: <one of azure, gcs, r2, s3>"),
        ({"file_mounts": {"/a": {}}}, "needs a name"),
        (
            {"file_mounts": {"/a": {"name": "Bad_Name", "store": "s3"}}},
            "not a valid S3 bucket name",
        ),
        ({"file_mounts": {"/a": {"name": "ab", "store": "gcs"}}}, "not a valid GCS bucket name"),
        ({"file_mounts": {"/a": {"name": "a--b", "store": "azure"}}}, "two consecutive hyphens"),
        ({"file_mounts": {"/a": {"source": "azure://acct"}}}, "lacks a container"),
        (["a", "b"], "must be a mapping"),
        ({"workdir": "/definitely/not/here"}, "workdir: the local path"),
        (
            {"file_mounts": {"/a": {"source": "s3://b", "mode": "MOUNT", "transfers": 4}}},
            "MOUNT_CACHED only",
        ),
        (
            {"file_mounts": {"/a": {"source": "s3://b", "mode": "MOUNT_CACHED", "transfers": 0}}},
            ".transfers",
        ),
        (
            {"file_mounts": {"/a": {"source": "s3://b", "mode": "COPY", "upload_concurrency": 4}}},
            "a.upload_concurrency applies to a writable MOUNT or MOUNT_CACHED only",
        ),
        (
            {"file_mounts": {"/a": {"source": "s3://b", "mode": "MOUNT", "chunk_size": "1MiB"}}},
            "a.chunk_size: 1MiB is out of range for s3",
        ),
    ],
)
def test_bad_specs_name_the_field(data: Any, expected: str) -> None:
    assert expected in err(data)


def test_local_source_needs_name_and_folder(src: Path) -> None:
    msg = err({"file_mounts": {"/a": {"source": str(src)}}})
    assert "needs a name" in msg
    msg = err({"file_mounts": {"/a": {"name": "abc", "store": "s3", "source": str(src / "a.txt")}}})
    assert "mirrors a folder" in msg


def test_transfers_per_mount() -> None:
    t = Task.from_dict(
        {"file_mounts": {"/a": {"source": "s3://b", "mode": "MOUNT_CACHED", "transfers": 4}}}
    )
    config = SkycoreConfig(aws=AwsConfig(endpoint_url="http://127.0.0.1:1"))
    st = t.storage_mounts["/a"]
    # The mount goes to the node's rclone daemon for its --transfers setting (one per value).
    assert st.mount_options.transfers == 4 and '"transfers": 4' in st.mount_command("/a", config)
    default = Task.from_dict({"file_mounts": {"/a": {"source": "s3://b", "mode": "MOUNT_CACHED"}}})
    assert '"transfers": 1' in default.storage_mounts["/a"].mount_command("/a", config)
    assert Task.from_dict(t.to_yaml_dict()) == t


def test_default_store_from_cloud(src: Path) -> None:
    t = Task.from_dict(
        {"resources": {"cloud": "gcp"}, "file_mounts": {"/a": {"name": "abc", "source": str(src)}}}
    )
    assert t.storage_mounts["/a"].store == "gcs"


def test_substitute() -> None:
    envs = {"A": "1", "B_2": "x/y"}
    assert substitute("/p/${A}/${B_2}", envs, "f") == "/p/1/x/y"
    assert substitute("no vars $A", envs, "f") == "no vars $A"
    with pytest.raises(TaskError, match="--env C=VALUE"):
        substitute("${C}", envs, "f")


# --- hypothesis ---------------------------------------------------------------------------------

names = st.text(string.ascii_lowercase + string.digits, min_size=3, max_size=20).filter(
    lambda s: s[0].isalnum() and s[-1].isalnum() and not s.startswith("goog")
)
dsts = st.lists(
    st.text(string.ascii_lowercase, min_size=1, max_size=8), min_size=1, max_size=3
).map(lambda parts: "/" + "/".join(parts))
env_values = st.one_of(st.text(string.printable, max_size=10), st.integers(), st.booleans())


@st.composite
def valid_specs(draw: st.DrawFn) -> dict[str, Any]:
    spec: dict[str, Any] = {"num_nodes": draw(st.integers(1, 16))}
    if draw(st.booleans()):
        spec["name"] = draw(st.text(string.ascii_letters + "-_", min_size=1, max_size=12))
    if draw(st.booleans()):
        spec["resources"] = {
            "cloud": draw(st.sampled_from(["aws", "gcp", "azure", "docker"])),
            "use_spot": draw(st.booleans()),
            "job_recovery": {
                "strategy": draw(st.sampled_from(["FAILOVER", "EAGER_NEXT_REGION"])),
                "max_restarts_on_errors": draw(st.integers(0, 5)),
            },
        }
    spec["envs"] = draw(
        st.dictionaries(
            st.from_regex(r"[A-Z_][A-Z0-9_]{0,6}", fullmatch=True), env_values, max_size=4
        )
    )
    mounts: dict[str, Any] = {}
    for dst in draw(st.lists(dsts, max_size=4, unique=True)):
        kind = draw(st.sampled_from(["url", "external", "managed"]))
        store = draw(st.sampled_from(["s3", "gcs", "azure"]))
        scheme = {"s3": "s3://", "gcs": "gs://", "azure": "azure://acct/"}[store]
        name = draw(names)
        if kind == "url":
            mounts[dst] = f"{scheme}{name}/obj"
        elif kind == "external":
            mounts[dst] = {
                "source": f"{scheme}{name}",
                "mode": draw(st.sampled_from([m.value for m in StorageMode])),
            }
        else:
            mounts[dst] = {
                "name": name,
                "store": store,
                "mode": draw(st.sampled_from(["MOUNT", "MOUNT_CACHED"])),
                "persistent": draw(st.booleans()),
            }
            if mounts[dst]["mode"] == "MOUNT_CACHED" and draw(st.booleans()):
                mounts[dst]["transfers"] = draw(st.integers(1, 8))
    spec["file_mounts"] = mounts
    if draw(st.booleans()):
        spec["run"] = draw(st.text(max_size=30))
    return spec


@settings(max_examples=examples(150), suppress_health_check=[HealthCheck.too_slow])
@given(valid_specs())
def test_valid_specs_round_trip(spec: dict[str, Any]) -> None:
    task = Task.from_dict(yaml.safe_load(yaml.safe_dump(spec)))
    again = Task.from_dict(yaml.safe_load(yaml.safe_dump(task.to_yaml_dict())))
    assert again == task
    assert set(task.file_mounts) | set(task.storage_mounts) == set(spec["file_mounts"])


yaml_values = st.recursive(
    st.one_of(
        st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=12)
    ),
    lambda children: st.one_of(
        st.lists(children, max_size=3), st.dictionaries(st.text(max_size=10), children, max_size=3)
    ),
    max_leaves=10,
)
fields = st.sampled_from(
    [
        "name",
        "workdir",
        "num_nodes",
        "resources",
        "envs",
        "file_mounts",
        "setup",
        "run",
        "wrkdir",
        "nodes",
    ]
)


@settings(max_examples=examples(300), suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(yaml_values, st.dictionaries(fields, yaml_values, max_size=5)))
def test_random_specs_never_traceback(data: Any) -> None:
    try:
        Task.from_dict(data)
    except TaskError as e:
        assert str(e) and problems_of(str(e))


@given(
    st.dictionaries(
        st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,8}", fullmatch=True),
        st.text(string.ascii_letters + string.digits + "-_./", max_size=8),
        min_size=1,
        max_size=4,
    ),
    st.text(string.ascii_letters + "/-", max_size=6),
)
def test_substitute_fills_every_reference(envs: dict[str, str], sep: str) -> None:
    keys = list(envs)
    template = sep.join("${" + k + "}" for k in keys)
    assert substitute(template, envs, "f") == sep.join(envs[k] for k in keys)


def test_comp_test_fixture_parses(monkeypatch: pytest.MonkeyPatch) -> None:
    root = Path(__file__).resolve().parents[4]
    monkeypatch.chdir(root)
    t = Task.from_yaml(root / "tests" / "fixtures" / "comp_test.yaml", {"RUN_ID": "zz"})
    kinds = {dst: (s.kind, s.mode.value, s.store) for dst, s in t.storage_mounts.items()}
    assert kinds["/s3-sky-managed-copy"] == ("sky_managed", "COPY", "s3")
    assert kinds["/gcs-external-public-not-by-user"] == ("external", "MOUNT_CACHED", "gcs")
    assert t.storage_mounts["/s3-sky-managed-mount"].name == "s3-sky-managed-mount-zz"
    assert len(t.storage_mounts) == 12 and t.workdir is not None
