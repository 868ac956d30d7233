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
import importlib.util
import warnings
from typing import Any


def __getattr__(name: str) -> Any:
    """Deprecated: the fleet's names (``fleet.__all__``) were importable from this package."""
    missing = AttributeError(f"module 'harness.emulators' has no attribute {name!r}")
    # Dunders and this package's own modules are the import system's business: looking
    # them up must never import the fleet (which imports them).
    if name.startswith("_") or importlib.util.find_spec(f"{__name__}.{name}") is not None:
        raise missing
    fleet = importlib.import_module("harness.emulators.fleet")
    if name not in fleet.__all__:
        raise missing
    warnings.warn(
        f"harness.emulators.{name} is deprecated; import it from harness.emulators.fleet",
        DeprecationWarning,
        stacklevel=2,
    )
    return getattr(fleet, name)
