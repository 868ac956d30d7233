"""S3: moto's server behind the access gate, and the S3 gate protocol (SigV2/SigV4 access
keys, path-style requests, XML errors)."""

from __future__ import annotations

import calendar
import hmac
import http.client
import importlib.util
import re
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from html import unescape
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import unquote, urlsplit

from harness.accounts import OTHER, UNKNOWN, USER
from harness.emulators.base import EmulatorError, RunningEmulator
from harness.gate_protocol import Exchange, GateProtocol, UpstreamResponse
from harness.gate_rules import ANONYMOUS, INVALID, Access, Kind, Verdict, header, split_path
from harness.procs import LOOPBACK


@dataclass(frozen=True)
class AccessKey:
    """An S3-style access key pair."""

    access_key_id: str
    secret_access_key: str


# --- the gate protocol ---------------------------------------------------------------------

_SIGV4 = re.compile(r"Credential=([^/,\s]+)/")
_SIGV2 = re.compile(r"^AWS ([^:\s]+):")
_SIGV4_FIELDS = re.compile(r"(Credential|SignedHeaders|Signature)=([^,\s]*)")
SIGV4 = "AWS4-HMAC-SHA256"
MAX_SKEW = 15 * 60  # seconds a signed request's date may differ from now (as in AWS)
MAX_PRESIGN_EXPIRES = 7 * 24 * 3600


def _deny(status: int, code: str, message: str) -> Verdict:
    return Verdict(False, status, code, message)


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


def sigv2_signature(ex: Exchange, secret_key: str, access_key: str, expires: str | None) -> str:
    """The SigV2 (HMAC-SHA1) signature of a request, computed by botocore's HmacV1 signer."""
    from botocore.auth import HmacV1Auth
    from botocore.compat import HTTPHeaders
    from botocore.credentials import Credentials

    headers = HTTPHeaders()
    for name, value in ex.headers.items():
        if name not in ("authorization", "date"):
            headers[name] = value
    if expires is not None:
        date = expires
    else:  # with x-amz-date the date line is empty (x-amz-date is signed as an amz header)
        date = "" if "x-amz-date" in ex.headers else ex.header("date") or ""

    class _Signer(HmacV1Auth):
        def _get_date(self) -> str:
            return date

    path, _, query = ex.path.partition("?")
    kept = [
        p
        for p in query.split("&")
        if p.split("=", 1)[0].lower() not in ("awsaccesskeyid", "signature", "expires")
    ]
    split = urlsplit(path + ("?" + "&".join(kept) if kept and kept != [""] else ""))
    signer = _Signer(Credentials(access_key, secret_key))
    return str(signer.sign_string(signer.canonical_string(ex.method, split, headers)))


def _subresources(query: Mapping[str, list[str]]) -> set[str]:
    """Query keys that select a sub-resource or operation (not signing parameters)."""
    return {
        k
        for k in query
        if not k.lower().startswith("x-")
        and k.lower() not in ("awsaccesskeyid", "signature", "expires")
    }


def classify_s3(method: str, path: str, headers: Mapping[str, str]) -> Access:
    """Classify an S3 REST request (path-style addressing)."""
    raw_path, query = split_path(path)
    bucket, _, key_raw = raw_path.lstrip("/").partition("/")
    bucket = unquote(bucket)
    key = unquote(key_raw)
    sub = _subresources(query)
    method = method.upper()
    if not bucket:
        return Access(Kind.LIST_BUCKETS if method in ("GET", "HEAD") else Kind.DENY)
    if bucket == "moto-api":
        return Access(Kind.DENY)
    if not key_raw:
        if method in ("GET", "HEAD"):
            return Access(Kind.READ, bucket)
        if method == "PUT" and not sub:
            return Access(Kind.CREATE_BUCKET, bucket)
        if method == "DELETE":
            return Access(Kind.WRITE, bucket, deletes_bucket=not sub)
        if method == "POST" and "delete" in sub:
            return Access(Kind.WRITE, bucket, event="delete")
        return Access(Kind.WRITE, bucket)
    if method in ("GET", "HEAD"):
        return Access(Kind.READ, bucket, key)
    if method == "POST" and "select" in sub:
        return Access(Kind.READ, bucket, key)
    sources: tuple[str, ...] = ()
    copy_source = header(headers, "x-amz-copy-source")
    if copy_source:
        src = unquote(copy_source.split("?", 1)[0]).lstrip("/")
        sources = (src.split("/", 1)[0],)
    event: str | None = None
    if method == "PUT" and not sub:
        event = "copy" if copy_source else "put"
    elif method == "POST" and "uploadId" in sub:
        event = "multipart"
    elif method == "DELETE" and sub <= {"versionId"}:
        event = "delete"
    return Access(Kind.WRITE, bucket, key, sources=sources, event=event)


def _xml_escape(s: str) -> str:
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _filter_bucket_list(data: bytes, keep: set[str]) -> bytes:
    def repl(m: re.Match[bytes]) -> bytes:
        return m.group(0) if unescape(m.group(1).decode()) in keep else b""

    return re.sub(rb"<Bucket>\s*<Name>(.*?)</Name>.*?</Bucket>", repl, data, flags=re.S)


class S3GateProtocol(GateProtocol):
    """The S3 API as moto serves it, with the access keys of one S3-compatible service."""

    upstream_region = "us-east-1"
    """The region moto is told about (it refuses bucket creation without a location
    constraint in any other region)."""

    def __init__(self, keys: Mapping[str, AccessKey], region: str) -> None:
        self.keys = dict(keys)
        """owner -> access key"""
        self.region = region
        """The region clients sign for."""

    def identity(self, headers: Mapping[str, str], query: Mapping[str, list[str]]) -> str | None:
        """The account behind a request (header or presigned URL), ANONYMOUS or INVALID."""
        auth = header(headers, "Authorization")
        key: str | None = None
        if auth:
            match = _SIGV4.search(auth) or _SIGV2.match(auth)
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

    def classify(self, ex: Exchange) -> tuple[Access, str | None]:
        return classify_s3(ex.method, ex.path, ex.headers), self.identity(ex.headers, ex.query)

    def authenticate(self, ex: Exchange, access: Access, identity: str | None) -> Verdict | None:
        """Verify the request's signature as S3 does (SigV4 header or presigned URL, SigV2),
        with botocore's signers: a wrong secret, a tampered or expired URL, a malformed
        header each get AWS's status and code."""
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
        return next(
            (k.secret_access_key for k in self.keys.values() if k.access_key_id == access_key),
            None,
        )

    def _mismatch(self) -> Verdict:
        return _deny(
            403,
            "SignatureDoesNotMatch",
            "The request signature we calculated does not match the signature you provided. "
            "Check your key and signing method.",
        )

    def _unknown_key(self) -> Verdict:
        return _deny(
            403,
            "InvalidAccessKeyId",
            "The AWS Access Key Id you provided does not exist in our records.",
        )

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
            return self._unknown_key()
        amz_date = ex.header("x-amz-date") or ""
        when = _amz_time(amz_date)
        if when is None:
            return _deny(
                403, "AccessDenied", "AWS authentication requires a valid Date or x-amz-date header"
            )
        if abs(time.time() - when) > MAX_SKEW:
            return _deny(
                403,
                "RequestTimeTooSkewed",
                "The difference between the request time and the current time is too large.",
            )
        if credential[1] != amz_date[:8]:
            return self._mismatch()
        expected = sigv4_signature(
            ex, secret, credential[0], credential[1:], amz_date, signed, query_auth=False
        )
        return None if hmac.compare_digest(expected, signature) else self._mismatch()

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
            return self._unknown_key()
        if time.time() > when + int(expires):
            return _deny(403, "AccessDenied", "Request has expired")
        if credential[1] != amz_date[:8]:
            return self._mismatch()
        expected = sigv4_signature(
            ex, secret, credential[0], credential[1:], amz_date, signed, query_auth=True
        )
        return None if hmac.compare_digest(expected, signature) else self._mismatch()

    def _check_sigv2(self, ex: Exchange, signature: str, expires: str | None) -> Verdict | None:
        auth = ex.header("authorization") or ""
        match = _SIGV2.match(auth)
        key = (
            match.group(1)
            if match
            else {k.lower(): v for k, v in ex.query.items()}.get("awsaccesskeyid", [""])[0]
        )
        secret = self._secret(key)
        if secret is None:
            return self._unknown_key()
        expected = sigv2_signature(ex, secret, key, expires)
        return None if hmac.compare_digest(expected, signature) else self._mismatch()

    def fault_verdict(self, status: int) -> Verdict:
        codes = {
            503: ("SlowDown", "Please reduce your request rate."),
            500: ("InternalError", "We encountered an internal error. Please try again."),
            403: ("AccessDenied", "Access Denied"),
        }
        code, message = codes.get(
            status, ("ServiceUnavailable", "Service is unable to handle request.")
        )
        return Verdict(False, status, code, message)

    def error_body(self, ex: Exchange, verdict: Verdict, access: Access) -> tuple[str, bytes]:
        resource = urlsplit(ex.path).path
        named = f"<BucketName>{_xml_escape(access.bucket)}</BucketName>" if access.bucket else ""
        xml = (
            '<?xml version="1.0" encoding="UTF-8"?>\n<Error>'
            f"<Code>{verdict.code}</Code><Message>{_xml_escape(verdict.message)}</Message>"
            + named
            + f"<Resource>{_xml_escape(resource)}</Resource>"
            "<RequestId>skycore-gate</RequestId></Error>"
        )
        return "application/xml", xml.encode()

    def upstream_headers(
        self, ex: Exchange, access: Access, identity: str | None
    ) -> dict[str, str]:
        """moto applies object ACLs to unsigned requests (an anonymous GET of a public
        bucket's object gets 403). The gate has already allowed the read, so it forwards it
        as the bucket owner; moto does not verify signatures. A signature for a region other
        than moto's has its scope rewritten to moto's region (moto checks nothing else)."""
        auth = ex.header("authorization")
        if auth and self.region != self.upstream_region:
            scope = f"/{self.region}/s3/"
            if scope in auth:
                return {"Authorization": auth.replace(scope, f"/{self.upstream_region}/s3/", 1)}
        if identity is not ANONYMOUS or access.kind is not Kind.READ:
            return {}
        known = ex.state.buckets().get(access.bucket or "")
        if known is None or "x-amz-credential" in ex.path.lower():
            return {}
        key = self.keys[known.owner].access_key_id
        scope = f"20000101/{self.upstream_region}/s3/aws4_request"
        return {
            "Authorization": f"AWS4-HMAC-SHA256 Credential={key}/{scope}, "
            "SignedHeaders=host, Signature=0"
        }

    def after_success(
        self,
        ex: Exchange,
        access: Access,
        identity: str | None,
        up: UpstreamResponse,
        data: bytes,
    ) -> bytes:
        state = ex.state
        bucket = access.bucket or ""
        if access.kind is Kind.CREATE_BUCKET and identity:
            if bucket not in state.buckets():  # a canned public ACL makes it public
                acl = (ex.header("x-amz-acl") or "").lower()
                public = acl in ("public-read", "public-read-write")
                state.set_bucket(bucket, identity, public=public)
        elif access.kind is Kind.LIST_BUCKETS and identity:
            mine = {n for n, b in state.buckets().items() if b.owner == identity}
            data = _filter_bucket_list(data, mine)
        elif access.deletes_bucket:
            state.drop_bucket(bucket)
        if access.event is None:
            return data
        if access.event == "delete":
            if access.key is not None:
                state.record(bucket, access.key, 0, "delete")
            else:  # DeleteObjects: the response names what was deleted
                for m in re.finditer(rb"<Deleted>.*?<Key>(.*?)</Key>.*?</Deleted>", data, re.S):
                    state.record(bucket, unescape(m.group(1).decode()), 0, "delete")
            return data
        if b"<Error>" in data:  # S3 may report a failed copy/complete with status 200
            return data
        decoded = ex.header("x-amz-decoded-content-length")
        if access.event == "put" and (decoded or ex.header("content-length")):
            size = int(decoded or ex.header("content-length") or 0)
        else:
            size = _upstream_size(ex, urlsplit(ex.path).path)
        state.record(bucket, access.key or "", size, access.event)
        return data


def _upstream_size(ex: Exchange, path: str) -> int:
    """Object size from an unsigned HEAD to the emulator (moto does not check)."""
    host, port = ex.upstream
    conn = http.client.HTTPConnection(host, port, timeout=30)
    try:
        conn.request("HEAD", path, headers={"Host": ex.header("host") or host})
        resp = conn.getresponse()
        resp.read()
        return int(resp.getheader("Content-Length") or -1) if resp.status == 200 else -1
    except (OSError, ValueError):
        return -1
    finally:
        conn.close()


# --- the emulator --------------------------------------------------------------------------


class S3Emulator(RunningEmulator):
    """moto (``python -m moto.server``), in memory, behind the S3 gate.

    An S3-compatible store reuses it by subclassing: its own name, scheme, region, keys and
    public bucket, its own moto process and gate.
    """

    store = "s3"
    cli_alias = "aws"
    implementation = "moto"
    scheme: ClassVar[str] = "s3"
    region: ClassVar[str] = "us-east-1"
    public_dataset = "digitalcorpora"
    startup_timeout = 90.0
    keys: ClassVar[dict[str, AccessKey]] = {
        USER: AccessKey("AKIASKYCOREUSER00001", "skycore-user-secret-key-000000000000001"),
        OTHER: AccessKey("AKIASKYCOREOTHER0002", "skycore-other-secret-key-00000000000002"),
        UNKNOWN: AccessKey("AKIAUNKNOWNKEY000000", "not-a-known-secret"),
    }
    """owner -> access key; ``unknown`` is a key the gate does not know."""

    @classmethod
    def prepare(cls, home: Path) -> None:
        if importlib.util.find_spec("moto") is None or importlib.util.find_spec("flask") is None:
            raise EmulatorError(
                f"Cannot start the {cls.store} emulator: moto's server is not installed in "
                f"{sys.prefix}. Install it with 'pip install \"moto[server]\"' (or 'make venv')."
            )

    @classmethod
    def command(cls, home: Path, port: int, gate_port: int) -> tuple[list[str], dict[str, str]]:
        return [sys.executable, "-m", "moto.server", "-H", LOOPBACK, "-p", str(port)], {}

    @classmethod
    def gate_protocol(cls) -> S3GateProtocol:
        known = {owner: key for owner, key in cls.keys.items() if owner != UNKNOWN}
        return S3GateProtocol(known, cls.region)

    @classmethod
    def sdk_errors(cls) -> tuple[type[BaseException], ...]:
        from botocore.exceptions import ClientError

        return (ClientError,)

    def config_section(self) -> Any:
        from skycore.storage.s3 import AwsConfig

        key = self.keys[USER]
        return AwsConfig(
            endpoint_url=self.endpoint,
            access_key_id=key.access_key_id,
            secret_access_key=key.secret_access_key,
            region=self.region,
        )

    def client(self, owner: str | None = USER) -> Any:
        """A boto3 S3 client through the gate (path-style; unsigned if owner is None)."""
        import boto3
        from botocore import UNSIGNED
        from botocore.config import Config

        options: dict[str, Any] = {"s3": {"addressing_style": "path"}}
        if owner is None:
            return boto3.client(
                "s3",
                endpoint_url=self.endpoint,
                region_name=self.region,
                config=Config(signature_version=UNSIGNED, **options),
            )
        key = self.keys[owner]
        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            region_name=self.region,
            aws_access_key_id=key.access_key_id,
            aws_secret_access_key=key.secret_access_key,
            config=Config(**options),
        )

    def bucket_url(self, name: str, owner: str = USER) -> str:
        return f"{self.scheme}://{name}"

    def make_bucket(
        self,
        name: str,
        owner: str = USER,
        public: bool = False,
        objects: dict[str, bytes] | None = None,
    ) -> str:
        client = self.client(owner)
        client.create_bucket(Bucket=name)
        if public:
            self.set_bucket_access(name, owner, public=True)
        for key, data in (objects or {}).items():
            client.put_object(Bucket=name, Key=key, Body=data)
        return self.bucket_url(name, owner)

    def delete_bucket(self, name: str) -> None:
        from botocore.exceptions import ClientError

        client = self.client(self.bucket_owner(name) or USER)
        try:
            for page in client.get_paginator("list_objects_v2").paginate(Bucket=name):
                keys = [{"Key": o["Key"]} for o in page.get("Contents", [])]
                if keys:
                    client.delete_objects(Bucket=name, Delete={"Objects": keys, "Quiet": True})
            uploads = client.list_multipart_uploads(Bucket=name).get("Uploads", [])
            for up in uploads:
                client.abort_multipart_upload(Bucket=name, Key=up["Key"], UploadId=up["UploadId"])
            client.delete_bucket(Bucket=name)
        except ClientError as e:
            if e.response.get("Error", {}).get("Code") != "NoSuchBucket":
                raise

    def bucket_exists(self, name: str, owner: str = USER) -> bool:
        buckets = self.client(owner).list_buckets().get("Buckets", [])
        return name in {b["Name"] for b in buckets}

    def list_keys(self, bucket: str, owner: str | None = USER) -> list[str]:
        pages = self.client(owner).get_paginator("list_objects_v2").paginate(Bucket=bucket)
        return sorted(o["Key"] for page in pages for o in page.get("Contents", []))

    def read_object(self, bucket: str, key: str, owner: str | None = USER) -> bytes:
        return bytes(self.client(owner).get_object(Bucket=bucket, Key=key)["Body"].read())

    def write_object(self, bucket: str, key: str, data: bytes, owner: str | None = USER) -> None:
        self.client(owner).put_object(Bucket=bucket, Key=key, Body=data)

    def delete_object(self, bucket: str, key: str, owner: str | None = USER) -> None:
        self.client(owner).delete_object(Bucket=bucket, Key=key)

    def rclone_config(self, owner: str | None = USER, bucket: str | None = None) -> str:
        lines = [
            "type = s3",
            "provider = Other",
            f"endpoint = {self.endpoint}",
            f"region = {self.region}",
            "force_path_style = true",
        ]
        if owner is not None:
            key = self.keys[owner]
            lines += [
                f"access_key_id = {key.access_key_id}",
                f"secret_access_key = {key.secret_access_key}",
            ]
        return "[remote]\n" + "\n".join(lines) + "\n"


EMULATOR = S3Emulator
