"""Keep one CPU core busy until killed or until the parent process ends (``make flaky LOAD=1``).

    python tools/cpu_hog.py --parent PID

A busy loop in this one process; every few milliseconds it checks that PID is still its
parent and returns once it is not (the parent died, even by SIGKILL). SIGTERM and SIGINT
end it at once.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys

SPIN = 200_000
"""Loop turns between two looks at the parent (a few milliseconds)."""


def spin(parent: int) -> None:
    """Busy-loop until ``parent`` is no longer this process's parent."""
    while os.getppid() == parent:
        for _ in range(SPIN):
            pass


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parent", type=int, default=os.getppid(), help="default: the caller")
    args = parser.parse_args(argv)
    # Ctrl-C in the terminal reaches the whole process group: end quietly.
    with contextlib.suppress(KeyboardInterrupt):
        spin(args.parent)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
