"""The shape of a task's error message: one problem is one paragraph (one line); several are
``N problems:`` (after a prefix such as ``Invalid task t.yaml: ``), one ``- `` line each, then
``Fix these N problems and run again.``"""

from __future__ import annotations

import re

_HEAD = re.compile(r"(?:.*: )?(\d+) problems:")


def problems_of(message: str) -> list[str]:
    """The problems a task error ``message`` tells (one for a one-line message); fails the
    test on any other shape, or on a traceback."""
    assert "Traceback" not in message, message
    lines = message.rstrip("\n").split("\n")
    if len(lines) == 1:
        return lines
    head = _HEAD.fullmatch(lines[0])
    assert head, f"not one paragraph, nor 'N problems:' then one line each: {message!r}"
    n = int(head.group(1))
    assert n >= 2 and len(lines) == n + 2, message
    assert all(line.startswith("- ") for line in lines[1:-1]), message
    assert lines[-1] == f"Fix these {n} problems and run again.", message
    return [line[2:] for line in lines[1:-1]]
