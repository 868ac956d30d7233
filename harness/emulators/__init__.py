"""The storage emulators of the local cloud, each behind its access gate.

- base: the contract every emulator implements (RunningEmulator); fleet: start, reuse, stop
  and report all of them (harness.emulator_registry finds them by entry point).
- launcher: sealing an emulator in its own network namespace and starting its gate;
  gate_client: the gate's admin API; records: the state file, write events, EmulatorError.
- One module per store with the emulator and its test helpers (``<store>.py``); the code
  that runs inside each store's gate is harness.store_gates.<store>.
"""

from harness.old_paths import fleet_names as __getattr__  # noqa: F401
