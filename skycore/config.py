"""skycore's user configuration: ``$SKYCORE_HOME/config.yaml`` (default ``~/.skycore``).

The file says where the clouds are and which credentials to use. Pointing skycore at a real
cloud is a change of this file only: the local cloud (``harness up``) writes emulator
endpoints here; a real deployment leaves the endpoints empty.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml
from filelock import FileLock
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from skycore.errors import ConfigError as ConfigError
from skycore.stores import broken_store_names, config_sections, section_model


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class DockerConfig(_Strict):
    """Where the docker provider finds its engine and node image."""

    host: str = "unix:///var/run/docker.sock"
    image: str = "skycore-node:latest"


class SkycoreConfig(BaseModel):
    """The whole config file: ``docker``, ``logs_dir`` and one section per configured store.

    Store sections are named and modelled by the registered stores (``config_section`` /
    ``config_model``); a section left out means that store is not configured, and a section
    no store claims is an error that lists the known ones.
    """

    model_config = ConfigDict(extra="allow")

    docker: DockerConfig = Field(default_factory=DockerConfig)
    logs_dir: str = "~/sky_logs"

    @model_validator(mode="after")
    def _store_sections(self) -> SkycoreConfig:
        extra = self.__pydantic_extra__ or {}
        for key, value in list(extra.items()):
            store = section_model(key)
            if store is None and key in broken_store_names():
                continue  # the store's package failed to load (it was warned about)
            if store is None:
                known = ", ".join(["docker", "logs_dir", *config_sections()])
                raise ValueError(
                    f"unknown section '{key}' (no registered store uses it; known: {known})"
                )
            if value is None:
                del extra[key]
            elif not isinstance(value, store.config_model):
                raw = value.model_dump() if isinstance(value, BaseModel) else value
                try:
                    extra[key] = store.config_model.model_validate(raw)
                except ValidationError as e:
                    raise ValueError(
                        "; ".join(
                            ".".join(str(p) for p in (key, *err["loc"]))
                            + ": "
                            + err["msg"].removeprefix("Value error, ")
                            for err in e.errors()
                        )
                    ) from None
        return self

    def section(self, name: str) -> Any:
        """The store section ``name`` (a store's config model), or None if absent."""
        return (self.__pydantic_extra__ or {}).get(name)

    def sections(self) -> dict[str, BaseModel]:
        """Every store section present, by name."""
        return dict(self.__pydantic_extra__ or {})

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
            ": ".join(
                x
                for x in (
                    ".".join(str(p) for p in err["loc"]),
                    err["msg"].removeprefix("Value error, "),
                )
                if x
            )
            for err in e.errors()
        )
        raise ConfigError(
            f"{path} is invalid ({problems}). Fix the file or rerun 'harness up'."
        ) from None


def save_config(config: SkycoreConfig, path: Path | None = None) -> Path:
    """Write the config file atomically, readable only by its owner (it holds secrets)."""
    path = path or config_path()
    _write_private(path, yaml.safe_dump(config.model_dump(mode="json", exclude_none=True)))
    return path


def merge_config(config: SkycoreConfig, path: Path | None = None) -> Path:
    """Write ``config``'s sections into the config file and keep every other section the
    file has (another store's, a ``logs_dir`` set by hand): under a lock, atomically. A
    file that is not a YAML mapping is kept beside it as ``config.yaml.invalid``."""
    path = path or config_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(path.with_name(path.name + ".lock")), timeout=60):
        kept: dict[str, Any] = {}
        if path.exists():
            try:
                loaded = yaml.safe_load(path.read_text())
            except yaml.YAMLError:
                loaded = None
            if isinstance(loaded, dict):
                kept = loaded
            elif loaded is not None or path.read_text().strip():
                path.replace(path.with_name(path.name + ".invalid"))
        merged = kept | config.model_dump(mode="json", exclude_none=True, exclude_unset=True)
        _write_private(path, yaml.safe_dump(merged))
    return path


def _write_private(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` in one step; the file is 0600 from its first byte
    (it holds secrets)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    tmp.replace(path)
