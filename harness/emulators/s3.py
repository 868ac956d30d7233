"""S3: moto's server behind the access gate, and the S3 gate protocol (SigV2/SigV4 access
keys, path-style requests, XML errors)."""

from __future__ import annotations

import http.client
import importlib.util
import re
import sys
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
