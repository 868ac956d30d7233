"""The call signatures of the public API are frozen as well as its names: the methods an
outside package may override or call (an emulator's ``prepare``, ``command`` and
``config_section``, a gate protocol's hooks, a store's methods) and the helper functions.

A signature is its parameters' names, order and kinds, and which have defaults. A change
here breaks packages written against an earlier release: where a signature must grow, the
harness keeps calling an old override the old way (harness.emulators.old_signatures, with a
PluginAPIDeprecationWarning), ``OLD_SIGNATURES`` records it, and the table below changes in
the same commit.
"""

from __future__ import annotations

import importlib
import inspect
import warnings
from pathlib import Path
from typing import Any

import pytest

from harness.accounts import OTHER, USER
from skycore.deprecation import SHOWN_ENV, PluginAPIDeprecationWarning

CLASSES = {
    "harness.plugin_api": ("RunningEmulator", "S3Emulator", "GateProtocol", "S3GateProtocol"),
    "skycore.plugin_api": ("AbstractStore", "S3Store", "MountRecipe"),
}
"""The public classes whose own public methods are frozen."""

SIGNATURES: dict[str, str] = {
    "skycore.plugin_api.MountRecipe.describe": "(self)",
    "skycore.plugin_api.MountRecipe.drain_script": "(self, mount_paths, timeout_s)",
    "skycore.plugin_api.MountRecipe.mount_script": "(self, mount)",
    "skycore.plugin_api.MountRecipe.prepare_node": "(self, runner)",
    "skycore.plugin_api.MountRecipe.unmount_script": "(self, mount_paths)",
    "harness.plugin_api.RunningEmulator.attach": "(cls, target)",
    "harness.plugin_api.RunningEmulator.bucket_exists": "(self, name, owner=)",
    "harness.plugin_api.RunningEmulator.bucket_url": "(self, name, owner=)",
    "harness.plugin_api.RunningEmulator.check_public_possible": "(self)",
    "harness.plugin_api.RunningEmulator.client": "(self, owner=)",
    "harness.plugin_api.RunningEmulator.command": "(cls, home, port, gate_port)",
    "harness.plugin_api.RunningEmulator.config_section": "(self, owner=)",
    "harness.plugin_api.RunningEmulator.create_bucket": "(self, name, owner, public)",
    "harness.plugin_api.RunningEmulator.delete_bucket": "(self, name)",
    "harness.plugin_api.RunningEmulator.delete_object": "(self, bucket, key, owner=)",
    "harness.plugin_api.RunningEmulator.gate_protocol": "(cls)",
    "harness.plugin_api.RunningEmulator.healthy": "(self, timeout=)",
    "harness.plugin_api.RunningEmulator.is_public": "(self, name, owner=)",
    "harness.plugin_api.RunningEmulator.launch": "(cls, home, ports=, prefer=)",
    "harness.plugin_api.RunningEmulator.list_buckets": "(self, owner=)",
    "harness.plugin_api.RunningEmulator.list_keys": "(self, bucket, owner=)",
    "harness.plugin_api.RunningEmulator.load": "(cls, home)",
    "harness.plugin_api.RunningEmulator.make_bucket": "(self, name, owner=, public=, objects=)",
    "harness.plugin_api.RunningEmulator.make_public": "(self, name, owner=)",
    "harness.plugin_api.RunningEmulator.marker": "(cls)",
    "harness.plugin_api.RunningEmulator.prepare": "(cls, home)",
    "harness.plugin_api.RunningEmulator.rclone_config": "(self, owner=, bucket=)",
    "harness.plugin_api.RunningEmulator.read_object": "(self, bucket, key, owner=)",
    "harness.plugin_api.RunningEmulator.restart_gate": "(self)",
    "harness.plugin_api.RunningEmulator.sdk_errors": "(cls)",
    "harness.plugin_api.RunningEmulator.status": "(self)",
    "harness.plugin_api.RunningEmulator.stop": "(self)",
    "harness.plugin_api.RunningEmulator.supports": "(cls, capability)",
    "harness.plugin_api.RunningEmulator.upstream_answers": "(self, timeout=)",
    "harness.plugin_api.RunningEmulator.use_target": "(self, target)",
    "harness.plugin_api.RunningEmulator.write_object": "(self, bucket, key, data, owner=)",
    "harness.plugin_api.S3Emulator.bucket_exists": "(self, name, owner=)",
    "harness.plugin_api.S3Emulator.bucket_url": "(self, name, owner=)",
    "harness.plugin_api.S3Emulator.check_public_possible": "(self)",
    "harness.plugin_api.S3Emulator.client": "(self, owner=)",
    "harness.plugin_api.S3Emulator.command": "(cls, home, port, gate_port)",
    "harness.plugin_api.S3Emulator.config_section": "(self, owner=)",
    "harness.plugin_api.S3Emulator.create_bucket": "(self, name, owner, public)",
    "harness.plugin_api.S3Emulator.delete_bucket": "(self, name)",
    "harness.plugin_api.S3Emulator.delete_object": "(self, bucket, key, owner=)",
    "harness.plugin_api.S3Emulator.endpoint_of": "(self, owner)",
    "harness.plugin_api.S3Emulator.gate_protocol": "(cls)",
    "harness.plugin_api.S3Emulator.is_public": "(self, name, owner=)",
    "harness.plugin_api.S3Emulator.list_buckets": "(self, owner=)",
    "harness.plugin_api.S3Emulator.list_keys": "(self, bucket, owner=)",
    "harness.plugin_api.S3Emulator.make_public": "(self, name, owner=)",
    "harness.plugin_api.S3Emulator.prepare": "(cls, home)",
    "harness.plugin_api.S3Emulator.rclone_config": "(self, owner=, bucket=)",
    "harness.plugin_api.S3Emulator.read_object": "(self, bucket, key, owner=)",
    "harness.plugin_api.S3Emulator.sdk_errors": "(cls)",
    "harness.plugin_api.S3Emulator.upstream_keys": "(cls)",
    "harness.plugin_api.S3Emulator.use_target": "(self, target)",
    "harness.plugin_api.S3Emulator.write_object": "(self, bucket, key, data, owner=)",
    "harness.plugin_api.GateProtocol.after_success": "(self, ex, access, identity, up, data)",
    "harness.plugin_api.GateProtocol.answer": "(self, ex, access, identity)",
    "harness.plugin_api.GateProtocol.answers": "(self, access)",
    "harness.plugin_api.GateProtocol.authenticate": "(self, ex, access, identity)",
    "harness.plugin_api.GateProtocol.classify": "(self, ex)",
    "harness.plugin_api.GateProtocol.corrupt_answer": "(self, ex, access, up, body)",
    "harness.plugin_api.GateProtocol.corrupt_reads_body": "(self, ex, access)",
    "harness.plugin_api.GateProtocol.corrupts": "(self, ex, access)",
    "harness.plugin_api.GateProtocol.decide": "(self, ex, access, identity)",
    "harness.plugin_api.GateProtocol.error_body": "(self, ex, verdict, access)",
    "harness.plugin_api.GateProtocol.error_headers": "(self, verdict)",
    "harness.plugin_api.GateProtocol.fault_verdict": "(self, status)",
    "harness.plugin_api.GateProtocol.malformed_verdict": "(self, message)",
    "harness.plugin_api.GateProtocol.on_success": "(self, done)",
    "harness.plugin_api.GateProtocol.refuse_answer": "(self, ex, access, status, headers)",
    "harness.plugin_api.GateProtocol.response_headers": "(self, ex, access, identity)",
    "harness.plugin_api.GateProtocol.upstream_headers": "(self, ex, access, identity)",
    "harness.plugin_api.GateProtocol.upstream_target": "(self, ex, access, identity)",
    "harness.plugin_api.GateProtocol.wants_whole_response": "(self, ex, access)",
    "harness.plugin_api.S3GateProtocol.classify": "(self, ex)",
    "harness.plugin_api.S3GateProtocol.corrupt_answer": "(self, ex, access, up, body)",
    "harness.plugin_api.S3GateProtocol.decide": "(self, ex, access, identity)",
    "harness.plugin_api.S3GateProtocol.upstream_headers": "(self, ex, access, identity)",
    "harness.plugin_api.S3GateProtocol.upstream_target": "(self, ex, access, identity)",
    "harness.plugin_api.S3GateProtocol.wants_whole_response": "(self, ex, access)",
    "skycore.plugin_api.AbstractStore.access": "(self)",
    "skycore.plugin_api.AbstractStore.cached_mount_options": "(self, options)",
    "skycore.plugin_api.AbstractStore.check_account": "(cls, config)",
    "skycore.plugin_api.AbstractStore.copy_command": "(self, dst, prefix=, anonymous=, env=)",
    "skycore.plugin_api.AbstractStore.create": "(self)",
    "skycore.plugin_api.AbstractStore.default_account": "(cls, section)",
    "skycore.plugin_api.AbstractStore.delete": "(self)",
    "skycore.plugin_api.AbstractStore.describe_account": "(cls, section)",
    "skycore.plugin_api.AbstractStore.error_status": "(cls, e)",
    "skycore.plugin_api.AbstractStore.error_text": "(cls, e)",
    "skycore.plugin_api.AbstractStore.exists": "(self)",
    "skycore.plugin_api.AbstractStore.fail": "(self, action, e)",
    "skycore.plugin_api.AbstractStore.is_object": "(self, key)",
    "skycore.plugin_api.AbstractStore.list_keys": "(self, prefix=)",
    "skycore.plugin_api.AbstractStore.mount_command":
        "(self, dst, mode, prefix=, anonymous=, options=, env=)",
    "skycore.plugin_api.AbstractStore.name_problem": "(cls, name)",
    "skycore.plugin_api.AbstractStore.name_taken": "(self)",
    "skycore.plugin_api.AbstractStore.not_yours": "(self, action)",
    "skycore.plugin_api.AbstractStore.parse_location": "(cls, url, rest, field)",
    "skycore.plugin_api.AbstractStore.rclone_config": "(cls, section)",
    "skycore.plugin_api.AbstractStore.rclone_path": "(self, prefix=, anonymous=)",
    "skycore.plugin_api.AbstractStore.rclone_remote": "(self, anonymous=)",
    "skycore.plugin_api.AbstractStore.rclone_remotes": "(cls, options, credentials, anonymous=)",
    "skycore.plugin_api.AbstractStore.remote_name": "(cls, anonymous=)",
    "skycore.plugin_api.AbstractStore.run_parallel": "(fn, keys, batch)",
    "skycore.plugin_api.AbstractStore.upload": "(self, root, files, prefix=, progress=, workers=)",
    "skycore.plugin_api.AbstractStore.upload_file": "(self, path, key)",
    "skycore.plugin_api.AbstractStore.upload_mount_options": "(self, mode, options)",
    "skycore.plugin_api.S3Store.access": "(self)",
    "skycore.plugin_api.S3Store.create": "(self)",
    "skycore.plugin_api.S3Store.delete": "(self)",
    "skycore.plugin_api.S3Store.describe_account": "(cls, section)",
    "skycore.plugin_api.S3Store.error_status": "(cls, e)",
    "skycore.plugin_api.S3Store.exists": "(self)",
    "skycore.plugin_api.S3Store.is_object": "(self, key)",
    "skycore.plugin_api.S3Store.list_keys": "(self, prefix=)",
    "skycore.plugin_api.S3Store.name_problem": "(cls, name)",
    "skycore.plugin_api.S3Store.rclone_config": "(cls, section)",
    "skycore.plugin_api.S3Store.rclone_provider_for": "(cls, section)",
    "skycore.plugin_api.S3Store.upload_file": "(self, path, key)",
    "harness.plugin_api.contract_checks": "(emulator_class)",
    "harness.plugin_api.decide": "(access, identity, buckets)",
    "harness.plugin_api.free_port": "(exclude=)",
    "harness.plugin_api.free_ports": "(n, exclude=)",
    "harness.plugin_api.harness_home": "(home=, *, create=)",
    "harness.plugin_api.install_from_pypi": "(package_spec, target_name, home=, pip_args=)",
    "harness.plugin_api.installing_notice": "(message)",
    "harness.plugin_api.log_tail": "(path, lines=)",
    "harness.plugin_api.package_bin_dir": "(folder)",
    "harness.plugin_api.package_dir": "(target_name, home=)",
    "harness.plugin_api.package_env": "(folder)",
    "harness.plugin_api.rclone_binary": "()",
}  # fmt: skip

OLD_SIGNATURES: dict[str, str] = {
    "harness.plugin_api.RunningEmulator.config_section": "(self)",
}
"""Overrides of an earlier release's signature that the harness still calls the old way."""


def shape(fn: Any) -> str:
    """``fn``'s call signature: names, order, kinds and which parameters have defaults."""
    out: list[str] = []
    star = False
    for p in inspect.signature(fn).parameters.values():
        if p.kind is p.VAR_POSITIONAL:
            out.append(f"*{p.name}")
            star = True
            continue
        if p.kind is p.VAR_KEYWORD:
            out.append(f"**{p.name}")
            continue
        if p.kind is p.KEYWORD_ONLY and not star:
            out.append("*")
            star = True
        out.append(p.name + ("=" if p.default is not p.empty else ""))
    return "(" + ", ".join(out) + ")"


def current() -> dict[str, str]:
    """Every frozen name's signature today."""
    found: dict[str, str] = {}
    for path, classes in CLASSES.items():
        module = importlib.import_module(path)
        for name in classes:
            cls = getattr(module, name)
            for attr, value in vars(cls).items():
                if attr.startswith("_"):
                    continue
                fn = value.__func__ if isinstance(value, staticmethod | classmethod) else value
                if inspect.isfunction(fn):
                    found[f"{path}.{name}.{attr}"] = shape(fn)
    module = importlib.import_module("harness.plugin_api")
    for name in module.__all__:
        value = getattr(module, name)
        if inspect.isfunction(value):
            found[f"harness.plugin_api.{name}"] = shape(value)
    return found


def test_the_public_signatures_are_frozen() -> None:
    now = current()
    changed = {k: (v, now.get(k)) for k, v in SIGNATURES.items() if now.get(k) != v}
    assert not changed, (
        f"public signatures changed (frozen, now): {changed}. Keep the old call working "
        "(harness.emulators.old_signatures) and record it in OLD_SIGNATURES"
    )
    added = sorted(set(now) - set(SIGNATURES))
    assert not added, f"new public methods: freeze their signatures here: {added}"


def test_an_old_config_section_override_is_called_the_old_way_and_warns_once(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from harness.plugin_api import S3Emulator

    monkeypatch.delenv(SHOWN_ENV, raising=False)
    with pytest.warns(PluginAPIDeprecationWarning, match=r"config_section\(self\) has the") as w:

        class OldEmulator(S3Emulator):
            store = "s3"

            def config_section(self) -> Any:  # type: ignore[override]
                return ("old", self.store)

    assert len(w) == 1 and w[0].filename == __file__  # points at the package's class
    emulator: Any = OldEmulator(tmp_path, None)  # type: ignore[arg-type]
    monkeypatch.setattr(OldEmulator, "endpoint", "http://127.0.0.1:1", raising=False)
    assert emulator.config_section(USER) == ("old", "s3")
    assert emulator.config_section() == ("old", "s3")
    other = emulator.config_section(OTHER)  # the base class's, which knows the other account
    assert other.access_key_id == OldEmulator.keys[OTHER].access_key_id
    with warnings.catch_warnings():
        warnings.simplefilter("error", PluginAPIDeprecationWarning)

        class Again(S3Emulator):  # another class: warns for its own name only
            store = "oldsig2"

            def config_section(self, owner: str = USER) -> Any:
                return owner

    assert Again(tmp_path, None).config_section(OTHER) == OTHER  # type: ignore[arg-type]


def test_the_old_signatures_are_those_the_harness_adapts() -> None:
    from harness.emulators import old_signatures

    for name, old in OLD_SIGNATURES.items():
        method = name.rsplit(".", 1)[-1]
        assert method in (old_signatures.__doc__ or ""), name
        assert old.startswith("(self")
