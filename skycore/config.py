"""skycore's user configuration: ``$SKYCORE_HOME/config.yaml`` (default ``~/.skycore``).

The file says where the clouds are and which credentials to use. Pointing skycore at a real
cloud is a change of this file only: the local cloud (``harness up``) writes emulator
endpoints here; a real deployment leaves the endpoints empty.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import yaml
from filelock import FileLock
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    model_validator,
)

from skycore.errors import ConfigError as ConfigError
from skycore.stores import (
    GROUP,
    broken_store_names,
    config_sections,
    section_model,
    store_classes,
)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class DockerConfig(_Strict):
    """Where the docker provider finds its engine and node image."""

    host: str = "unix:///var/run/docker.sock"
    image: str = "skycore-node:latest"


class SkycoreConfig(BaseModel):
    """The whole config file: ``docker``, ``logs_dir``, ``mount_recipe`` (who mounts buckets
    on nodes: skycore.storage.recipes) and one section per configured store.

    Store sections are named and modelled by the registered stores (``config_section`` /
    ``config_model``); a section left out means that store is not configured. A section no
    installed store claims (its package is not in this environment, or fails to load) is
    kept as it is, unchecked, with one warning line per process (:func:`warn_unclaimed`).
    """

    model_config = ConfigDict(extra="allow")

    docker: DockerConfig = Field(default_factory=DockerConfig)
    logs_dir: str = "~/sky_logs"
    mount_recipe: str = "skycore"

    @model_validator(mode="after")
    def _store_sections(self, info: ValidationInfo) -> SkycoreConfig:
        extra = self.__pydantic_extra__ or {}
        context = info.context if isinstance(info.context, dict) else {}
        for key, value in list(extra.items()):
            store = section_model(key)
            if store is None:
                warn_unclaimed(key, context.get("path"), context.get("origins", {}))
                continue  # kept unchecked, as it is, and written back as it is
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
        context = {"path": path, "origins": read_origins(path)}
        return SkycoreConfig.model_validate(data, context=context)
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
    file that is not a YAML mapping is kept beside it as ``config.yaml.invalid``. Each store
    section written is recorded in the side file :func:`origins_path` with its package."""
    path = path or config_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    with _file_lock(path):
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
        written = config.model_dump(mode="json", exclude_none=True, exclude_unset=True)
        _write_private(path, yaml.safe_dump(kept | written))
        origins = read_origins(path)
        for key in written:
            store = section_model(key)
            if store is not None:
                origins[key] = store_origin(store.store_name)
        _write_origins(path, origins)
    return path


def forget_sections(sections: list[str], path: Path | None = None) -> list[str]:
    """Remove ``sections`` from the config file (and their origins), under the merge lock;
    every other section is kept as it is. Returns the sections that were there."""
    path = path or config_path()
    if not path.exists():
        return []
    with _file_lock(path):
        try:
            loaded = yaml.safe_load(path.read_text())
        except yaml.YAMLError:
            return []
        if not isinstance(loaded, dict):
            return []
        gone = [name for name in sections if name in loaded]
        if gone:
            _write_private(path, yaml.safe_dump({k: v for k, v in loaded.items() if k not in gone}))
        origins = read_origins(path)
        if any(name in origins for name in sections):
            _write_origins(path, {k: v for k, v in origins.items() if k not in sections})
        return gone


def file_sections(path: Path | None = None) -> list[str]:
    """The top-level keys of the config file as written (nothing validated); [] when it is
    absent or not a YAML mapping."""
    path = path or config_path()
    try:
        loaded = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError):
        return []
    return [str(key) for key in loaded] if isinstance(loaded, dict) else []


def store_sections(store: str, path: Path | None = None) -> list[str]:
    """The sections of the config file that belong to store ``store``: its registered
    ``config_section``, else (no package here registers it) the sections recorded as written
    for it, else the section named like it."""
    present = file_sections(path)
    cls = store_classes().get(store)
    if cls is not None:
        return [cls.config_section] if cls.config_section in present else []
    recorded = [
        k for k, v in read_origins(path or config_path()).items() if v.get("store") == store
    ]
    return [k for k in recorded if k in present] or ([store] if store in present else [])


# ---- who wrote a section ----------------------------------------------------------------


def origins_path(path: Path | None = None) -> Path:
    """The side file beside the config file (``config.origins.json``) that records, per
    store section ``harness up`` wrote, the store and the package (distribution) behind it.
    A side file, so that config.yaml stays what any skycore version reads."""
    path = path or config_path()
    return path.with_name(f"{path.stem}.origins.json")


def read_origins(path: Path | None = None) -> dict[str, dict[str, str]]:
    """section -> {"store", "package", "version"} of the sections recorded as written; {}
    when nothing is recorded (or the side file is unreadable)."""
    try:
        data = json.loads(origins_path(path).read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {
        str(k): {str(a): str(b) for a, b in v.items()}
        for k, v in data.items()
        if isinstance(v, dict)
    }


def _write_origins(path: Path, origins: dict[str, dict[str, str]]) -> None:
    _write_private(origins_path(path), json.dumps(origins, indent=1, sort_keys=True) + "\n")


def store_origin(store: str) -> dict[str, str]:
    """The store and the distribution that registers it (entry-point group skycore.stores);
    the package is the store class's top-level module when no distribution declares it."""
    for ep in entry_points(group=GROUP, name=store):
        dist = getattr(ep, "dist", None)
        if dist is not None:
            return {"store": store, "package": dist.name, "version": dist.version}
    cls = store_classes().get(store)
    package = cls.__module__.split(".")[0] if cls is not None else store
    return {"store": store, "package": package, "version": ""}


_warned: set[str] = set()
_warned_lock = threading.Lock()


def warn_unclaimed(
    section: str, path: Path | None = None, origins: dict[str, dict[str, str]] | None = None
) -> None:
    """One stderr line, once per process per section, for a section no installed store
    claims: kept and unused, who likely wrote it, and the two fixes. Silent for a store
    whose package is installed but fails to load (that package's own warning names it)."""
    origin = (origins or {}).get(section, {})
    store = origin.get("store") or section
    broken = broken_store_names()
    if section in broken or store in broken:
        return
    with _warned_lock:
        if section in _warned:
            return
        _warned.add(section)
    if origin.get("package"):
        version = f" {origin['version']}" if origin.get("version") else ""
        who = f"'harness up' wrote it for store '{store}' of package {origin['package']}{version}"
    else:
        who = (
            f"likely the section of store '{store}', written from an environment with the "
            "package that registers it (entry-point group skycore.stores)"
        )
    known = ", ".join(["docker", "logs_dir", *config_sections()])
    sys.stderr.write(
        f"warning: {path or 'config.yaml'}: section '{section}' is kept but unused: no "
        f"installed store claims it ({who}). Install that package into this environment to "
        f"use it, or remove the section with 'harness down --store {store} --forget' (a typo? "
        f"known sections: {known}).\n"
    )


def _file_lock(path: Path) -> FileLock:
    """The lock of every read-modify-write of the config file."""
    return FileLock(str(path.with_name(path.name + ".lock")), timeout=60)


def _write_private(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` in one step; the file is 0600 from its first byte
    (it holds secrets)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    tmp.replace(path)
