"""A store's refusal as an exception: the one shape (HTTP status, the store's error code,
message) that a protocol's parsers and access model raise, and the :class:`Verdict` the
gate answers with."""

from __future__ import annotations

from harness.gate.rules import Verdict


class StoreError(Exception):
    """A refusal in a store's terms: HTTP status, the store's error code (S3's ``Code``,
    GCS's ``reason``), message."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message

    def verdict(self) -> Verdict:
        """The denial this error stands for."""
        return Verdict(False, self.status, self.code, self.message)
