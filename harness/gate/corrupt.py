"""Wrong checksums for the ``corrupt`` fault (harness.gate.faults), free of any networking.

Every value keeps its form (a hex MD5 stays 32 hex digits, base64 stays base64 of as many
bytes) and differs in every digit or byte, so that a client parses it and finds that it
does not match: rclone ignores a checksum it cannot parse, which would hide the fault.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Callable, Iterable

_FLIP = str.maketrans("0123456789abcdefABCDEF", "fedcba9876543210FEDCBA")
_MD5_ETAG = re.compile(r'^(W/)?("?)([0-9a-fA-F]{32})(-\d+)?("?)$')
_XML_ETAG = re.compile(rb"(<ETag>)(.*?)(</ETag>)", re.S)
_HEX32 = re.compile(rb"[0-9a-fA-F]{32}")


def wrong_hex(text: str) -> str:
    """``text`` with each hex digit d replaced by 15 - d (same case, other characters kept)."""
    return text.translate(_FLIP)


def wrong_etag(etag: str) -> str | None:
    """An MD5-style ETag (``"<32 hex>"``, multipart ``"<32 hex>-N"``) with a wrong MD5;
    None for an ETag that is no MD5 (an opaque version: nothing to corrupt)."""
    found = _MD5_ETAG.match(etag.strip())
    if found is None:
        return None
    weak, q1, digest, parts, q2 = found.groups()
    return f"{weak or ''}{q1}{wrong_hex(digest)}{parts or ''}{q2}"


def wrong_base64(value: str) -> str | None:
    """A base64 digest (Content-MD5, crc32c, crc64) with every byte inverted; None if
    ``value`` is no base64."""
    try:
        raw = base64.b64decode(value.strip(), validate=True)
    except (binascii.Error, ValueError):
        return None
    if not raw:
        return None
    return base64.b64encode(bytes(b ^ 0xFF for b in raw)).decode()


def wrong_hash_list(value: str) -> str | None:
    """``crc32c=...,md5=...`` (GCS's x-goog-hash) with each digest wrong; None if none
    parses."""
    out, changed = [], False
    for part in value.split(","):
        name, sep, digest = part.strip().partition("=")
        wrong = wrong_base64(digest) if sep else None
        changed |= wrong is not None
        out.append(f"{name}={wrong}" if wrong is not None else part.strip())
    return ",".join(out) if changed else None


def wrong_headers(
    header: Callable[[str], str | None],
    etags: Iterable[str] = (),
    digests: Iterable[str] = (),
    lists: Iterable[str] = (),
) -> dict[str, str]:
    """Replacements for the checksum headers of a response (``header``: its lookup,
    case-insensitive): ``etags`` hold MD5 ETags, ``digests`` base64 digests, ``lists``
    ``name=digest`` lists. Headers absent or of another form are left out."""
    found: dict[str, str] = {}
    for names, wrong in ((etags, wrong_etag), (digests, wrong_base64), (lists, wrong_hash_list)):
        for name in names:
            value = header(name)
            changed = wrong(value) if value else None
            if changed is not None:
                found[name] = changed
    return found


def wrong_xml_etags(body: bytes) -> bytes | None:
    """An XML answer (S3 CopyObjectResult, CompleteMultipartUploadResult) with the MD5 of
    each ``<ETag>`` wrong; None if it has no MD5 ETag."""
    changed = False

    def flip(found: re.Match[bytes]) -> bytes:
        nonlocal changed
        inner = _HEX32.sub(lambda m: wrong_hex(m.group().decode()).encode(), found.group(2))
        changed |= inner != found.group(2)
        return found.group(1) + inner + found.group(3)

    out = _XML_ETAG.sub(flip, body)
    return out if changed else None


def wrong_json_digests(body: bytes, fields: Iterable[str]) -> bytes | None:
    """A JSON object resource (or one wrapped in ``resource``, as a rewrite answers) with
    each base64 digest of ``fields`` wrong; None if it has none of them."""
    try:
        data = json.loads(body)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    changed = False
    for obj in (data, data.get("resource")):
        if not isinstance(obj, dict):
            continue
        for name in fields:
            value = obj.get(name)
            wrong = wrong_base64(value) if isinstance(value, str) else None
            if wrong is not None:
                obj[name] = wrong
                changed = True
    return json.dumps(data).encode() if changed else None
