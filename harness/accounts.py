"""The identities of the local cloud, by name only.

``user`` is the account whose credentials skycore gets; ``other`` owns the
public-not-by-user buckets. Each emulator module holds the credentials of these names in
its own API's terms (keys, tokens, storage accounts), plus credentials of ``unknown``: a
caller that signs with credentials its store does not know.
"""

from __future__ import annotations

USER = "user"
OTHER = "other"
OWNERS = (USER, OTHER)
UNKNOWN = "unknown"
"""A caller with credentials that no store knows (for testing denials)."""
