"""The access gate's rules, free of any networking: who is calling, what a request does, and
whether it is allowed.

A request is first *classified* into an :class:`Access` (which bucket it touches, whether
it reads or writes, which operation it is, which write event it produces) by the store's
gate protocol, then *decided*: by the store's own access model where it has one
(``GateProtocol.decide``: S3's ACLs and policies, GCS's IAM, Azure's public access levels),
else by :func:`decide` here, against the bucket table (owner and admin public flag of every
bucket the gate knows). The gate process (harness.gate) applies the verdict and forwards
allowed requests to the emulator.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

ANONYMOUS: str | None = None
"""Identity of a request that carries no credentials."""
INVALID = "<invalid>"
"""Identity of a request whose credentials name no known account."""


class Kind(Enum):
    """What a request does, as far as access control is concerned."""

    LIST_BUCKETS = "list_buckets"
    CREATE_BUCKET = "create_bucket"
    READ = "read"
    WRITE = "write"
    DENY = "deny"  # never forwarded (emulator internals, unknown API paths)
    PASS = "pass"  # forwarded unchecked (the emulator enforces access itself)


@dataclass
class Access:
    """The classification of one request."""

    kind: Kind
    bucket: str | None = None
    key: str | None = None
    sources: tuple[str, ...] = ()
    """Buckets the request reads from besides ``bucket`` (copy / rewrite sources)."""
    event: str | None = None
    """Write event recorded on success (put, copy, multipart, delete, ...: the protocol's
    operation names)."""
    deletes_bucket: bool = False
    needs_body: bool = False
    """The bucket name is in the (small) request body; the protocol reads it."""
    sub: list[Access] = field(default_factory=list)
    """Parts of a batch request, each decided separately."""
    action: str | None = None
    """The store's name for the operation (``s3:GetObject``), when its protocol decides by
    operation."""
    detail: Any = None
    """Protocol-specific data carried from classification to the decision and bookkeeping."""


@dataclass(frozen=True)
class Bucket:
    """A bucket known to the gate: its owner, the admin's public flag and the store's access
    settings (ACLs, policies, public access levels: JSON values, written by the store's
    protocol from the real API calls)."""

    owner: str
    public: bool = False
    settings: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Verdict:
    """Allow, or deny with an HTTP status, an API error code and a message."""

    allowed: bool
    status: int = 200
    code: str = ""
    message: str = ""


ALLOW = Verdict(True)


def _deny(message: str, code: str = "AccessDenied", status: int = 403) -> Verdict:
    return Verdict(False, status, code, message)


def _who(identity: str | None) -> str:
    return "anonymous caller" if identity is ANONYMOUS else f"account '{identity}'"


def decide(access: Access, identity: str | None, buckets: Mapping[str, Bucket]) -> Verdict:
    """Apply the access rules of the local cloud to a classified request.

    Owner: everything. Another signed account: read/list of a public bucket. Anonymous:
    read/list of a public bucket. Unknown credentials: nothing. Buckets the gate does not
    know are passed through for reads (the emulator answers 404) and for signed writes.
    """
    if access.kind is Kind.PASS:
        return ALLOW
    if access.kind is Kind.DENY:
        return _deny("This endpoint is not available through the access gate.")
    if identity == INVALID:
        return _deny(
            "The credentials are not known to this storage service (unknown access key or token).",
            code="InvalidAccessKeyId",
        )
    if access.sub:
        for part in access.sub:
            verdict = decide(part, identity, buckets)
            if not verdict.allowed:
                return verdict
        return ALLOW
    if access.kind is Kind.LIST_BUCKETS:
        if identity is ANONYMOUS:
            return _deny("Anonymous callers cannot list buckets.")
        return ALLOW
    if access.kind is Kind.CREATE_BUCKET:
        if identity is ANONYMOUS:
            return _deny("Anonymous callers cannot create buckets.")
        known = buckets.get(access.bucket or "")
        if known is not None and known.owner != identity:
            return _deny(
                f"The bucket name '{access.bucket}' is already taken by another account. "
                "Choose another name.",
                code="BucketAlreadyExists",
                status=409,
            )
        return ALLOW
    for source in access.sources:
        verdict = _check(source, Kind.READ, identity, buckets)
        if not verdict.allowed:
            return verdict
    return _check(access.bucket, access.kind, identity, buckets)


def _check(
    bucket: str | None, kind: Kind, identity: str | None, buckets: Mapping[str, Bucket]
) -> Verdict:
    known = buckets.get(bucket or "")
    if known is None:
        if kind is Kind.WRITE and identity is ANONYMOUS:
            return _deny(f"Anonymous callers cannot write to bucket '{bucket}'.")
        return ALLOW  # the emulator answers (usually 404 no such bucket)
    if known.owner == identity:
        return ALLOW
    if kind is Kind.READ:
        if known.public:
            return ALLOW
        return _deny(f"{_who(identity).capitalize()} may not read private bucket '{bucket}'.")
    return _deny(f"{_who(identity).capitalize()} may not write to bucket '{bucket}'.")


def split_path(path: str) -> tuple[str, dict[str, list[str]]]:
    parts = urlsplit(path)
    return parts.path, parse_qs(parts.query, keep_blank_values=True)


def query_pairs(raw_query: str, plus_is_space: bool = False) -> list[tuple[str, str]]:
    """The ``name=value`` pairs of a raw query string in order, percent-decoded; ``+`` is a
    space only where the service reads it so (GCS), else it stays ``+`` (Azure)."""
    pairs = []
    for part in raw_query.split("&"):
        if part:
            name, _, value = part.partition("=")
            if plus_is_space:
                name, value = name.replace("+", "%20"), value.replace("+", "%20")
            pairs.append((unquote(name), unquote(value)))
    return pairs


def header(headers: Mapping[str, str], name: str) -> str | None:
    """Header lookup in a mapping with lower-cased names (or any casing as a fallback)."""
    value = headers.get(name.lower())
    return headers.get(name) if value is None else value
