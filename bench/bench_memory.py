"""The peak memory of a benchmark's rclone daemons: a thread sums, every ``interval`` s, the
resident memory (VmRSS) of every rclone process whose command line holds a marker (e.g. the rclone
config file of the benchmark's host-side mounts), as a node's rclone would be counted."""

from __future__ import annotations

import threading
from pathlib import Path
from types import TracebackType


def rss_kib(marker: str, program: str = "rclone", proc: Path = Path("/proc")) -> int:
    """The summed VmRSS (KiB) of the ``program`` processes whose command line contains
    ``marker``."""
    total = 0
    for d in proc.iterdir():
        if not d.name.isdigit():
            continue
        try:
            argv = (d / "cmdline").read_bytes().split(b"\0")
            if Path(argv[0].decode(errors="replace")).name != program:
                continue
            if not any(marker.encode() in a for a in argv[1:]):
                continue
            for line in (d / "status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:  # the process ended meanwhile
            continue
    return total


class PeakRss:
    """``with PeakRss(marker) as peak: ...``; then ``peak.peak_mib``."""

    def __init__(self, marker: str, interval: float = 0.2) -> None:
        self.marker = marker
        self.interval = interval
        self.peak_kib = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while True:
            self.peak_kib = max(self.peak_kib, rss_kib(self.marker))
            if self._stop.wait(self.interval):
                return

    @property
    def peak_mib(self) -> float:
        return round(self.peak_kib / 1024, 1)

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:  # fmt: skip
        self._stop.set()
        self._thread.join()
