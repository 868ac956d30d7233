"""Deprecated path: the S3 gate protocol is harness.emulators.s3_gate.protocol (the
S3GateProtocol class is in harness.plugin_api); each old name still resolves, with a
warning."""

from skycore.deprecation import forwarder, moved_names

DEPRECATED = moved_names({
    "harness.plugin_api": ("S3GateProtocol",),
    "harness.emulators.s3_gate.protocol": ("classify_s3",),
})  # fmt: skip
"""The names this old path still resolves: name -> the module to import it from now."""
__getattr__ = forwarder(__name__, DEPRECATED)
