"""Several ``harness`` commands run in turn in one Python process: one process start for
all of them (a start costs more than the commands the tests run)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from typing import TypedDict

RUN_COMMANDS = """
import contextlib, io, json, sys, traceback
results = []
for hidden, argv in json.loads(sys.argv[1]):
    for module in hidden:
        sys.modules[module] = None  # import and find_spec see it as not installed
    sys.argv = ["harness", *argv]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            from harness.cli import main
            main()
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 1
        except BaseException:
            traceback.print_exc()
            code = 1
    for module in hidden:
        del sys.modules[module]
    results.append({"code": code, "stdout": out.getvalue(), "stderr": err.getvalue()})
print(json.dumps(results))
"""


class Result(TypedDict):
    """How one command ended: its exit code and what it printed."""

    code: int
    stdout: str
    stderr: str


def run_harness(
    commands: list[tuple[list[str], list[str]]], env: Mapping[str, str] | None = None
) -> list[Result]:
    """Run each (modules hidden, ``harness`` arguments) of ``commands`` in turn, in one new
    process; each command's modules are hidden while it runs, and shown again after."""
    r = subprocess.run(
        [sys.executable, "-c", RUN_COMMANDS, json.dumps(commands)],
        capture_output=True,
        text=True,
        env=dict(env) if env is not None else dict(os.environ),
        timeout=120,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    results: list[Result] = json.loads(r.stdout)
    return results
