"""The storage emulators of the local cloud, each behind its access gate.

- base: the contract every emulator implements (RunningEmulator); registry: the emulators
  registered under the entry-point group ``harness.emulators``; fleet: start, reuse, stop
  and report all of them.
- launcher: sealing an emulator in its own network namespace and starting its gate;
  gate_client: the gate's admin API; records: the state file, write events, EmulatorError.
- One module per store with the emulator and its test helpers (``<store>.py``), apart from
  the gate protocol that runs inside the gate (``<store>_protocol.py``).
"""

import importlib
import warnings
from typing import Any

_FLEET = frozenset(
    (
        "CAPABILITIES",
        "EmulatorError",
        "RunningEmulator",
        "WriteEvent",
        "emulator_class",
        "get",
        "start_all",
        "status_all",
        "stop_all",
        "stop_one",
        "stores",
    )
)


def __getattr__(name: str) -> Any:
    """Deprecated: the fleet's names were importable from this package."""
    if name not in _FLEET:
        raise AttributeError(f"module 'harness.emulators' has no attribute {name!r}")
    warnings.warn(
        f"harness.emulators.{name} is deprecated; import it from harness.emulators.fleet",
        DeprecationWarning,
        stacklevel=2,
    )
    return getattr(importlib.import_module("harness.emulators.fleet"), name)
