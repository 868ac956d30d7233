"""S3 request signatures as the gate checks them, recomputed with botocore's own signers from
the access keys the gate knows: SigV4 (header, dated by X-Amz-Date or Date, and presigned
URL) and SigV2 (header, dated by Date or x-amz-date, and presigned URL; the canonical
resource as S3 computes it). POST-policy uploads are verified by harness.store_gates.s3.post."""

from __future__ import annotations

import calendar
import hmac
import re
import time
from collections.abc import Mapping
from datetime import UTC
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import unquote, urlsplit

from harness.gate.protocol import Exchange
from harness.gate.rules import ANONYMOUS, INVALID, Access, Verdict, header
from harness.store_gates.s3.keys import (
    SIGNATURE_MISMATCH,
    SIGV2_KEY,
    SIGV4,
    SIGV4_KEY,
    UNKNOWN_KEY,
    AccessKey,
    key_owner,
)
from harness.store_gates.s3.post import PostUpload

_SIGV4_FIELDS = re.compile(r"(Credential|SignedHeaders|Signature)=([^,\s]*)")
MAX_SKEW = 15 * 60  # seconds a signed request's date may differ from now (as in AWS)
MAX_PRESIGN_EXPIRES = 7 * 24 * 3600


def _deny(status: int, code: str, message: str) -> Verdict:
    return Verdict(False, status, code, message)


def _no_date() -> Verdict:
    return _deny(
        403, "AccessDenied", "AWS authentication requires a valid Date or x-amz-date header"
    )


def _skewed() -> Verdict:
    return _deny(
        403,
        "RequestTimeTooSkewed",
        "The difference between the request time and the current time is too large.",
    )


def _amz_time(value: str) -> float | None:
    """Seconds since the epoch of an ``x-amz-date`` (``20260101T000000Z``), None if bad."""
    try:
        return float(calendar.timegm(time.strptime(value, "%Y%m%dT%H%M%SZ")))
    except (ValueError, OverflowError):
        return None


def _signing_request(ex: Exchange, signed: list[str], url: str) -> Any:
    """The request as botocore's signers see it: the signed headers only (as sent)."""
    from botocore.awsrequest import AWSRequest

    headers = {name: ex.header(name) or "" for name in signed}
    return AWSRequest(method=ex.method, url=url, headers=headers)


def _sigv4_signer(
    base: type, secret_key: str, access_key: str, region: str, service: str, signed: list[str]
) -> Any:
    """A botocore SigV4 signer (``base``: S3SigV4Auth or S3SigV4QueryAuth) that signs exactly
    the headers the client listed in SignedHeaders (botocore's canonicalisation)."""
    from botocore.compat import HTTPHeaders
    from botocore.credentials import Credentials

    class _Signer(base):  # type: ignore[misc, valid-type]
        def headers_to_sign(self, request: Any) -> Any:
            selected = HTTPHeaders()
            for name in signed:
                selected[name] = request.headers.get(name, "")
            return selected

    return _Signer(Credentials(access_key, secret_key), service, region)


def sigv4_signature(
    ex: Exchange,
    secret_key: str,
    access_key: str,
    scope: list[str],
    amz_date: str,
    signed: list[str],
    query_auth: bool,
) -> str:
    """The SigV4 signature of a request (header-signed, or presigned when ``query_auth``),
    computed by botocore's own signer. ``scope`` is [date, region, service, aws4_request]."""
    from botocore.auth import S3SigV4Auth, S3SigV4QueryAuth

    raw = ex.path
    if query_auth:  # the signature is not part of what it signs
        path, _, query = raw.partition("?")
        kept = [p for p in query.split("&") if not p.lower().startswith("x-amz-signature=")]
        raw = path + ("?" + "&".join(kept) if kept else "")
    url = f"http://{ex.header('host') or 'localhost'}{raw}"
    request = _signing_request(ex, signed, url)
    if not query_auth and ex.header("x-amz-content-sha256"):
        request.headers["X-Amz-Content-SHA256"] = ex.header("x-amz-content-sha256")
    request.context["timestamp"] = amz_date
    base = S3SigV4QueryAuth if query_auth else S3SigV4Auth
    signer = _sigv4_signer(base, secret_key, access_key, scope[1], scope[2], signed)
    canonical = signer.canonical_request(request)
    return str(signer.signature(signer.string_to_sign(request, canonical), request))


_V2_QUERY_AUTH = ("awsaccesskeyid", "signature", "expires")
_V2_QUERY_HEADERS = ("content-md5", "content-type")


def sigv2_resource_path(path: str) -> str:
    """The path of a SigV2 canonical resource: a bucket-level request (``/bucket``, path
    style) is signed as ``/bucket/``, as S3 (and botocore's ``auth_path``) computes it."""
    if path.count("/") == 1 and len(path) > 1:
        return path + "/"
    return path


def sigv2_signature(ex: Exchange, secret_key: str, access_key: str, expires: str | None) -> str:
    """The SigV2 (HMAC-SHA1) signature of a request, computed by botocore's HmacV1 signer:
    header-signed (``expires`` None; with ``x-amz-date`` the Date line is empty), or a
    presigned URL (``expires``: its Expires; x-amz-* and Content-Type/MD5 query parameters
    are signed as headers, as botocore's HmacV1QueryAuth moved them there)."""
    from botocore.auth import HmacV1Auth
    from botocore.compat import HTTPHeaders
    from botocore.credentials import Credentials

    path, _, query = ex.path.partition("?")
    params = [p for p in query.split("&") if p]
    headers = HTTPHeaders()
    for name, value in ex.headers.items():
        if name not in ("authorization", "date"):
            headers[name] = value
    if expires is not None:
        date = expires
        for param in params:
            name, _, value = param.partition("=")
            name = unquote(name).lower()
            if name.startswith("x-amz-") or name in _V2_QUERY_HEADERS:
                del headers[name]
                headers[name] = unquote(value)
    else:  # with x-amz-date the date line is empty (x-amz-date is signed as an amz header)
        date = "" if "x-amz-date" in ex.headers else ex.header("date") or ""

    class _Signer(HmacV1Auth):
        def _get_date(self) -> str:
            return date

    kept = [p for p in params if p.split("=", 1)[0].lower() not in _V2_QUERY_AUTH]
    split = urlsplit(path + ("?" + "&".join(kept) if kept else ""))
    signer = _Signer(Credentials(access_key, secret_key))
    canonical = signer.canonical_string(
        ex.method, split, headers, auth_path=sigv2_resource_path(path)
    )
    return str(signer.sign_string(canonical))


def _http_time(value: str) -> float | None:
    """Seconds since the epoch of an RFC 1123 date (``Tue, 27 Mar 2007 19:36:42 GMT``)."""
    try:
        parsed = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if parsed is None:
        return None
    return (parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)).timestamp()


def request_time(ex: Exchange, sigv2: bool = False) -> tuple[str, float] | None:
    """The signer's timestamp (``20260101T000000Z``) and its epoch seconds, from
    ``x-amz-date`` or else the RFC 1123 ``Date`` header; None if neither is valid. SigV4's
    x-amz-date is ISO 8601 basic; SigV2's is RFC 1123 (``sigv2``)."""
    amz_date = ex.header("x-amz-date")
    if amz_date is not None:
        when = _http_time(amz_date) if sigv2 else _amz_time(amz_date)
    else:
        when = _http_time(ex.header("date") or "")
    if when is None:
        return None
    return amz_date if amz_date and not sigv2 else _amz_stamp(when), when


def _amz_stamp(when: float) -> str:
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(when))


class S3Signatures:
    """Signature checks of the S3 gate protocol (a base class of S3GateProtocol)."""

    keys: dict[str, AccessKey]
    """owner -> access key"""

    def identity(self, headers: Mapping[str, str], query: Mapping[str, list[str]]) -> str | None:
        """The account behind a request (header or presigned URL), ANONYMOUS or INVALID."""
        auth = header(headers, "Authorization")
        key: str | None = None
        if auth:
            match = SIGV4_KEY.search(auth) or SIGV2_KEY.match(auth)
            if not match:
                return INVALID
            key = match.group(1)
        else:
            lowered = {k.lower(): v for k, v in query.items()}
            if "x-amz-credential" in lowered:
                key = lowered["x-amz-credential"][0].split("/", 1)[0]
            elif "awsaccesskeyid" in lowered:
                key = lowered["awsaccesskeyid"][0]
        if key is None:
            return ANONYMOUS
        return next((o for o, k in self.keys.items() if k.access_key_id == key), INVALID)

    def authenticate(self, ex: Exchange, access: Access, identity: str | None) -> Verdict | None:
        """Verify the request's signature as S3 does (SigV4 header or presigned URL, SigV2),
        with botocore's signers: a wrong secret, a tampered or expired URL, a malformed
        header each get AWS's status and code. A POST-policy upload was verified when it was
        classified (harness.store_gates.s3.post): its verdict stands."""
        if isinstance(access.detail, PostUpload):
            return access.detail.verdict
        auth = ex.header("authorization")
        query = {k.lower(): v[0] for k, v in ex.query.items() if v}
        if auth:
            if auth.startswith(SIGV4 + " "):
                return self._check_sigv4_header(ex, auth)
            if auth.startswith("AWS "):
                return self._check_sigv2(ex, auth.split(":", 1)[-1].strip(), None)
            return _deny(400, "InvalidArgument", "Unsupported Authorization Type")
        if "x-amz-algorithm" in query or "x-amz-credential" in query:
            return self._check_presigned_v4(ex, query)
        if "awsaccesskeyid" in query:
            expires = query.get("expires", "")
            if not expires.isdigit():
                return _deny(
                    403,
                    "AccessDenied",
                    "Query-string authentication requires the "
                    "Signature, Expires and AWSAccessKeyId parameters",
                )
            if time.time() > int(expires):
                return _deny(403, "AccessDenied", "Request has expired")
            return self._check_sigv2(ex, query.get("signature", ""), expires)
        return None

    def _secret(self, access_key: str) -> str | None:
        found = key_owner(self.keys, access_key)
        return None if found is None else found[1]

    def _check_sigv4_header(self, ex: Exchange, auth: str) -> Verdict | None:
        fields = dict(_SIGV4_FIELDS.findall(auth[len(SIGV4) :]))
        credential = fields.get("Credential", "").split("/")
        signed = [h for h in fields.get("SignedHeaders", "").lower().split(";") if h]
        signature = fields.get("Signature", "")
        if len(credential) != 5 or not signed or not signature or credential[4] != "aws4_request":
            return _deny(
                400,
                "AuthorizationHeaderMalformed",
                "The authorization header is malformed; the Credential, SignedHeaders and "
                "Signature components are required and Credential must be "
                "<key>/<date>/<region>/<service>/aws4_request.",
            )
        secret = self._secret(credential[0])
        if secret is None:
            return UNKNOWN_KEY
        timed = request_time(ex)
        if timed is None:
            return _no_date()
        amz_date, when = timed
        if abs(time.time() - when) > MAX_SKEW:
            return _skewed()
        if credential[1] != amz_date[:8]:
            return SIGNATURE_MISMATCH
        expected = sigv4_signature(
            ex, secret, credential[0], credential[1:], amz_date, signed, query_auth=False
        )
        return None if hmac.compare_digest(expected, signature) else SIGNATURE_MISMATCH

    def _check_presigned_v4(self, ex: Exchange, query: Mapping[str, str]) -> Verdict | None:
        credential = query.get("x-amz-credential", "").split("/")
        amz_date = query.get("x-amz-date", "")
        expires = query.get("x-amz-expires", "")
        signed = [h for h in query.get("x-amz-signedheaders", "").lower().split(";") if h]
        signature = query.get("x-amz-signature", "")
        when = _amz_time(amz_date)
        if (
            query.get("x-amz-algorithm") != SIGV4
            or len(credential) != 5
            or when is None
            or not expires.isdigit()
            or not signed
            or not signature
        ):
            return _deny(
                400,
                "AuthorizationQueryParametersError",
                "Query-string authentication version 4 requires the X-Amz-Algorithm, "
                "X-Amz-Credential, X-Amz-Signature, X-Amz-Date, X-Amz-SignedHeaders, and "
                "X-Amz-Expires parameters.",
            )
        if int(expires) > MAX_PRESIGN_EXPIRES:
            return _deny(
                400,
                "AuthorizationQueryParametersError",
                "X-Amz-Expires must be less than a week (in seconds) that is 604800",
            )
        secret = self._secret(credential[0])
        if secret is None:
            return UNKNOWN_KEY
        if time.time() > when + int(expires):
            return _deny(403, "AccessDenied", "Request has expired")
        if credential[1] != amz_date[:8]:
            return SIGNATURE_MISMATCH
        expected = sigv4_signature(
            ex, secret, credential[0], credential[1:], amz_date, signed, query_auth=True
        )
        return None if hmac.compare_digest(expected, signature) else SIGNATURE_MISMATCH

    def _check_sigv2(self, ex: Exchange, signature: str, expires: str | None) -> Verdict | None:
        auth = ex.header("authorization") or ""
        match = SIGV2_KEY.match(auth)
        key = (
            match.group(1)
            if match
            else {k.lower(): v for k, v in ex.query.items()}.get("awsaccesskeyid", [""])[0]
        )
        secret = self._secret(key)
        if secret is None:
            return UNKNOWN_KEY
        if expires is None:  # header-signed: the request's own date must be now
            timed = request_time(ex, sigv2=True)
            if timed is None:
                return _no_date()
            if abs(time.time() - timed[1]) > MAX_SKEW:
                return _skewed()
        expected = sigv2_signature(ex, secret, key, expires)
        return None if hmac.compare_digest(expected, signature) else SIGNATURE_MISMATCH
