"""The skypilot mount recipe's own parts (harness/recipes/skypilot.py): which SkyPilot store
and stand-ins each store's rclone remote gets, the tuning it passes on, the bash it wraps
around SkyPilot's commands, the per-process cache, and the JSON contract with
harness/recipes/sky_commands.py. No node, no network: the contract tests that need SkyPilot
itself run with the SkyPilot venv, installed first if it is not (skipped, with the reason,
only when it cannot be installed)."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from typing import Any

import pytest

from harness.recipes import skypilot, skypilot_venv
from harness.recipes.skypilot import (
    NODE_BIN,
    SkyPilotRecipe,
    mount_script_of,
    rclone_size,
    sky_request,
    sky_tuning,
)
from skycore.config import SkycoreConfig
from skycore.errors import ConfigError
from skycore.plugin_api import BucketMount, StorageMode
from skycore.stores import get_store_class

SECTIONS = {
    "aws": {
        "access_key_id": "AKIAUSER",
        "secret_access_key": "user-secret",
        "endpoint_url": "http://127.0.0.1:11720",
        "region": "us-east-1",
    },
    "gcp": {
        "project": "skycore",
        "api_endpoint": "http://127.0.0.1:27260",
        "access_token": "ya29.user",
    },
    "azure": {
        "account_name": "skyuser",
        "account_key": "a2V5",
        "endpoint_template": "http://127.0.0.1:12785/{account}",
    },
    "r2": {
        "access_key_id": "r2-key",
        "secret_access_key": "r2-secret",
        "endpoint_url": "http://127.0.0.1:31492",
    },
}


def mount(store: str, section: dict[str, Any] | None = None, **fields: Any) -> BucketMount:
    """A MOUNT_CACHED BucketMount of ``store`` with the section of SECTIONS (or ``section``)."""
    name = get_store_class(store).config_section
    config = SkycoreConfig.model_validate({name: section or SECTIONS[name]})
    values: dict[str, Any] = {
        "store": store,
        "bucket": "bkt",
        "sub_path": "",
        "mount_path": "/ckpt",
        "mode": StorageMode.MOUNT_CACHED,
        "read_only": False,
        "transfers": None,
        "store_config": config.section(name),
    } | fields
    return BucketMount(**values)


def test_the_recipe_mounts_only_mount_cached_and_drains_nothing_before_a_stop() -> None:
    assert SkyPilotRecipe.name == "skypilot"
    assert SkyPilotRecipe.modes == frozenset({StorageMode.MOUNT_CACHED})
    assert SkyPilotRecipe.drains_before_stop is False  # sky stop/down flush only --graceful


@pytest.mark.parametrize(
    ("store", "kind", "creds", "env"),
    [
        (
            "s3",
            "S3",
            {"access_key_id": "AKIAUSER", "secret_access_key": "user-secret"},
            {
                "RCLONE_S3_ENDPOINT": "http://127.0.0.1:11720",
                "RCLONE_S3_USE_UNSIGNED_PAYLOAD": "true",
            },
        ),
        (
            "r2",
            "R2",
            {"access_key_id": "r2-key", "secret_access_key": "r2-secret"},
            {"RCLONE_S3_ENDPOINT": "http://127.0.0.1:31492"},
        ),
        (
            "gcs",
            "GCS",
            {"project": "skycore"},
            {
                "RCLONE_GCS_ENDPOINT": "http://127.0.0.1:27260/storage/v1/",
                "RCLONE_GCS_TOKEN": json.dumps(
                    {"access_token": "ya29.user", "token_type": "Bearer"}
                ),
            },
        ),
        (
            "azure",
            "AZURE",
            {"account_name": "skyuser", "account_key": "a2V5"},
            {"RCLONE_AZUREBLOB_ENDPOINT": "http://127.0.0.1:12785/skyuser"},
        ),
    ],
)
def test_each_store_gets_skypilot_s_store_its_credentials_and_the_gate_as_stand_in(
    store: str, kind: str, creds: dict[str, str], env: dict[str, str]
) -> None:
    request, stand_ins = sky_request(mount(store))
    assert request == {
        "kind": kind,
        "bucket": "bkt",
        "mount_path": "/ckpt",
        "mount_cached": {},
        "credentials": creds,
    }
    assert stand_ins == env


def test_an_https_s3_endpoint_keeps_rclone_s_own_payload_signing() -> None:
    section = SECTIONS["aws"] | {"endpoint_url": "https://s3.example.com"}
    _, env = sky_request(mount("s3", section))
    assert env == {"RCLONE_S3_ENDPOINT": "https://s3.example.com"}


def test_a_section_without_keys_is_one_paragraph_naming_the_section_and_the_fix() -> None:
    section = {k: v for k, v in SECTIONS["aws"].items() if "key" not in k}
    with pytest.raises(ConfigError) as e:
        sky_request(mount("s3", section))
    message = str(e.value)
    assert "access_key_id, secret_access_key" in message and "'aws' section" in message
    assert "mount_recipe: skycore" in message and "\n" not in message


def test_a_backend_skypilot_does_not_speak_is_refused_and_the_others_are_known() -> None:
    assert skypilot.sky_kind({"type": "swift"}) is None
    assert skypilot.sky_kind({"type": "s3", "provider": "Minio"}) is not None  # as S3
    kinds = {kind for kind, _ in skypilot.KINDS.values()}
    assert kinds == {"S3", "GCS", "AZURE", "R2"}


def test_a_sub_path_is_mounted_as_the_prefix_of_the_bucket() -> None:
    request, _ = sky_request(mount("s3", sub_path="runs/7/"))
    assert request["bucket"] == "bkt/runs/7"


def test_tuning_reaches_skypilot_as_its_yaml_strings() -> None:
    tuned = mount(
        "s3",
        read_only=True,
        mount_cached={
            "transfers": 8,
            "vfs_cache_max_size": 10 << 30,
            "buffer_size": 1000,
            "vfs_read_chunk_size": 8 << 20,
            "vfs_cache_max_age": 3600.0,
            "vfs_read_chunk_streams": 16,
        },
    )
    assert sky_tuning(tuned) == {
        "transfers": 8,
        "vfs_cache_max_size": "10G",
        "buffer_size": "1000B",
        "vfs_read_chunk_size": "8M",
        "vfs_cache_max_age": "3600s",
        "vfs_read_chunk_streams": 16,
        "read_only": True,
    }
    assert (rclone_size(0), rclone_size(3 << 10)) == ("0B", "3K")


CMDS = {
    "mount_command": "rclone mount sky-s3-bkt:bkt /ckpt --log-file ~/.sky/rclone_log/ab.log",
    "version_check": "rclone --version | grep -q v1.68.2",
    "flush_script": "echo flushed",
    "rclone_version": "v1.68.2",
    "sky_version": "1.0.0.dev0",
    "log_dir": "~/.sky/rclone_log",
}


def test_the_mount_script_is_skypilot_s_command_after_its_stand_ins() -> None:
    env = {"RCLONE_S3_ENDPOINT": "http://127.0.0.1:1", "RCLONE_GCS_TOKEN": '{"a": "b c"}'}
    lines = mount_script_of(CMDS, env, "/ckpt").splitlines()
    body = [ln for ln in lines if not ln.startswith("#")]
    assert body[:6] == [
        "if mountpoint -q /ckpt; then exit 0; fi",
        f'export PATH={NODE_BIN}:"$PATH"',
        "unset AWS_CA_BUNDLE",
        f"export RCLONE_GCS_TOKEN={shlex.quote(env['RCLONE_GCS_TOKEN'])}",
        "export RCLONE_S3_ENDPOINT=http://127.0.0.1:1",
        body[5],
    ]
    assert body[5].startswith("if ! { rclone --version | grep -q v1.68.2; }; then echo ")
    assert body[6:9] == ["mkdir -p /ckpt", CMDS["mount_command"], "rc=$?"]
    assert "tail -n 20 ~/.sky/rclone_log/ab.log" in body[9]


def test_a_home_mount_path_is_expanded_by_the_node_s_bash() -> None:
    script = mount_script_of(CMDS, {}, "~/my data")
    assert "mountpoint -q \"$HOME\"'/my data'" in script
    assert "mkdir -p \"$HOME\"'/my data'" in script


def run_bash(script: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60)


def test_a_failed_version_check_fails_the_mount_with_the_reason() -> None:
    cmds = CMDS | {"version_check": "false", "mount_command": "echo MOUNTED"}
    done = run_bash(mount_script_of(cmds, {}, "/nonexistent/skypilot-unit"))
    assert done.returncode == 1 and "MOUNTED" not in done.stdout
    assert "not SkyPilot's v1.68.2" in done.stderr and "prepare_node" in done.stderr


def test_the_drain_is_skypilot_s_flush_bounded_by_timeout() -> None:
    recipe = SkyPilotRecipe()
    key = json.dumps({"kind": None}, sort_keys=True)
    skypilot._CACHE[key] = CMDS | {"flush_script": "echo flushing; sleep 30"}
    try:
        script = recipe.drain_script(["/ckpt"], 0.5)
        assert script.startswith(f"timeout 1 bash -c {shlex.quote('echo flushing; sleep 30')}")
        done = run_bash(script)
        assert done.returncode == 124
        assert "SkyPilot's flush did not end within 1 s" in done.stdout
        skypilot._CACHE[key] = CMDS
        assert run_bash(recipe.drain_script(["/ckpt"], 60)).stdout == "flushed\n"
    finally:
        skypilot._CACHE.pop(key, None)


def test_the_unmount_is_a_lazy_fusermount_of_each_live_mount_point() -> None:
    script = SkyPilotRecipe().unmount_script(["/ckpt", "~/data"])
    assert "if mountpoint -q /ckpt; then fusermount3 -uz /ckpt || rc=1; fi" in script
    assert 'fusermount3 -uz "$HOME"/data' in script
    assert run_bash(SkyPilotRecipe().unmount_script(["/nonexistent/x"])).returncode == 0


def sky_commands_script(request: dict[str, Any], python: str) -> dict[str, Any]:
    done = subprocess.run(
        [python, str(skypilot.COMMANDS)],
        input=json.dumps(request),
        capture_output=True,
        text=True,
        timeout=120,
    )
    out = json.loads(done.stdout)
    assert (done.returncode == 0) == ("error" not in out), done.stderr
    return dict(out)


def test_sky_commands_refuses_bad_input_with_one_json_line_before_importing_sky() -> None:
    assert sky_commands_script({"kind": "NOPE"}, sys.executable) == {
        "error": "RuntimeError: kind 'NOPE' is not one of S3, GCS, AZURE, R2"
    }
    out = sky_commands_script({"kind": "S3", "credentials": {}}, sys.executable)
    assert out["error"] == "RuntimeError: S3 credentials lack access_key_id, secret_access_key"


@pytest.fixture
def venv() -> skypilot_venv.Venv:
    """The SkyPilot venv, installed first if it is not (skipped with the reason only when
    it cannot be installed here)."""
    try:
        return skypilot_venv.ensure(say=lambda _msg: None)
    except skypilot_venv.SkyPilotUnavailable as e:
        pytest.skip(str(e))


def test_sky_commands_answers_with_skypilot_s_own_commands(
    venv: skypilot_venv.Venv, tmp_path: Any
) -> None:
    request, _ = sky_request(mount("gcs", mount_cached={"transfers": 2}))
    out = subprocess.run(
        [str(venv.python), str(skypilot.COMMANDS)],
        input=json.dumps(request),
        capture_output=True,
        text=True,
        env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"},
        timeout=120,
    )
    answer = json.loads(out.stdout)
    assert answer["profile"] == "sky-gcs-bkt"
    assert "project_number = skycore" in answer["mount_command"]
    assert "rclone mount sky-gcs-bkt:bkt /ckpt " in answer["mount_command"]
    assert "--transfers 2 " in answer["mount_command"]
    assert answer["version_check"] == "rclone --version | grep -q v1.68.2"
    assert "skypilot: cached mount upload complete" in answer["flush_script"]
    assert answer["rclone_version"] == skypilot_venv.RCLONE_VERSION
    assert skypilot_venv.SKYPILOT.endswith("==" + answer["sky_version"])


def test_sky_commands_runs_once_per_distinct_request(
    venv: skypilot_venv.Venv, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[list[str]] = []
    real = subprocess.run

    def counting(argv: list[str], **kwargs: Any) -> Any:
        calls.append(argv)
        return real(argv, **kwargs)

    monkeypatch.setattr(skypilot.subprocess, "run", counting)
    monkeypatch.setattr(skypilot, "_CACHE", {})
    recipe = SkyPilotRecipe()
    first = recipe.mount_script(mount("s3"))
    assert recipe.mount_script(mount("s3")) == first
    other = recipe.mount_script(mount("s3", mount_path="/other"))
    assert "sky-s3-bkt:bkt /other " in other
    assert len(calls) == 2
