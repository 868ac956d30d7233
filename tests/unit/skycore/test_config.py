"""skycore config: round-trip, strict validation, clear errors, sections no installed store
claims (kept, warned about once), the record of who wrote a section, forgetting one."""

from __future__ import annotations

import json
from pathlib import Path
from unittest.mock import ANY

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from skycore import config as config_module
from skycore.config import (
    ConfigError,
    DockerConfig,
    SkycoreConfig,
    forget_sections,
    load_config,
    merge_config,
    origins_path,
    read_origins,
    save_config,
    store_sections,
)
from skycore.storage.azure import AzureConfig
from skycore.storage.gcs import GcpConfig
from skycore.storage.r2 import R2Config
from skycore.storage.s3 import AwsConfig

# Any text: empty, whitespace, unicode, YAML's own syntax characters (the usual round-trip
# breakers), not only printable ASCII.
texts = st.text(max_size=40) | st.sampled_from(["", " ", " lead", "trail ", "a: b", "#x", "~"])


@given(key=texts, secret=texts, token=texts, account=texts, host=texts)
def test_round_trip(tmp_path_factory: pytest.TempPathFactory, key, secret, token, account, host):
    path = tmp_path_factory.mktemp("cfg") / "config.yaml"
    config = SkycoreConfig(
        aws=AwsConfig(
            endpoint_url="http://127.0.0.1:1", access_key_id=key, secret_access_key=secret
        ),
        gcp=GcpConfig(api_endpoint="http://127.0.0.1:2", access_token=token),
        azure=AzureConfig(
            account_name=account, account_key="a2V5", endpoint_template="http://x/{account}"
        ),
        r2=R2Config(endpoint_url=host, access_key_id=key, secret_access_key=secret),
        docker=DockerConfig(host=host, image="skycore-node:abc"),
    )
    save_config(config, path)
    assert load_config(path) == config
    assert path.stat().st_mode & 0o777 == 0o600


def test_missing_file_says_how_to_fix(tmp_path: Path):
    with pytest.raises(ConfigError, match="harness up"):
        load_config(tmp_path / "nope.yaml")


def test_unknown_key_names_the_field(tmp_path: Path):
    path = tmp_path / "config.yaml"
    path.write_text("aws:\n  endpoint: http://127.0.0.1:1\n")
    with pytest.raises(ConfigError, match=r"aws\.endpoint"):
        load_config(path)


def test_bad_yaml_is_one_clear_error(tmp_path: Path):
    path = tmp_path / "config.yaml"
    path.write_text("aws: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(path)


def test_azure_endpoint_template():
    azure = AzureConfig(
        account_name="skyuser", account_key="k", endpoint_template="http://h/{account}"
    )
    assert azure.blob_endpoint() == "http://h/skyuser"
    assert azure.blob_endpoint("skyother") == "http://h/skyother"


@pytest.fixture
def fresh_warnings(monkeypatch: pytest.MonkeyPatch) -> None:
    """Warnings of this process forgotten, so the test sees each one."""
    monkeypatch.setattr(config_module, "_warned", set())


def _warnings(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("warning:")]


@pytest.mark.usefixtures("fresh_warnings")
def test_a_section_no_installed_store_claims_is_one_warning_not_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    path = tmp_path / "config.yaml"
    path.write_text("b2:\n  key: x\ndocker:\n  host: unix:///d.sock\n")
    config = load_config(path)
    load_config(path)  # a second load in the same process: no second line
    assert config.section("b2") == {"key": "x"} and config.docker.host == "unix:///d.sock"
    (line,) = _warnings(capsys.readouterr().err)
    assert f"{path}: section 'b2' is kept but unused" in line
    assert "store 'b2'" in line and "harness down --store b2 --forget" in line
    for section in ("aws", "gcp", "azure", "r2", "docker"):
        assert section in line


@pytest.mark.usefixtures("fresh_warnings")
def test_the_warning_names_the_package_recorded_as_writing_the_section(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    path = tmp_path / "config.yaml"
    path.write_text("backblaze:\n  key: x\n")
    origins = {"backblaze": {"store": "b2", "package": "skycore-b2", "version": "1.2"}}
    origins_path(path).write_text(json.dumps(origins))
    load_config(path)
    (line,) = _warnings(capsys.readouterr().err)
    assert "section 'backblaze'" in line and "store 'b2' of package skycore-b2 1.2" in line
    assert "harness down --store b2 --forget" in line
    assert store_sections("b2", path) == ["backblaze"]


@pytest.mark.usefixtures("fresh_warnings")
def test_an_unclaimed_section_is_written_back_as_it_is(tmp_path: Path):
    path = tmp_path / "config.yaml"
    path.write_text("b2:\n  key: x\n  nested: {a: 1}\n")
    aws = AwsConfig(endpoint_url="http://127.0.0.1:1")
    config = load_config(path)
    config.logs_dir = "/my/logs"
    save_config(config, path)
    merge_config(SkycoreConfig(aws=aws), path)
    again = load_config(path)
    assert again.section("b2") == {"key": "x", "nested": {"a": 1}}
    assert again.section("aws") == aws and again.logs_dir == "/my/logs"


def test_merge_records_each_store_sections_package_beside_the_file(tmp_path: Path):
    path = tmp_path / "config.yaml"
    aws = AwsConfig(endpoint_url="http://127.0.0.1:1")
    merge_config(SkycoreConfig(aws=aws, docker=DockerConfig(host="unix:///d.sock")), path)
    assert read_origins(path) == {"aws": {"store": "s3", "package": "skycore", "version": ANY}}
    # config.yaml itself holds only sections any skycore reads: the record is a side file
    assert set(yaml.safe_load(path.read_text())) == {"aws", "docker"}


def test_forget_removes_the_section_and_its_record_and_keeps_the_rest(tmp_path: Path):
    path = tmp_path / "config.yaml"
    gcp = GcpConfig(api_endpoint="http://127.0.0.1:2", access_token="t")
    aws = AwsConfig(endpoint_url="http://x")
    merge_config(SkycoreConfig(aws=aws, gcp=gcp, docker=DockerConfig(host="unix:///d")), path)
    assert store_sections("s3", path) == ["aws"]
    assert forget_sections(["aws", "nosuch"], path) == ["aws"]
    assert set(yaml.safe_load(path.read_text())) == {"gcp", "docker"}
    assert set(read_origins(path)) == {"gcp"}
    assert store_sections("s3", path) == [] and load_config(path).section("gcp") == gcp


def test_r2_endpoint_comes_from_the_account_id():
    assert R2Config(account_id="abc123").endpoint_url == "https://abc123.r2.cloudflarestorage.com"
    with pytest.raises(ValueError, match="account_id"):
        R2Config()


def test_merge_keeps_every_other_section(tmp_path: Path):
    path = tmp_path / "config.yaml"
    gcp = GcpConfig(api_endpoint="http://127.0.0.1:2", access_token="t")
    save_config(SkycoreConfig(gcp=gcp, logs_dir="/my/logs"), path)
    aws = AwsConfig(endpoint_url="http://127.0.0.1:1", access_key_id="k", secret_access_key="s")
    merge_config(SkycoreConfig(aws=aws, docker=DockerConfig(host="unix:///d.sock")), path)
    merged = load_config(path)
    assert merged.section("gcp") == gcp and merged.section("aws") == aws
    assert merged.logs_dir == "/my/logs" and merged.docker.host == "unix:///d.sock"
    assert path.stat().st_mode & 0o777 == 0o600


def test_merge_replaces_the_sections_it_writes(tmp_path: Path):
    path = tmp_path / "config.yaml"
    old = AwsConfig(endpoint_url="http://127.0.0.1:1", access_key_id="old")
    save_config(SkycoreConfig(aws=old), path)
    new = AwsConfig(endpoint_url="http://127.0.0.1:9")
    merge_config(SkycoreConfig(aws=new), path)
    assert load_config(path).section("aws") == new


def test_merge_keeps_a_file_it_cannot_read_beside_it(tmp_path: Path):
    path = tmp_path / "config.yaml"
    path.write_text("aws: [unclosed\n")
    merge_config(SkycoreConfig(docker=DockerConfig(host="unix:///d.sock")), path)
    assert (tmp_path / "config.yaml.invalid").read_text() == "aws: [unclosed\n"
    assert load_config(path).docker.host == "unix:///d.sock"
