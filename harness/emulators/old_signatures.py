"""Emulator methods whose signature grew, and how an override written against the old one
keeps working: the harness calls it the old way and warns once (a
PluginAPIDeprecationWarning naming the new signature).

- ``config_section(self)`` (releases before 2026-12-02) became ``config_section(self,
  owner=USER)``: the old override gives the user's section; another account's comes from the
  nearest base class that takes ``owner``.
"""

from __future__ import annotations

import inspect
import sys
from pathlib import Path
from typing import Any

from harness.accounts import USER
from skycore.deprecation import warn_once

HARNESS_DIR = str(Path(__file__).resolve().parents[1])


def _takes_owner(method: Any) -> bool:
    params = list(inspect.signature(method).parameters.values())[1:]  # after self
    return any(p.kind is not p.KEYWORD_ONLY for p in params)


def adapt(cls: type) -> None:
    """Wrap ``cls``'s own old-signature overrides so the harness may call them the new way."""
    own = cls.__dict__.get("config_section")
    if own is None or getattr(own, "adapted_from_old_signature", False) or _takes_owner(own):
        return

    def config_section(self: Any, owner: str = USER) -> Any:
        if owner == USER:
            return own(self)
        return super(cls, self).config_section(owner)  # type: ignore[arg-type,misc]

    config_section.adapted_from_old_signature = True  # type: ignore[attr-defined]
    config_section.__doc__ = own.__doc__
    cls.config_section = config_section  # type: ignore[attr-defined]
    name = f"{cls.__module__}.{cls.__qualname__}.config_section"
    warn_once(
        name,
        f"{name}(self) has the signature of an older release: the harness calls it for the "
        "user's section only. Override config_section(self, owner=USER) instead (owner is "
        "USER or OTHER of harness.plugin_api).",
        stacklevel=_caller_outside_harness(),
    )


def _caller_outside_harness() -> int:
    """The stack level (as warnings.warn counts from warn_once's caller) of the first frame
    outside harness and Python's own frozen modules (abc): the package's class statement."""
    frame = sys._getframe(1)
    level = 1
    while frame.f_back is not None and frame.f_code.co_filename.startswith((HARNESS_DIR, "<")):
        frame = frame.f_back
        level += 1
    return level
