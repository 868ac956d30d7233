"""README.md stays a page a newcomer reads whole: at most 150 lines, and its quick start is
the two set-up-free commands (the main job and the tests)."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"
MAX_LINES = 150


def test_the_readme_fits_its_budget() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_LINES, (
        f"README.md has {len(lines)} lines, over its {MAX_LINES}: move detail to docs/"
    )


def test_the_quick_start_is_two_commands() -> None:
    text = README.read_text(encoding="utf-8")
    quick = text.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```\n(.*?)```", quick, re.S)
    assert block is not None, "README's quick start has no command block"
    assert block.group(1).split() == ["make", "demo", "make", "test"]
