"""The recipe matrix's writer, run on a node: each file of its plan created, written and
closed in turn (``spacing_s`` apart), each one's seconds measured on the node (monotonic);
a write that fails is kept as that file's error and the writer goes on. When it is done it
prints one ``MATRIX-WRITER {json}`` line and leaves the same JSON in its ``done`` file
(node-local, written whole), so a test sees the writer finished while its job still drains.

The node runs this file itself, as ``python3 -`` fed its text (:func:`command`), so it uses
the standard library only; :func:`parse` reads its output.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
import time
from dataclasses import dataclass
from pathlib import Path

MIB = 1 << 20
LINE = re.compile(r"^MATRIX-WRITER (\{.*\})$", re.M)


@dataclass(frozen=True)
class Written:
    """What the writer did: seconds each file took (create, writes, close), in plan order;
    the error of each file whose write failed; the wall time of its last close."""

    paths: list[str]
    took: list[float]
    errors: dict[str, str]
    last_close: float

    @property
    def longest(self) -> float:
        return max(self.took, default=0.0)


def command(files: list[tuple[str, int]], done: str, spacing_s: float = 0.0) -> str:
    """The shell command writing ``files`` ((path, size) each) on a node."""
    plan = json.dumps({"files": files, "done": done, "spacing_s": spacing_s})
    source = Path(__file__).read_text()
    return f"python3 - {shlex.quote(plan)} <<'PY'\n{source}PY"


def parse(output: str) -> Written | None:
    """The writer's result in ``output`` (its stdout or its done file), None if absent."""
    found = LINE.findall(output)
    if not found:
        return None
    data = json.loads(found[-1])
    return Written(data["paths"], data["took"], data["errors"], data["last_close"])


def write_all(files: list[tuple[str, int]], done: str, spacing_s: float) -> None:
    """Write and time each file (on the node), then report."""
    took, errors, last_close = [], {}, time.time()
    for n, (path, size) in enumerate(files):
        if n and spacing_s:
            time.sleep(spacing_s)
        block = os.urandom(min(size, MIB))
        started = time.monotonic()
        try:
            with open(path, "wb") as f:
                for offset in range(0, size, len(block) or 1):
                    f.write(block[: size - offset])
        except OSError as e:
            errors[path] = f"{type(e).__name__}: {e}"
        took.append(round(time.monotonic() - started, 4))
        last_close = time.time()
    paths = [p for p, _ in files]
    result = {"paths": paths, "took": took, "errors": errors, "last_close": last_close}
    line = "MATRIX-WRITER " + json.dumps(result)
    with open(done + ".tmp", "w") as f:
        f.write(line + "\n")
    os.replace(done + ".tmp", done)
    print(line, flush=True)


if __name__ == "__main__":
    plan = json.loads(sys.argv[1])
    write_all([(p, int(s)) for p, s in plan["files"]], plan["done"], float(plan["spacing_s"]))
