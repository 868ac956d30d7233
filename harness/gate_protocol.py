"""Deprecated path: the gate protocol contract is harness.gate.protocol (the public names
are in harness.plugin_api); each old name still resolves, with a warning."""

from skycore.deprecation import forwarder, moved_names

DEPRECATED = moved_names({
    "harness.plugin_api": ("Exchange", "GateProtocol", "Success", "UpstreamResponse"),
    "harness.gate.protocol": ("Answer", "Corrupted"),
})  # fmt: skip
"""The names this old path still resolves: name -> the module to import it from now."""
__getattr__ = forwarder(__name__, DEPRECATED)
