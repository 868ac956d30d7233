"""Deprecated path: the harness's process helpers are harness.cloud.procs (the public ones
are in harness.plugin_api); each old name still resolves, with a warning."""

from typing import Any

from skycore.deprecation import moved

DEPRECATED = {
    "LOOPBACK": "harness.plugin_api",
    "free_port": "harness.plugin_api",
    "log_tail": "harness.plugin_api",
    "HarnessProcessError": "harness.cloud.procs",
    "Proc": "harness.cloud.procs",
    "process_start_time": "harness.cloud.procs",
    "is_port_conflict": "harness.cloud.procs",
    "port_is_free": "harness.cloud.procs",
    "wait_port_free": "harness.cloud.procs",
    "start_process": "harness.cloud.procs",
    "http_ok": "harness.cloud.procs",
    "wait_healthy": "harness.cloud.procs",
    "stop_process": "harness.cloud.procs",
}
"""The names this old path still resolves: name -> the module to import it from now."""


def __getattr__(name: str) -> Any:
    return moved(__name__, DEPRECATED, name)
