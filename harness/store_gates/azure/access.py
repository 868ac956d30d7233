"""Azure Blob's access model for anonymous callers, pure: a container's public access level
(off, blob, container) and the operations each level opens; the refusal of the rest.
(Credentialed requests are checked by their signature, ``signatures``, then by Azurite.)"""

from __future__ import annotations

from harness.gate.rules import ALLOW, Verdict

LEVELS = ("off", "blob", "container")
"""Container public access levels (``x-ms-blob-public-access``; absent: off)."""

ANONYMOUS_OPERATIONS: dict[str, frozenset[str]] = {
    "off": frozenset(),
    "blob": frozenset({"GetBlob", "GetBlobProperties", "GetBlobMetadata", "GetBlockList"}),
    "container": frozenset(
        {
            "GetBlob",
            "GetBlobProperties",
            "GetBlobMetadata",
            "GetBlockList",
            "GetContainerProperties",
            "GetContainerMetadata",
            "ListBlobs",
        }
    ),
}
"""The operations an anonymous caller may call at each level (Azure's "Features available to
anonymous users" table; Get Block List: committed blocks only)."""

HIDDEN = Verdict(False, 404, "ResourceNotFound", "The specified resource does not exist.")
"""Azure's answer to an anonymous request its container's level does not open: the same as
for a container that does not exist, so that nobody can probe for private containers."""


def public_level(value: str | None) -> str:
    """The level an ``x-ms-blob-public-access`` header sets (absent or unknown: off)."""
    value = (value or "").strip().lower()
    return value if value in LEVELS else "off"


def anonymous_allowed(level: str, action: str | None) -> bool:
    """True if an anonymous caller may call ``action`` on a container at ``level``."""
    return action in ANONYMOUS_OPERATIONS.get(level, frozenset())


def decide_anonymous(level: str | None, action: str | None) -> Verdict:
    """An anonymous request's verdict on a container at ``level`` (None: a container the
    gate does not know, which Azurite answers)."""
    if level is None or anonymous_allowed(level, action):
        return ALLOW
    return HIDDEN
