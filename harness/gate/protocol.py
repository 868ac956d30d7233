"""The contract between the store-independent gate (harness.gate) and one storage API.

An emulator module provides a :class:`GateProtocol`: it turns a request into an
:class:`~harness.gate.rules.Access` and a caller identity, writes a denial in its API's
own error format, and records write events after a successful response. The gate applies
the shared rules (harness.gate.rules.decide) in between and streams everything else.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from harness.gate.corrupt import wrong_headers
from harness.gate.rules import Access, Verdict, decide
from harness.gate.state import GateState


@dataclass
class Exchange:
    """One request as a protocol sees it."""

    method: str
    path: str
    headers: Mapping[str, str]
    """Request headers, names lower-cased."""
    query: Mapping[str, list[str]]
    state: GateState
    upstream: tuple[str, int]
    read_body: Callable[[], bytes]
    """Reads the whole (small) request body; the gate then forwards it from memory."""

    def header(self, name: str) -> str | None:
        """A request header (case-insensitive)."""
        return self.headers.get(name.lower())

    def content_length(self) -> int:
        """The request's Content-Length (0 when absent or malformed)."""
        try:
            return max(0, int(self.header("content-length") or 0))
        except ValueError:
            return 0


class UpstreamResponse(Protocol):
    """The emulator's response, as far as a protocol needs it."""

    status: int

    def header(self, name: str) -> str | None:
        """First value of a response header (case-insensitive)."""


@dataclass(frozen=True)
class Success:
    """A request the upstream answered 2xx, its response read whole: the exchange, the
    gate's access decision, the caller's identity, the upstream response and its body."""

    ex: Exchange
    access: Access
    identity: str | None
    up: UpstreamResponse
    data: bytes


@dataclass(frozen=True)
class Answer:
    """A response the gate gives itself, without asking the emulator."""

    status: int
    headers: dict[str, str]
    body: bytes


@dataclass(frozen=True)
class Corrupted:
    """A successful answer with a wrong checksum (the ``corrupt`` fault): the headers it
    replaces, its new body (None: unchanged) and the object's key when the request did not
    name it (a GCS upload names it in its body)."""

    headers: dict[str, str]
    body: bytes | None = None
    key: str | None = None


class GateProtocol:
    """How the gate reads one storage API. Subclasses override what their API needs."""

    def classify(self, ex: Exchange) -> tuple[Access, str | None]:
        """The request's access and its caller: an owner name, ANONYMOUS or INVALID."""
        raise NotImplementedError

    def error_body(self, ex: Exchange, verdict: Verdict, access: Access) -> tuple[str, bytes]:
        """A denial in the API's own error format: (content type, body)."""
        raise NotImplementedError

    def authenticate(self, ex: Exchange, access: Access, identity: str | None) -> Verdict | None:
        """Check the request's credentials the way the real service does (signatures,
        expiry, token validity): a denial in the service's terms, or None to go on to the
        access rules. By default nothing is checked beyond the identity."""
        return None

    def decide(self, ex: Exchange, access: Access, identity: str | None) -> Verdict:
        """Whether the caller may do what the request does: by default the local cloud's
        owner-and-public-flag rules (harness.gate.rules.decide); a store with a richer access
        model (ACLs, policies, IAM) overrides it."""
        return decide(access, identity, ex.state.buckets())

    def answers(self, access: Access) -> bool:
        """True if :meth:`answer` may answer this request (checked first, on the event loop:
        quick, no I/O), so that ordinary requests skip the call; False by default."""
        return False

    def answer(self, ex: Exchange, access: Access, identity: str | None) -> Answer | None:
        """A response the gate gives itself for an allowed request (an ACL the gate keeps),
        or None to forward the request (the default). Called, in a thread,
        only when :meth:`answers` says so."""
        return None

    def refuse_answer(
        self, ex: Exchange, access: Access, status: int, headers: dict[str, str]
    ) -> Verdict | None:
        """The error the real service gives where the emulator answered (``status`` and
        ``headers`` of its response) otherwise, or None to pass its answer on (the default):
        the emulator's deviations that clients trip on, corrected at the gate."""
        return None

    def upstream_target(self, ex: Exchange, access: Access, identity: str | None) -> str:
        """The path and query forwarded to the emulator (the request's own by default)."""
        return ex.path

    def response_headers(
        self, ex: Exchange, access: Access, identity: str | None
    ) -> dict[str, str]:
        """Headers added to the emulator's response (none by default)."""
        return {}

    def fault_verdict(self, status: int) -> Verdict:
        """The error an injected ``errors`` fault answers with (``status``: 5xx or 4xx), in
        the service's terms; :meth:`error_body` writes it."""
        return Verdict(False, status, "ServiceUnavailable", "Service unavailable (injected).")

    def corrupts(self, ex: Exchange, access: Access) -> bool:
        """True if the successful answer of this request ends an object's write and carries
        its checksum, which a ``corrupt`` fault makes wrong (quick, no I/O): by default a
        write with an event other than a deletion."""
        return access.event is not None and access.event != "delete"

    def corrupt_answer(
        self, ex: Exchange, access: Access, up: UpstreamResponse, body: bytes | None
    ) -> Corrupted | None:
        """The answer ``up`` (its body when it was read whole, else None) of a successful
        object write (:meth:`corrupts`) or of a read of an object whose write was
        corrupted, with every checksum it carries wrong; None if it carries none (a write
        is hit all the same: its object's reads show wrong checksums). By default an MD5
        ETag and Content-MD5."""
        headers = wrong_headers(up.header, etags=("ETag",), digests=("Content-MD5",))
        return Corrupted(headers) if headers else None

    def corrupt_reads_body(self, ex: Exchange, access: Access) -> bool:
        """True if a read of a corrupted object carries the checksum in its body (GCS's
        JSON metadata), which the gate then reads whole; False by default."""
        return False

    def malformed_verdict(self, message: str) -> Verdict:
        """The error for a request the HTTP parser refused (``message``: the parser's
        reason), in the service's terms; :meth:`error_body` writes it."""
        return Verdict(False, 400, "BadRequest", f"The request is malformed: {message}")

    def error_headers(self, verdict: Verdict) -> dict[str, str]:
        """Extra headers of a denial (some APIs repeat the error code in a header)."""
        return {}

    def upstream_headers(
        self, ex: Exchange, access: Access, identity: str | None
    ) -> dict[str, str]:
        """Headers set on the forwarded request, replacing the client's headers of the same
        names (none by default)."""
        return {}

    def wants_whole_response(self, ex: Exchange, access: Access) -> bool:
        """Read a successful response whole for :meth:`after_success`, beyond the gate's own
        cases (writes with an event, bucket creation/deletion, bucket listings)."""
        return False

    def after_success(
        self,
        ex: Exchange,
        access: Access,
        identity: str | None,
        up: UpstreamResponse,
        data: bytes,
    ) -> bytes:
        """Bookkeeping after a 2xx response read whole (bucket table, write events); returns
        the body to send to the client (possibly filtered). A protocol overrides
        :meth:`on_success`, which gets the same in one object."""
        return self.on_success(Success(ex, access, identity, up, data))

    def on_success(self, done: Success) -> bytes:
        """See :meth:`after_success`; returns the response body unchanged by default."""
        return done.data
