"""Deprecated path: the gate protocol contract is harness.gate.protocol (the public names
are in harness.plugin_api); each old name still resolves, with a warning."""

from typing import Any

from skycore.deprecation import moved

DEPRECATED = {
    "Exchange": "harness.plugin_api",
    "GateProtocol": "harness.plugin_api",
    "Success": "harness.plugin_api",
    "UpstreamResponse": "harness.plugin_api",
    "Answer": "harness.gate.protocol",
    "Corrupted": "harness.gate.protocol",
}
"""The names this old path still resolves: name -> the module to import it from now."""


def __getattr__(name: str) -> Any:
    return moved(__name__, DEPRECATED, name)
