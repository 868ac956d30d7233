"""A server's known deviation from the emulator contract, declared by its emulator class in
``known_deviations``: the contract reports that check's failure as a deviation (one line in
the run's summary) instead of failing, and fails if the check starts passing, so the
declaration stays true."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Deviation:
    """``check`` (a contract check's name, e.g. ``"order"``) fails on the server
    ``implementation`` (None: the emulator's own ``implementation``) because ``why``."""

    check: str
    why: str
    implementation: str | None = None

    def applies_to(self, implementation: str) -> bool:
        """True if the deviation is declared for the server ``implementation``."""
        return self.implementation in (None, implementation)
