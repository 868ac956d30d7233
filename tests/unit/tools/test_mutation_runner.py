"""The upload-order mutation runner (tools/run_order_mutations.py) stays usable:
every mutation still applies to the code as it is now, and a pattern that no longer matches
stops the runner instead of silently mutating nothing."""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
_spec = importlib.util.spec_from_file_location(
    "run_order_mutations", REPO / "tools" / "run_order_mutations.py"
)
assert _spec is not None and _spec.loader is not None
runner = importlib.util.module_from_spec(_spec)
sys.modules["run_order_mutations"] = runner  # dataclasses resolve their module by name
_spec.loader.exec_module(runner)


def _tree(tmp_path: Path, mutation) -> Path:
    for edit in mutation.edits:
        (tmp_path / edit.path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / edit.path, tmp_path / edit.path)
    return tmp_path


@pytest.mark.parametrize("mutation", runner.MUTATIONS, ids=lambda m: m.name)
def test_every_mutation_applies_to_the_current_code(tmp_path: Path, mutation) -> None:
    root = _tree(tmp_path, mutation)
    before = {e.path: (root / e.path).read_text() for e in mutation.edits}
    runner.apply(mutation, root)
    for edit in mutation.edits:
        after = (root / edit.path).read_text()
        assert after != before[edit.path] and edit.new in after
    assert all((REPO / e.path).read_text() == before[e.path] for e in mutation.edits)


def test_a_pattern_that_does_not_match_stops_the_runner(tmp_path: Path) -> None:
    gone = runner.Mutation(
        name="gone",
        description="",
        edits=(
            runner.Edit(runner.MOUNTING, "    transfers: int = 1\n", "x"),
            runner.Edit(runner.MOUNTING, "no such text in the file", "y"),
        ),
        probe="",
    )
    root = _tree(tmp_path, gone)
    original = (root / runner.MOUNTING).read_text()
    with pytest.raises(runner.MutationError, match="found 0"):
        runner.apply(gone, root)
    assert (root / runner.MOUNTING).read_text() == original  # nothing half-applied
