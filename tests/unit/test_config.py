"""skycore config: round-trip, strict validation, clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from skycore.config import (
    ConfigError,
    DockerConfig,
    SkycoreConfig,
    load_config,
    merge_config,
    save_config,
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


def test_unknown_section_lists_the_registered_ones(tmp_path: Path):
    path = tmp_path / "config.yaml"
    path.write_text("b2:\n  key: x\n")
    with pytest.raises(ConfigError) as e:
        load_config(path)
    msg = str(e.value)
    assert "'b2'" in msg and "\n" not in msg
    for section in ("aws", "gcp", "azure", "r2", "docker"):
        assert section in msg


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
