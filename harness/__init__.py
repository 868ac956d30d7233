"""harness: the local cloud (storage emulators behind an access gate, Docker nodes) and the
pytest harness that runs skycore end to end on it. Old import paths resolve through
harness.old_paths."""

from harness import old_paths

old_paths.install()
