"""POST-policy uploads (HTML forms, boto3 ``generate_presigned_post``) as S3 checks them:
the multipart/form-data body, the signature over the base64 policy (SigV4 and SigV2), the
policy's expiration and every one of its conditions, with S3's error codes and messages."""

from __future__ import annotations

import base64
import binascii
import calendar
import hashlib
import hmac
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from email.message import Message
from email.parser import HeaderParser
from email.utils import collapse_rfc2231_value
from typing import Any

from harness.gate.protocol import Exchange
from harness.gate.rules import INVALID, Verdict
from harness.store_gates.s3.keys import (
    SIGNATURE_MISMATCH,
    SIGV4,
    UNKNOWN_KEY,
    AccessKey,
    key_owner,
)

V4_FIELDS = ("x-amz-algorithm", "x-amz-credential", "x-amz-date", "x-amz-signature")
V2_FIELDS = ("awsaccesskeyid", "signature")
ALWAYS_EXEMPT = frozenset({"file", "policy", "x-amz-signature"})
"""Form fields no policy condition has to cover (besides ``x-ignore-*``)."""
V2_EXEMPT = ALWAYS_EXEMPT | {"awsaccesskeyid", "signature"}
STARTS_WITH_FIELDS = frozenset(
    {
        "key",
        "acl",
        "success_action_redirect",
        "redirect",
        "cache-control",
        "content-type",
        "content-disposition",
        "content-encoding",
        "expires",
    }
)
"""Fields a ``starts-with`` condition may name (and ``x-amz-meta-*``); the others (bucket,
success_action_status, the signing fields, other x-amz-*) match exactly only."""
_ARGUMENT_NAMES = {
    "awsaccesskeyid": "AWSAccessKeyId",
    "signature": "Signature",
    "policy": "Policy",
    "x-amz-algorithm": "X-Amz-Algorithm",
    "x-amz-credential": "X-Amz-Credential",
    "x-amz-date": "X-Amz-Date",
    "x-amz-signature": "X-Amz-Signature",
}


@dataclass(frozen=True)
class PostUpload:
    """A POST-policy upload as the gate read it: the bucket and the object key (``${filename}``
    substituted), the account whose key signed the policy (None: an anonymous form, INVALID:
    an unknown key), the denial (None: the form and its policy are valid), the canned ACL,
    the form fields (names lower-cased, the file excluded) and the file's size."""

    bucket: str
    key: str
    identity: str | None
    verdict: Verdict | None
    acl: str | None
    fields: dict[str, str]
    file_size: int


@dataclass(frozen=True)
class Form:
    """A parsed multipart/form-data body: its fields before the file (names lower-cased, the
    first of repeated names), the file's name and content (None if the form has no file)."""

    fields: dict[str, str]
    filename: str
    file: bytes | None


class Denied(Exception):
    """A POST upload refused: ``verdict`` says how, ``identity`` who signed it (when known)."""

    def __init__(self, verdict: Verdict, identity: str | None = None) -> None:
        super().__init__(verdict.message)
        self.verdict = verdict
        self.identity = identity


def _deny(status: int, code: str, message: str) -> Denied:
    return Denied(Verdict(False, status, code, message))


def _malformed() -> Denied:
    return _deny(
        400,
        "MalformedPOSTRequest",
        "The body of your POST request is not well-formed multipart/form-data.",
    )


def _missing(field: str) -> Denied:
    name = _ARGUMENT_NAMES.get(field, field)
    return _deny(
        400,
        "InvalidArgument",
        f"Bucket POST must contain a field named '{name}'.  If it is specified, please check "
        "the order of the fields.",
    )


def _invalid_policy(message: str) -> Denied:
    return _deny(400, "InvalidPolicyDocument", f"Invalid Policy: {message}")


def _policy_denial(message: str) -> Denied:
    return _deny(403, "AccessDenied", f"Invalid according to Policy: {message}")


# --- the form ------------------------------------------------------------------------------


def _params(header_name: str, value: str) -> Message:
    message = Message()
    message[header_name] = value
    return message


def _param(message: Message, name: str, header_name: str) -> str | None:
    value = message.get_param(name, header=header_name)
    if value is None or isinstance(value, str):
        return value
    return collapse_rfc2231_value(value)


def parse_form(content_type: str, body: bytes) -> Form:
    """Parse a multipart/form-data body (fields after the file are ignored, as S3 does);
    raises :class:`Denied` (MalformedPOSTRequest) if it is not well formed."""
    ctype = _params("content-type", content_type)
    boundary = _param(ctype, "boundary", "content-type")
    if ctype.get_content_type() != "multipart/form-data" or not boundary:
        raise _malformed()
    delimiter = b"\r\n--" + boundary.encode("latin-1")
    chunks = (b"\r\n" + body).split(delimiter)
    if len(chunks) < 3 or not chunks[-1].startswith(b"--"):
        raise _malformed()
    fields: dict[str, str] = {}
    for chunk in chunks[1:-1]:
        padding, newline, rest = chunk.partition(b"\r\n")
        if not newline or padding.strip(b" \t"):
            raise _malformed()
        if rest.startswith(b"\r\n"):
            head, content = b"", rest[2:]
        else:
            head, sep, content = rest.partition(b"\r\n\r\n")
            if not sep:
                raise _malformed()
        headers = HeaderParser().parsestr(head.decode("utf-8", "replace"))
        disposition = headers.get("content-disposition")
        if disposition is None:
            continue
        params = _params("content-disposition", str(disposition))
        name = (_param(params, "name", "content-disposition") or "").lower()
        if name == "file":
            filename = _param(params, "filename", "content-disposition") or ""
            return Form(fields, filename, content)
        if name and name not in fields:
            fields[name] = content.decode("utf-8", "replace")
    return Form(fields, "", None)


# --- the signature ---------------------------------------------------------------------------


def sigv4_policy_signature(secret: str, date: str, region: str, service: str, policy: str) -> str:
    """The SigV4 signature of a POST policy (hex): HMAC-SHA256 of the base64 policy with the
    signing key of the credential's scope."""
    key = ("AWS4" + secret).encode()
    for part in (date, region, service, "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    return hmac.new(key, policy.encode(), hashlib.sha256).hexdigest()


def sigv2_policy_signature(secret: str, policy: str) -> str:
    """The SigV2 signature of a POST policy: base64 of HMAC-SHA1 of the base64 policy."""
    digest = hmac.new(secret.encode(), policy.encode(), hashlib.sha1).digest()
    return base64.b64encode(digest).decode()


def check_signature(
    fields: Mapping[str, str], keys: Mapping[str, AccessKey]
) -> tuple[str | None, frozenset[str]]:
    """Verify the form's signature over its policy. Returns the signer (None for an
    anonymous form, which has no policy) and the fields exempt from the policy's coverage;
    raises :class:`Denied` (with the signer, INVALID for an unknown key)."""
    v4 = any(f in fields for f in V4_FIELDS)
    v2 = any(f in fields for f in V2_FIELDS)
    if not v4 and not v2:
        if "policy" in fields:
            raise _deny(403, "AccessDenied", "Access Denied")
        return None, frozenset()
    required = V4_FIELDS if v4 else V2_FIELDS
    for name in (*required, "policy"):
        if name not in fields:
            raise _missing(name)
    policy = fields["policy"]
    if v4:
        credential = fields["x-amz-credential"].split("/")
        if fields["x-amz-algorithm"] != SIGV4:
            raise _deny(
                400, "InvalidArgument", "Only AWS4-HMAC-SHA256 is supported as X-Amz-Algorithm"
            )
        if len(credential) != 5 or credential[4] != "aws4_request":
            raise _deny(
                400,
                "InvalidArgument",
                "Error parsing the X-Amz-Credential parameter; the Credential is mal-formed; "
                'expecting "<YOUR-AKID>/YYYYMMDD/REGION/SERVICE/aws4_request".',
            )
        found = key_owner(keys, credential[0])
        if found is None:
            raise Denied(UNKNOWN_KEY, INVALID)
        _, date, region, service, _ = credential
        expected = sigv4_policy_signature(found[1], date, region, service, policy)
        given = fields["x-amz-signature"]
    else:
        found = key_owner(keys, fields["awsaccesskeyid"])
        if found is None:
            raise Denied(UNKNOWN_KEY, INVALID)
        expected = sigv2_policy_signature(found[1], policy)
        given = fields["signature"]
    if not hmac.compare_digest(expected.encode(), given.encode()):
        raise Denied(SIGNATURE_MISMATCH, found[0])
    return found[0], ALWAYS_EXEMPT if v4 else V2_EXEMPT


# --- the policy ------------------------------------------------------------------------------


def decode_policy(policy: str) -> dict[str, Any]:
    """The policy document of a form's base64 ``policy`` field."""
    try:
        document = json.loads(base64.b64decode(policy.encode(), validate=True))
    except (binascii.Error, ValueError):
        raise _invalid_policy("Invalid JSON.") from None
    if not isinstance(document, dict):
        raise _invalid_policy("Invalid JSON.")
    return document


def expiration_time(value: Any) -> float:
    """Seconds since the epoch of a policy's ``expiration`` (ISO 8601 in UTC, with or without
    milliseconds)."""
    if not isinstance(value, str):
        raise _invalid_policy(f"Invalid 'expiration' value: '{value}'")
    for fmt in ("%Y-%m-%dT%H:%M:%SZ", "%Y-%m-%dT%H:%M:%S.%fZ"):
        try:
            return float(calendar.timegm(time.strptime(value, fmt)))
        except ValueError:
            continue
    raise _invalid_policy(f"Invalid 'expiration' value: '{value}'")


def _failed(condition: Any) -> Denied:
    return _policy_denial(f"Policy Condition failed: {json.dumps(condition)}")


def _field_of(operand: Any) -> str | None:
    if isinstance(operand, str) and operand.startswith("$") and len(operand) > 1:
        return operand[1:].lower()
    return None


def _may_start_with(name: str) -> bool:
    return name in STARTS_WITH_FIELDS or name.startswith("x-amz-meta-")


def _starts_with(name: str, value: str, prefix: str) -> bool:
    if name == "content-type" and "," in value:
        return all(part.strip().startswith(prefix) for part in value.split(","))
    return value.startswith(prefix)


def _size_bound(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    return None


def check_condition(condition: Any, form: Mapping[str, str]) -> str | None:
    """Check one non-range condition against the form (``form``: lower-cased names, the
    bucket and the substituted key included). Returns the field it covers; raises
    :class:`Denied` if it fails or S3 cannot read it."""
    if isinstance(condition, dict):
        if len(condition) != 1:
            raise _invalid_policy(
                "Invalid Simple-Condition: Simple-Conditions must have exactly one property "
                "specified."
            )
        ((name, expected),) = condition.items()
        name = str(name).lower()
        if not isinstance(expected, str) or form.get(name, "") != expected:
            raise _failed(condition)
        return name
    if not isinstance(condition, list) or len(condition) != 3:
        raise _failed(condition)
    operator, operand, expected = condition
    name = _field_of(operand)
    if not isinstance(operator, str) or name is None or not isinstance(expected, str):
        raise _failed(condition)
    value = form.get(name, "")
    operator = operator.lower()
    if operator == "eq":
        ok = value == expected
    elif operator == "starts-with":
        ok = _may_start_with(name) and _starts_with(name, value, expected)
    else:
        ok = False
    if not ok:
        raise _failed(condition)
    return name


def _is_range(condition: Any) -> bool:
    first = condition[0] if isinstance(condition, list) and condition else None
    return isinstance(first, str) and first.lower() == "content-length-range"


def check_size(condition: list[Any], size: int) -> None:
    """Check a ``content-length-range`` condition against the file's size."""
    low, high = (_size_bound(v) for v in condition[1:]) if len(condition) == 3 else (None, None)
    if low is None or high is None:
        raise _failed(condition)
    if size < low:
        raise _deny(
            400, "EntityTooSmall", "Your proposed upload is smaller than the minimum allowed size"
        )
    if size > high:
        raise _deny(400, "EntityTooLarge", "Your proposed upload exceeds the maximum allowed size")


def check_policy(
    document: Mapping[str, Any],
    form: Mapping[str, str],
    size: int,
    exempt: frozenset[str],
    now: float,
) -> None:
    """Check a policy document against a form as S3 does: the expiration, every condition
    (in order; the size ranges last), and that every form field (but the ``exempt`` ones
    and ``x-ignore-*``) is covered by a condition. ``form``: lower-cased field names with
    the request's ``bucket`` and the ``key`` after ``${filename}`` substitution. Raises
    :class:`Denied`."""
    if "expiration" not in document:
        raise _invalid_policy("Policy missing expiration.")
    if now > expiration_time(document["expiration"]):
        raise _policy_denial("Policy expired.")
    conditions = document.get("conditions")
    if not isinstance(conditions, list):
        raise _invalid_policy("Policy missing conditions.")
    covered: set[str] = set()
    ranges: list[list[Any]] = []
    for condition in conditions:
        if _is_range(condition):
            ranges.append(condition)
        else:
            covered.add(str(check_condition(condition, form)))
    extra = [
        name
        for name in form
        if name not in covered and name not in exempt and not name.startswith("x-ignore-")
    ]
    if extra:
        raise _policy_denial(f"Extra input fields: {', '.join(extra)}")
    for condition in ranges:
        check_size(condition, size)


# --- the whole upload ------------------------------------------------------------------------


def read_post_upload(ex: Exchange, bucket: str, keys: Mapping[str, AccessKey]) -> PostUpload:
    """Read and verify a POST-policy upload to ``bucket`` (``keys``: owner -> access key):
    the form, its signature and its policy, as S3 does."""
    try:
        form = parse_form(ex.header("content-type") or "", ex.read_body())
    except Denied as denied:
        return PostUpload(bucket, "", None, denied.verdict, None, {}, 0)
    key = form.fields.get("key", "").replace("${filename}", form.filename)
    size = len(form.file or b"")

    def upload(identity: str | None, verdict: Verdict | None) -> PostUpload:
        acl = form.fields.get("acl")
        return PostUpload(bucket, key, identity, verdict, acl, dict(form.fields), size)

    try:
        if not key:
            raise _missing("key")
        if form.file is None:
            raise _deny(
                400, "InvalidArgument", "POST requires exactly one file upload per request."
            )
        identity, exempt = check_signature(form.fields, keys)
    except Denied as denied:
        return upload(denied.identity, denied.verdict)
    if identity is None:
        return upload(None, None)  # an anonymous form: the bucket's access rules decide
    try:
        document = decode_policy(form.fields["policy"])
        values = {**form.fields, "bucket": bucket, "key": key}
        check_policy(document, values, size, exempt, time.time())
    except Denied as denied:
        return upload(identity, denied.verdict)
    return upload(identity, None)
