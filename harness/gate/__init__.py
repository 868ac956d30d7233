"""The access gate in front of each storage emulator, store-independent.

- server: the aiohttp reverse proxy (deciding, forwarding); relay: how it streams bodies;
  admin: its admin API on aiohttp's router.
- rules: who may do what; faults: injected failures (corrupt: the wrong checksums of the
  ``corrupt`` fault); state: bucket table and write events;
  protocol: the contract with one storage API (each store's protocol module implements it);
  errors: a store's refusal as an exception.
- ``python -m harness.gate`` (__main__) runs one gate.

Everything in this package runs inside the gate process, so its code is part of the gate's
version (harness.emulators.launcher.gate_version).
"""
