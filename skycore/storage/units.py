"""Sizes and durations as a task YAML writes them (rclone's forms), and as rclone reads them.

One parser each: ``read_size`` (binary units, as rclone: ``8M``, ``8Mi`` and ``8MiB`` are all
8 MiB) and ``read_duration`` (rclone's durations: ``500ms``, ``30s``, ``1h30m``, ``2d``). Each
raises ValueError with the problem and an example of a good value (no field path: callers put
the field in front), so a pydantic validator can use them as they are.
"""

from __future__ import annotations

import re
from fractions import Fraction

from skycore.storage.common import StorageSpecError

KiB = 1 << 10
MiB = 1 << 20
GiB = 1 << 30
TiB = 1 << 40
PiB = 1 << 50

_SIZE = re.compile(r"(\d+(?:\.\d+)?|\.\d+)\s*(?:([kmgtp])(?:i?b?)|(b))?", re.IGNORECASE)
_SIZE_UNITS = {"k": KiB, "m": MiB, "g": GiB, "t": TiB, "p": PiB}

_NUMBER = r"(?:\d+(?:\.\d+)?|\.\d+)"
_TOKEN = re.compile(rf"({_NUMBER})(ns|us|µs|ms|s|m|h|d|w|M|y)")
_DURATION = re.compile(rf"(?:{_NUMBER}(?:ns|us|µs|ms|s|m|h|d|w|M|y))+")
_NS = {"ns": 1, "us": 10**3, "µs": 10**3, "ms": 10**6, "s": 10**9, "m": 60 * 10**9}
_NS |= {"h": 3600 * 10**9, "d": 86400 * 10**9, "w": 7 * 86400 * 10**9}
_NS |= {"M": 30 * 86400 * 10**9, "y": 365 * 86400 * 10**9}  # rclone's month and year


def read_size(value: object, example: str, rclone_forms: bool = False) -> int:
    """Bytes in ``value``, a size with a unit (K, M, G, T or P, binary whether or not ``i``
    or ``B`` follow). With ``rclone_forms`` also rclone's other forms: ``B`` alone is bytes
    and a number alone is KiB (SkyPilot hands ``config.mount_cached`` sizes to rclone as
    written). ValueError (the problem and ``example``) otherwise."""
    m = _SIZE.fullmatch(value.strip()) if isinstance(value, str) else None
    if m is None or (m.group(2) is None and not rclone_forms):
        raise ValueError(
            f"{value!r} is not a size with a unit; write a number with K, M, G, T or P "
            f"(binary: 8M, 8Mi and 8MiB are all 8 MiB), e.g. {example}"
        )
    unit = _SIZE_UNITS[m.group(2).lower()] if m.group(2) else 1 if m.group(3) else KiB
    return int(Fraction(m.group(1)) * unit)


def parse_size(value: object, field: str, example: str = "chunk_size: 8MiB") -> int:
    """``read_size`` for the field ``field``: StorageSpecError naming it and the fix."""
    try:
        return read_size(value, example)
    except ValueError as e:
        raise StorageSpecError(f"{field}: {e}.") from None


def read_duration(value: object, example: str) -> float:
    """Seconds in ``value``, an rclone duration: numbers with units (ms, s, m, h, d, w, M for
    30 days, y for 365 days; ``1h30m``), or a plain number of seconds. ValueError (the
    problem and ``example``) otherwise."""
    text = value.strip() if isinstance(value, str) else None
    if text is not None and re.fullmatch(_NUMBER, text):
        return float(Fraction(text))
    if text is None or not _DURATION.fullmatch(text):
        raise ValueError(
            f"{value!r} is not a duration; write a number with a unit (ms, s, m, h, d; "
            f"combined as 1h30m), e.g. {example}"
        )
    ns = sum(Fraction(n) * _NS[unit] for n, unit in _TOKEN.findall(text))
    return int(ns) / 10**9


def show_bytes(n: int) -> str:
    """``n`` bytes in the largest binary unit that divides it, as rclone and a task YAML both
    read it (``10Gi``, ``512Mi``, ``100B``; a plain number would be KiB to rclone)."""
    for unit, size in (("Pi", PiB), ("Ti", TiB), ("Gi", GiB), ("Mi", MiB), ("Ki", KiB)):
        if n and n % size == 0:
            return f"{n // size}{unit}"
    return f"{n}B"


def show_duration(seconds: float) -> str:
    """``seconds`` exactly, in the largest unit that divides it (``1h``, ``90m``, ``1500ms``),
    as rclone (Go's time.ParseDuration) and ``read_duration`` both read it."""
    ns = round(seconds * 10**9)
    for unit in ("h", "m", "s", "ms", "us"):
        if ns and ns % _NS[unit] == 0:
            return f"{ns // _NS[unit]}{unit}"
    return f"{ns}ns"
