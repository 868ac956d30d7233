"""The S3 gate protocol (runs inside the gate): path-style requests classified into
accesses, callers identified by access key (signatures: harness.emulators.s3_signatures),
denials as S3's XML errors, bucket ownership and write events recorded from responses."""

from __future__ import annotations

import http.client
import re
from collections.abc import Mapping
from html import unescape
from urllib.parse import unquote, urlsplit
from xml.sax.saxutils import escape

from harness.emulators.s3_signatures import SIGV2_KEY, SIGV4_KEY, AccessKey, S3Signatures
from harness.gate.protocol import Exchange, GateProtocol, Success
from harness.gate.rules import ANONYMOUS, INVALID, Access, Kind, Verdict, header, split_path


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


def _filter_bucket_list(data: bytes, keep: set[str]) -> bytes:
    def repl(m: re.Match[bytes]) -> bytes:
        return m.group(0) if unescape(m.group(1).decode()) in keep else b""

    return re.sub(rb"<Bucket>\s*<Name>(.*?)</Name>.*?</Bucket>", repl, data, flags=re.S)


class S3GateProtocol(S3Signatures, GateProtocol):
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

    def classify(self, ex: Exchange) -> tuple[Access, str | None]:
        return classify_s3(ex.method, ex.path, ex.headers), self.identity(ex.headers, ex.query)

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
        named = f"<BucketName>{escape(access.bucket)}</BucketName>" if access.bucket else ""
        xml = (
            '<?xml version="1.0" encoding="UTF-8"?>\n<Error>'
            f"<Code>{verdict.code}</Code><Message>{escape(verdict.message)}</Message>"
            + named
            + f"<Resource>{escape(resource)}</Resource>"
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

    def on_success(self, done: Success) -> bytes:
        ex, access, identity, data = done.ex, done.access, done.identity, done.data
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
