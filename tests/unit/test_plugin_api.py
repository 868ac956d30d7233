"""The public API of outside store packages (skycore.plugin_api, harness.plugin_api) and
the old import paths that still resolve with a warning.

``PUBLISHED`` is frozen: every name ever published by a documented path. A name may move
from a module's ``__all__`` into its ``DEPRECATED`` table (it then still resolves, to the
same object, and warns once naming its new home); it may never just disappear.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Iterator

import pytest

from skycore.deprecation import SHOWN_ENV, PluginAPIDeprecationWarning

API = ("skycore.plugin_api", "harness.plugin_api")

PUBLISHED: dict[str, tuple[str, ...]] = {
    "skycore.plugin_api": (
        "AbstractStore", "AccessInfo", "AwsConfig", "BucketMount", "BucketNameError",
        "MountRecipe", "PluginAPIDeprecationWarning", "S3Store", "StorageAccessError",
        "StorageError", "StorageMode", "StorageSpecError", "StoreLoadError", "UnknownStoreError",
        "UploadResult",
    ),
    "harness.plugin_api": (
        "LOOPBACK", "OTHER", "UNKNOWN", "USER", "Access", "AccessKey", "CloudError",
        "EmulatorError", "Exchange", "GateProtocol", "Kind", "RunningEmulator", "S3Emulator",
        "S3GateProtocol", "Success", "UpstreamResponse", "Verdict", "decide", "free_port",
        "harness_home", "installing_notice", "log_tail", "rclone_binary", "AccessFeatures",
        "MECHANISMS", "S3_FEATURES", "PublicAccessUnavailable", "BUCKET_ROUTES", "OBJECT_ROUTES",
        "Route", "Table",
    ),
    "harness.procs": (
        "LOOPBACK", "HarnessProcessError", "Proc", "free_port", "http_ok", "is_port_conflict",
        "log_tail", "port_is_free", "process_start_time", "start_process", "stop_process",
        "wait_healthy", "wait_port_free",
    ),
    "harness.nodes": (
        "NODE_RCLONE", "PACKAGES", "RECIPE_VERSION", "REPOSITORY", "SUITE", "build_rootfs",
        "debian_mirror", "ensure_node_image", "ensure_user_image", "image_tag", "rclone_binary",
        "recipe_hash", "user_image_tag",
    ),
    "harness.plugin": (
        "CAPABILITY_MARKER", "all_store_params", "explicit_store_selection",
        "require_capability", "selected_stores", "store_params",
    ),
    "harness.gate_protocol": (
        "Answer", "Corrupted", "Exchange", "GateProtocol", "Success", "UpstreamResponse",
    ),
    "harness.gate_rules": (
        "ALLOW", "ANONYMOUS", "INVALID", "Access", "Bucket", "Kind", "Verdict", "decide",
        "header", "split_path",
    ),
    "harness.emulators.s3_protocol": ("S3GateProtocol", "classify_s3"),
    # Documented homes that did not move (no warning): the plugin API re-exports them.
    "harness.accounts": ("OTHER", "UNKNOWN", "USER"),
    "harness.emulators.base": ("EmulatorError", "RunningEmulator", "installing_notice"),
    "harness.emulators.s3": ("AccessKey", "S3Emulator"),
    "harness.errors": ("CloudError",),
    "harness.paths": ("harness_home",),
    "harness.gate.protocol": ("Exchange", "GateProtocol", "Success", "UpstreamResponse"),
    "harness.gate.rules": ("decide",),
    "skycore.storage.s3": ("AwsConfig", "S3Store"),
    "skycore.storage.api": ("AbstractStore", "AccessInfo", "UploadResult"),
    "skycore.storage": (
        "AbstractStore", "AccessInfo", "StorageAccessError", "StorageError", "StorageSpecError",
    ),
}  # fmt: skip


@pytest.fixture(autouse=True)
def fresh_warnings(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No old name counted as shown already (each test sees the first use)."""
    monkeypatch.delenv(SHOWN_ENV, raising=False)
    yield


def deprecated_table(module: object) -> dict[str, str]:
    return dict(getattr(module, "DEPRECATED", {}))


@pytest.mark.parametrize("path", API)
def test_every_public_name_is_documented_and_resolves(path: str) -> None:
    module = importlib.import_module(path)
    doc = module.__doc__ or ""
    undocumented = [n for n in module.__all__ if f"- ``{n}``: " not in doc]
    assert not undocumented, f"{path}: document each name ('- ``NAME``: ...')"
    assert sorted(module.__all__) == sorted(set(module.__all__))
    for name in module.__all__:
        assert getattr(module, name) is not None


@pytest.mark.parametrize(("path", "name"), [(p, n) for p, ns in PUBLISHED.items() for n in ns])
def test_a_published_name_is_public_or_deprecated(path: str, name: str) -> None:
    module = importlib.import_module(path)
    table = deprecated_table(module)
    public = name in getattr(module, "__all__", ()) or (path not in API and name not in table)
    if public:
        assert name not in table, f"{path}.{name} is both public and deprecated"
        with warnings.catch_warnings():
            warnings.simplefilter("error", PluginAPIDeprecationWarning)
            assert hasattr(module, name), f"{path}.{name} was published: keep it or deprecate it"
        return
    assert name in table, f"{path}.{name} was published: add it to {path}.DEPRECATED"
    new = table[name]
    with pytest.warns(PluginAPIDeprecationWarning) as caught:
        value = getattr(module, name)
    (warning,) = caught
    assert str(warning.message).startswith(f"{path}.{name} is deprecated: import {name} from {new}")
    assert value is getattr(importlib.import_module(new), name)


@pytest.mark.parametrize("path", [p for p in PUBLISHED if p not in API])
def test_an_old_path_points_at_the_plugin_api_when_the_name_is_public(path: str) -> None:
    module = importlib.import_module(path)
    public = {n for p in API for n in importlib.import_module(p).__all__}
    for name, new in deprecated_table(module).items():
        assert (new in API) == (name in public), f"{path}.{name} -> {new}"


def test_an_old_name_warns_once_and_its_neighbours_warn_too() -> None:
    with pytest.warns(PluginAPIDeprecationWarning, match=r"harness\.procs\.LOOPBACK"):
        from harness.procs import LOOPBACK
    with warnings.catch_warnings():
        warnings.simplefilter("error", PluginAPIDeprecationWarning)
        from harness.procs import LOOPBACK as again  # shown already: silent
    assert LOOPBACK == again == "127.0.0.1"
    with pytest.warns(
        PluginAPIDeprecationWarning, match=r"harness\.procs\.Proc .* harness\.processes"
    ):
        from harness.procs import Proc  # noqa: F401


def test_an_unknown_name_of_an_old_path_is_an_attribute_error() -> None:
    with pytest.raises(ImportError, match="cannot import name 'nope'"):
        from harness.procs import nope  # type: ignore[attr-defined]  # noqa: F401


def test_the_fleet_names_of_harness_emulators_warn() -> None:
    import harness.emulators
    from harness.emulators import fleet

    with pytest.warns(PluginAPIDeprecationWarning, match="harness.emulators.fleet"):
        assert harness.emulators.stop_one is fleet.stop_one
