"""Deprecated path: the harness's process helpers are harness.cloud.procs (the public ones
are in harness.plugin_api); each old name still resolves, with a warning."""

from skycore.deprecation import forwarder, moved_names

DEPRECATED = moved_names({
    "harness.plugin_api": ("LOOPBACK", "free_port", "log_tail"),
    "harness.cloud.procs": (
        "HarnessProcessError", "Proc", "process_start_time", "is_port_conflict",
        "port_is_free", "wait_port_free", "start_process", "http_ok", "wait_healthy",
        "stop_process",
    ),
})  # fmt: skip
"""The names this old path still resolves: name -> the module to import it from now."""
__getattr__ = forwarder(__name__, DEPRECATED)
