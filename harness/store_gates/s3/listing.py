"""ListBuckets as S3 answers it to one account: the caller's buckets only, filtered by
prefix *before* the page is cut (max-buckets, continuation token), in S3's
ListAllMyBucketsResult shape with the caller as Owner. Pure."""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Collection, Mapping
from html import unescape
from xml.sax.saxutils import escape

from harness.gate.rules import Verdict
from harness.store_gates.s3.acl import S3_ACCOUNTS

S3_NS = "http://s3.amazonaws.com/doc/2006-03-01/"
MAX_BUCKETS = 10000
_BUCKET = re.compile(rb"<Bucket>(.*?)</Bucket>", re.S)
_NAME = re.compile(rb"<Name>(.*?)</Name>", re.S)
_DATE = re.compile(rb"<CreationDate>(.*?)</CreationDate>", re.S)
_REGION = re.compile(rb"<BucketRegion>(.*?)</BucketRegion>", re.S)


class ListingError(Exception):
    """A ListBuckets parameter S3 refuses."""

    def __init__(self, verdict: Verdict) -> None:
        super().__init__(verdict.message)
        self.verdict = verdict


def _invalid(message: str) -> ListingError:
    return ListingError(Verdict(False, 400, "InvalidArgument", message))


def encode_token(name: str) -> str:
    """The continuation token that resumes a listing after bucket ``name``."""
    return base64.urlsafe_b64encode(name.encode()).decode()


def decode_token(token: str) -> str:
    """The bucket name a continuation token resumes after."""
    try:
        return base64.urlsafe_b64decode(token.encode()).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError) as e:
        raise _invalid("The continuation token provided is incorrect") from e


def listing_params(query: Mapping[str, list[str]]) -> tuple[str, int, str | None]:
    """(prefix, max-buckets, resume-after name) of a ListBuckets request."""
    lowered = {k.lower(): v[0] for k, v in query.items() if v}
    prefix = lowered.get("prefix", "")
    raw_max = lowered.get("max-buckets")
    limit = MAX_BUCKETS
    if raw_max is not None:
        if not raw_max.isdigit() or not 1 <= int(raw_max) <= MAX_BUCKETS:
            raise _invalid("Argument max-buckets must be an integer between 1 and 10000.")
        limit = int(raw_max)
    token = lowered.get("continuation-token")
    after = decode_token(token) if token else None
    return prefix, limit, after


def list_buckets_xml(
    upstream: bytes, caller: str, mine: Collection[str], query: Mapping[str, list[str]]
) -> bytes:
    """The ListAllMyBucketsResult ``caller`` gets: of the buckets in the emulator's whole
    listing ``upstream``, those in ``mine``, prefix-filtered, then paginated."""
    prefix, limit, after = listing_params(query)
    rows: list[tuple[str, str, str | None]] = []
    for m in _BUCKET.finditer(upstream):
        block = m.group(1)
        name_m = _NAME.search(block)
        if name_m is None:
            continue
        name = unescape(name_m.group(1).decode())
        if name not in mine or not name.startswith(prefix):
            continue
        if after is not None and name <= after:
            continue
        date_m, region_m = _DATE.search(block), _REGION.search(block)
        date = unescape(date_m.group(1).decode()) if date_m else ""
        region = unescape(region_m.group(1).decode()) if region_m else None
        rows.append((name, date, region))
    rows.sort()
    page, truncated = rows[:limit], len(rows) > limit
    account = S3_ACCOUNTS[caller]
    parts = [
        f'<?xml version="1.0" encoding="UTF-8"?>\n<ListAllMyBucketsResult xmlns="{S3_NS}">',
        f"<Owner><ID>{account.canonical_id}</ID>"
        f"<DisplayName>{escape(account.display_name)}</DisplayName></Owner><Buckets>",
    ]
    for name, date, region in page:
        extra = f"<BucketRegion>{escape(region)}</BucketRegion>" if region else ""
        parts.append(
            f"<Bucket><Name>{escape(name)}</Name><CreationDate>{escape(date)}</CreationDate>"
            f"{extra}</Bucket>"
        )
    parts.append("</Buckets>")
    if truncated:
        parts.append(f"<ContinuationToken>{encode_token(page[-1][0])}</ContinuationToken>")
    if prefix:
        parts.append(f"<Prefix>{escape(prefix)}</Prefix>")
    parts.append("</ListAllMyBucketsResult>")
    return "".join(parts).encode()
