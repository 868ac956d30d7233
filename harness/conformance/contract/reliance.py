"""Which of the suite's tests rely on which contract check. Every probes module declares a
``RELIANCE`` table, check name -> :class:`Reliance`: a failed check skips only the test
modules that rely on it, and a check no test relies on is a finding (reported, never
skipping anything). docs/backends.md prints the tables."""

from __future__ import annotations

from dataclasses import dataclass

EVERY_MODULE = ("*",)
"""Every module of the suite relies on the check."""


@dataclass(frozen=True)
class Reliance:
    """The suite's test modules (short names, ``test_upload_order``; ``*``: all) that rely on
    one check, and why. No modules: the check is a finding only."""

    modules: tuple[str, ...]
    why: str

    @property
    def finding_only(self) -> bool:
        return not self.modules

    def covers(self, module: str) -> bool:
        """True if the test module ``module`` (short name) relies on the check."""
        return module in self.modules or "*" in self.modules


def finding(why: str) -> Reliance:
    """A check no test of the suite relies on: its failure is reported, never skips."""
    return Reliance((), why)


def every(why: str) -> Reliance:
    """A check every test of the suite relies on."""
    return Reliance(EVERY_MODULE, why)


ORDERED_BIG_FILES = ("test_upload_order", "test_stop_start")
"""The modules that write files big enough (8 and 16 MiB) for an ordered MOUNT_CACHED mount
to send them in parts."""

SEEN_BEFORE_WHOLE = ("test_upload_order", "test_multinode")
"""The modules that would see an object before its upload completed: the order seen by
listing the bucket, and nodes reading what another node writes."""

COMMON: dict[str, Reliance] = {
    "delimiter": every("every mount lists its folders with delimiter '/'"),
    "order": finding(
        "rclone sorts each folder's entries itself: no test depends on the order of keys "
        "in a listing"
    ),
    "paging": finding("the suite's folders hold fewer entries than one page (1,000)"),
    "conditional GET": finding("rclone's reads and the suite's send no conditional header"),
    "ranged GET": every("mounts read files in ranges"),
    "range past the end": finding(
        "no module reads a file back at a range boundary; the training-run scenario did (a 206 "
        "there made rclone cut a cached checkpoint short)"
    ),
}
"""The checks every API's probes have, and who relies on each."""
