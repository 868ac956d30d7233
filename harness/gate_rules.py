"""Deprecated path: the gate's access rules are harness.gate.rules (the public names are in
harness.plugin_api); each old name still resolves, with a warning."""

from skycore.deprecation import forwarder, moved_names

DEPRECATED = moved_names({
    "harness.plugin_api": ("Access", "Kind", "Verdict", "decide"),
    "harness.gate.rules": ("ALLOW", "ANONYMOUS", "INVALID", "Bucket", "header", "split_path"),
})  # fmt: skip
"""The names this old path still resolves: name -> the module to import it from now."""
__getattr__ = forwarder(__name__, DEPRECATED)
