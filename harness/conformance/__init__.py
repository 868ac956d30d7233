"""The conformance suite of a storage backend, shipped in the package: the mount matrix, the
seed's comp_test, stop/start persistence, upload order and multinode. It runs from any
directory with ``harness conform --store NAME`` or ``pytest --pyargs harness.conformance``,
on the local cloud or, with ``--target FILE``, against a real endpoint (docs/conformance.md).
tests/smoke runs the same modules."""
