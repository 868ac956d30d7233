"""The storage emulators of the local cloud, each behind its access gate.

- base: the contract every emulator implements (RunningEmulator); registry: the emulators
  registered under the entry-point group ``harness.emulators``; fleet: start, reuse, stop
  and report all of them.
- launcher: sealing an emulator in its own network namespace and starting its gate;
  gate_client: the gate's admin API; records: the state file, write events, EmulatorError.
- One module per store with the emulator and its test helpers (``<store>.py``), apart from
  the code that runs inside the gate, a package per store (``<store>_gate/``: requests,
  access, signatures, bookkeeping, protocol).
"""

import importlib
import importlib.util
from typing import Any

from skycore.deprecation import moved

FLEET = "harness.emulators.fleet"
"""Where the fleet's names (``fleet.__all__``), once importable from this package, are now."""


def __getattr__(name: str) -> Any:
    """Deprecated: the fleet's names (``fleet.__all__``) were importable from this package."""
    missing = AttributeError(f"module 'harness.emulators' has no attribute {name!r}")
    # Dunders and this package's own modules are the import system's business: looking
    # them up must never import the fleet (which imports them).
    if name.startswith("_") or importlib.util.find_spec(f"{__name__}.{name}") is not None:
        raise missing
    if name not in importlib.import_module(FLEET).__all__:
        raise missing
    return moved(__name__, {name: FLEET}, name)
