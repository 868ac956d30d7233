"""skycore's user configuration: ``$SKYCORE_HOME/config.yaml`` (default ``~/.skycore``).

The file says where the clouds are and which credentials to use. Pointing skycore at a real
cloud is a change of this file only: the local cloud (``harness up``) writes emulator
endpoints here; a real deployment leaves the endpoints empty.
"""

from __future__ import annotations

import os
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError


class ConfigError(Exception):
    """The config file is missing or malformed; the message says how to fix it."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class AwsConfig(_Strict):
    """S3 endpoint and the user's credentials."""

    endpoint_url: str | None = None
    access_key_id: str | None = None
    secret_access_key: str | None = None
    region: str = "us-east-1"


class GcpConfig(_Strict):
    """GCS endpoint, project and the user's bearer token (None: application default creds)."""

    api_endpoint: str | None = None
    project: str = "skycore"
    access_token: str | None = None


class AzureConfig(_Strict):
    """The user's storage account and key.

    ``endpoint_template`` builds a blob endpoint for any account, e.g.
    ``http://127.0.0.1:10000/{account}`` for an emulator; real Azure uses the default.
    """

    account_name: str
    account_key: str
    endpoint_template: str = "https://{account}.blob.core.windows.net"

    def blob_endpoint(self, account: str | None = None) -> str:
        """Blob service URL of ``account`` (the user's own by default)."""
        return self.endpoint_template.format(account=account or self.account_name)


class DockerConfig(_Strict):
    """Where the docker provider finds its engine and node image."""

    host: str = "unix:///var/run/docker.sock"
    image: str = "skycore-node:latest"


class SkycoreConfig(_Strict):
    """The whole config file. A section left out means that cloud is not configured."""

    aws: AwsConfig | None = None
    gcp: GcpConfig | None = None
    azure: AzureConfig | None = None
    docker: DockerConfig = Field(default_factory=DockerConfig)
    logs_dir: str = "~/sky_logs"

    def logs_path(self) -> Path:
        """Folder that holds one sub-folder of logs per launch."""
        return Path(self.logs_dir).expanduser()


def skycore_home() -> Path:
    """The folder holding config.yaml and state.db (``$SKYCORE_HOME`` or ``~/.skycore``)."""
    return Path(os.environ.get("SKYCORE_HOME", "~/.skycore")).expanduser()


def config_path() -> Path:
    """Path of the config file."""
    return skycore_home() / "config.yaml"


def load_config(path: Path | None = None) -> SkycoreConfig:
    """Read and validate the config file; a clear ConfigError if it is absent or wrong."""
    path = path or config_path()
    if not path.exists():
        raise ConfigError(
            f"No skycore config at {path}. Run 'harness up' to start the local cloud and write "
            "it, or write one by hand (see README.md, 'Configuration')."
        )
    try:
        data = yaml.safe_load(path.read_text()) or {}
        return SkycoreConfig.model_validate(data)
    except yaml.YAMLError as e:
        raise ConfigError(
            f"{path} is not valid YAML: {e}. Fix the file or rerun 'harness up'."
        ) from None
    except ValidationError as e:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in e.errors()
        )
        raise ConfigError(
            f"{path} is invalid ({problems}). Fix the file or rerun 'harness up'."
        ) from None


def save_config(config: SkycoreConfig, path: Path | None = None) -> Path:
    """Write the config file atomically, readable only by its owner (it holds secrets)."""
    path = path or config_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    text = yaml.safe_dump(config.model_dump(mode="json", exclude_none=True))
    # Created 0600 from the first byte: the file holds secrets.
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    tmp.replace(path)
    return path
