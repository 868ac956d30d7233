"""Deprecated path: the S3 gate protocol is harness.emulators.s3_gate.protocol (the S3GateProtocol
class is in harness.plugin_api); each old name still resolves, with a warning."""

from typing import Any

from skycore.deprecation import moved

DEPRECATED = {
    "S3GateProtocol": "harness.plugin_api",
    "classify_s3": "harness.emulators.s3_gate.protocol",
}
"""The names this old path still resolves: name -> the module to import it from now."""


def __getattr__(name: str) -> Any:
    return moved(__name__, DEPRECATED, name)
