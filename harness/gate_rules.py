"""Deprecated path: the gate's access rules are harness.gate.rules (the public names are in
harness.plugin_api); each old name still resolves, with a warning."""

from typing import Any

from skycore.deprecation import moved

DEPRECATED = {
    "Access": "harness.plugin_api",
    "Kind": "harness.plugin_api",
    "Verdict": "harness.plugin_api",
    "decide": "harness.plugin_api",
    "ALLOW": "harness.gate.rules",
    "ANONYMOUS": "harness.gate.rules",
    "INVALID": "harness.gate.rules",
    "Bucket": "harness.gate.rules",
    "header": "harness.gate.rules",
    "split_path": "harness.gate.rules",
}
"""The names this old path still resolves: name -> the module to import it from now."""


def __getattr__(name: str) -> Any:
    return moved(__name__, DEPRECATED, name)
