"""Timed writes on a node: each path in turn created, written (``size`` random bytes, 1 MiB
a write) and closed, one ``WROTE path create_s write_s sha256`` line per file (seconds of
the create and of the writes and close, monotonic, measured on the node).

The node runs this file itself, as ``python3 -`` fed its text (:func:`command`), so it uses
the standard library only; :func:`parse` reads its output."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import sys
import time
from pathlib import Path

LINE = re.compile(r"^WROTE (\S+) (\S+) (\S+) (\w+)$", re.M)


def command(paths: list[str], size: int) -> str:
    """The shell command that writes ``size`` bytes to each of ``paths`` on a node."""
    source = Path(__file__).read_text()
    return f"python3 - {shlex.quote(json.dumps(paths))} {size} <<'PY'\n{source}PY"


def parse(output: str) -> list[tuple[str, float, float, str]]:
    """(path, create seconds, write-and-close seconds, sha256) per file, in write order."""
    return [(p, float(c), float(w), digest) for p, c, w, digest in LINE.findall(output)]


def write_all(paths: list[str], size: int) -> None:
    """Write and time each of ``paths`` (on the node)."""
    for path in paths:
        data = os.urandom(size)
        started = time.monotonic()
        f = open(path, "wb")  # noqa: SIM115 (the create is timed apart from the writes)
        opened = time.monotonic()
        for i in range(0, len(data), 1 << 20):
            f.write(data[i : i + (1 << 20)])
        f.close()
        closed = time.monotonic()
        print("WROTE", path, opened - started, closed - opened, hashlib.sha256(data).hexdigest())


if __name__ == "__main__":
    write_all(json.loads(sys.argv[1]), int(sys.argv[2]))
