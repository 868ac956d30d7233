"""S3's refusals as exceptions: the one shape (HTTP status, S3 error code, message) that the
ACL, policy and CORS parsers raise and the protocol turns into a :class:`Verdict`."""

from __future__ import annotations

from harness.gate.rules import Verdict


class S3Error(Exception):
    """An S3 error answer: HTTP status, S3 error code, message."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message

    def verdict(self) -> Verdict:
        """The denial this error stands for."""
        return Verdict(False, self.status, self.code, self.message)
