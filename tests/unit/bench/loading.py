"""Imports a module of bench/ the way its scripts import each other."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parents[3] / "bench"


def bench_module(name: str) -> ModuleType:
    """A module of bench/, imported the way its scripts import each other."""
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    return importlib.import_module(name)
