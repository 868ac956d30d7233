"""The access gate: a streaming reverse proxy in front of one storage emulator.

Run as ``python -m harness.gate --store s3|gcs|azure --listen 127.0.0.1:G
--upstream http://127.0.0.1:P --state FILE``.

For S3 and GCS it enforces the local cloud's access rules (harness.gate_rules) and answers
denials in the API's own error format; for Azure it forwards everything (Azurite enforces
access). For every store it records each completed write as an event. Bodies stream both
ways in 1 MiB pieces (no buffering of uploads or downloads); only small control responses
(bucket creation, listings of buckets, write acknowledgements) are read whole.

Admin API, never forwarded:
``GET /__gate__/health``, ``GET|POST /__gate__/buckets`` (``{"bucket", "owner", "public"}``),
``GET /__gate__/events?bucket=B``.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import ipaddress
import json
import os
import re
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from html import unescape
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from harness.accounts import ACCOUNTS, OWNERS
from harness.gate_rules import (
    ANONYMOUS,
    Access,
    Bucket,
    Kind,
    Verdict,
    classify_azure,
    classify_gcs,
    classify_gcs_batch,
    classify_s3,
    decide,
    gcs_bucket_from_insert,
    gcs_identity,
    s3_identity,
)

CHUNK = 1 << 20
ADMIN_PREFIX = "/__gate__/"
STORES = ("s3", "gcs", "azure")
LINGER_SECONDS = 60.0  # how long a denied request's body is read and dropped
MAX_SMALL_BODY = 16 << 20  # bodies the gate reads whole to classify a request
UPSTREAM_TIMEOUT = 600.0
MAX_EVENTS_PER_BUCKET = 200_000  # the oldest go first beyond this

# Headers that describe one connection, not the message (RFC 9110 7.6.1), plus Expect,
# which the gate answers itself.
_HOP_BY_HOP = frozenset(
    (
        "connection",
        "keep-alive",
        "proxy-connection",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "upgrade",
        "transfer-encoding",
        "expect",
    )
)


@dataclass(frozen=True)
class Event:
    """A completed write seen by the gate."""

    bucket: str
    key: str
    size: int
    op: str
    t_ns: int


class GateState:
    """Bucket ownership (persisted in the state file), write events and resumable uploads
    (in memory). Thread-safe."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self.create_lock = threading.Lock()
        self._buckets: dict[str, Bucket] = {}
        self._events: dict[str, list[Event]] = {}
        self._uploads: dict[str, tuple[str, str | None]] = {}
        if path.exists():
            data = json.loads(path.read_text() or "{}")
            for name, info in data.get("buckets", {}).items():
                self._buckets[name] = Bucket(info["owner"], bool(info.get("public", False)))

    def buckets(self) -> dict[str, Bucket]:
        """A snapshot of the bucket table."""
        with self._lock:
            return dict(self._buckets)

    def set_bucket(self, name: str, owner: str, public: bool) -> None:
        """Record (or change) a bucket's owner and public flag."""
        with self._lock:
            self._buckets[name] = Bucket(owner, public)
            self._save()

    def drop_bucket(self, name: str) -> None:
        """Forget a deleted bucket."""
        with self._lock:
            if self._buckets.pop(name, None) is not None:
                self._save()

    def _save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(f".tmp{os.getpid()}")
        data = {"buckets": {k: asdict(v) for k, v in sorted(self._buckets.items())}}
        tmp.write_text(json.dumps(data, indent=1))
        tmp.replace(self.path)

    def record(self, bucket: str, key: str, size: int, op: str) -> None:
        """Append a write event stamped now; the list stays in completion order."""
        with self._lock:
            event = Event(bucket, key, size, op, time.time_ns())
            events = self._events.setdefault(bucket, [])
            events.append(event)
            if len(events) > MAX_EVENTS_PER_BUCKET:
                del events[: len(events) - MAX_EVENTS_PER_BUCKET]

    def events(self, bucket: str | None) -> list[Event]:
        """Events of one bucket (all buckets if None), oldest first."""
        with self._lock:
            if bucket is not None:
                return list(self._events.get(bucket, ()))
            return sorted((e for events in self._events.values() for e in events), key=_t_ns)

    def add_upload(self, upload_id: str, bucket: str, owner: str | None) -> None:
        """Remember who started a GCS resumable upload (its id is its credential)."""
        with self._lock:
            self._uploads[upload_id] = (bucket, owner)

    def upload(self, upload_id: str) -> tuple[str, str | None] | None:
        """Bucket and initiator of a resumable upload started through the gate."""
        with self._lock:
            return self._uploads.get(upload_id)

    def finish_upload(self, upload_id: str) -> None:
        """Forget a resumable upload that completed."""
        with self._lock:
            self._uploads.pop(upload_id, None)


def _t_ns(event: Event) -> int:
    return event.t_ns


class GateServer(ThreadingHTTPServer):
    """The gate's HTTP server: one thread per client connection."""

    daemon_threads = True
    request_queue_size = 256

    def __init__(
        self, listen: tuple[str, int], store: str, upstream: tuple[str, int], state: GateState
    ) -> None:
        self.store = store
        self.upstream = upstream
        self.state = state
        super().__init__(listen, GateHandler)


class _Upstream:
    """One response from the emulator, with the connection it came on."""

    def __init__(self, conn: http.client.HTTPConnection, resp: http.client.HTTPResponse):
        self.conn = conn
        self.resp = resp
        self.status = resp.status
        self.reason = resp.reason
        self.headers: list[tuple[str, str]] = resp.getheaders()

    def header(self, name: str) -> str | None:
        """First value of a response header (case-insensitive)."""
        return self.resp.getheader(name)

    def close(self) -> None:
        """Close the upstream connection."""
        self.resp.close()
        self.conn.close()


class GateHandler(BaseHTTPRequestHandler):
    """Handles one client connection (HTTP/1.1 keep-alive)."""

    protocol_version = "HTTP/1.1"
    server: GateServer
    timeout = 300
    _expect_continue = False

    # Expect: 100-continue is answered only once the request is allowed, so that a denied
    # upload is never sent.
    def handle_expect_100(self) -> bool:
        self._expect_continue = True
        return True

    def do_GET(self) -> None:
        self._handle()

    do_HEAD = do_PUT = do_POST = do_DELETE = do_PATCH = do_OPTIONS = do_GET

    def log_message(self, format: str, *args: Any) -> None:
        sys.stderr.write(f"{time.strftime('%H:%M:%S')} {format % args}\n")

    # --- top level -----------------------------------------------------------------------

    def _handle(self) -> None:
        started = time.monotonic()
        self._expect_continue_pending = self._expect_continue
        self._expect_continue = False
        self._body: bytes | None = None
        self._body_consumed = False
        status = 0
        try:
            status = self._admin() if self.path.startswith(ADMIN_PREFIX) else self._proxy()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
            status = -1
        except Exception as e:  # keep the gate alive; tell the client
            self.close_connection = True
            self.log_message("error on %s %s: %r", self.command, self.path, e)
            with contextlib.suppress(OSError):
                self._send_simple(502, "text/plain", f"access gate error: {e!r}\n".encode())
            status = 502
        self.log_message(
            "%s %s -> %s (%.0f ms)",
            self.command,
            self.path[:200],
            status,
            (time.monotonic() - started) * 1000,
        )

    # --- admin API -----------------------------------------------------------------------

    def _admin(self) -> int:
        state = self.server.state
        parts = urlsplit(self.path)
        query = parse_qs(parts.query)
        route = parts.path[len(ADMIN_PREFIX) :].strip("/")
        if route == "health" and self.command in ("GET", "HEAD"):
            problem = self._upstream_problem()
            body = {
                "ok": problem is None,
                "store": self.server.store,
                "pid": os.getpid(),
                "upstream": "http://{}:{}".format(*self.server.upstream),
            }
            if problem:
                body["error"] = problem
            return self._send_json(200 if problem is None else 503, body)
        if route == "events" and self.command == "GET":
            bucket = query.get("bucket", [None])[0]
            return self._send_json(200, [asdict(e) for e in state.events(bucket)])
        if route == "buckets" and self.command == "GET":
            return self._send_json(200, {k: asdict(v) for k, v in sorted(state.buckets().items())})
        if route == "buckets" and self.command == "POST":
            try:
                data = json.loads(self._read_body())
                name, owner = data["bucket"], data["owner"]
                public = bool(data.get("public", False))
                if not isinstance(name, str) or not name or owner not in OWNERS:
                    raise ValueError(f"owner must be one of {OWNERS} and bucket non-empty")
            except (ValueError, KeyError, TypeError) as e:
                return self._send_json(400, {"error": f"bad request: {e}"})
            state.set_bucket(name, owner, public)
            return self._send_json(200, {"bucket": name, "owner": owner, "public": public})
        if route == "buckets" and self.command == "DELETE":
            name = query.get("bucket", [""])[0]
            state.drop_bucket(name)
            return self._send_json(200, {"bucket": name})
        return self._answer_unforwarded(
            lambda: self._send_json(404, {"error": f"no admin route {self.command} {parts.path}"})
        )

    def _upstream_problem(self) -> str | None:
        host, port = self.server.upstream
        conn = http.client.HTTPConnection(host, port, timeout=4)
        try:
            conn.request("HEAD", "/")
            conn.getresponse().read()
        except OSError as e:
            return f"upstream {host}:{port} does not answer: {e}"
        finally:
            conn.close()
        return None

    # --- proxying ------------------------------------------------------------------------

    def _proxy(self) -> int:
        store = self.server.store
        state = self.server.state
        method = self.command
        query = parse_qs(urlsplit(self.path).query, keep_blank_values=True)
        identity: str | None = ANONYMOUS
        headers = {k.lower(): v for k, v in self.headers.items()}
        if store == "s3":
            access = classify_s3(method, self.path, headers)
            identity = s3_identity(headers, query)
        elif store == "gcs":
            access = classify_gcs(method, self.path, headers)
            identity = gcs_identity(headers)
            if access.needs_body:
                body = self._read_body()
                if access.kind is Kind.CREATE_BUCKET:
                    access.bucket = gcs_bucket_from_insert(body)
                else:
                    access = classify_gcs_batch(body)
            upload_id = query.get("upload_id", [None])[0]
            started = state.upload(upload_id) if upload_id else None
            if started is not None and started[0] == access.bucket:
                identity = started[1]  # the upload id is the credential, as in GCS
        else:
            access = classify_azure(method, self.path, headers)

        verdict = decide(access, identity, state.buckets())
        if not verdict.allowed:
            return self._deny(verdict, access)
        lock = state.create_lock if access.kind is Kind.CREATE_BUCKET else contextlib.nullcontext()
        with lock:
            if access.kind is Kind.CREATE_BUCKET:  # decide again now that creation is serial
                verdict = decide(access, identity, state.buckets())
                if not verdict.allowed:
                    return self._deny(verdict, access)
            if self._expect_continue_pending:
                self.send_response_only(100)
                self.end_headers()
                self._expect_continue_pending = False
            up = self._forward(self._extra_upstream_headers(access, identity))
            try:
                if self._wants_whole_response(access, up):
                    data = up.resp.read()
                    if 200 <= up.status < 300:
                        data = self._after_success(access, identity, up, data)
                    self._relay_whole(up, data)
                else:
                    self._relay_stream(up)
            finally:
                up.close()
        return up.status

    def _wants_whole_response(self, access: Access, up: _Upstream) -> bool:
        if self.command == "HEAD" or not 200 <= up.status < 300:
            return False
        if up.resp.length is not None and up.resp.length > MAX_SMALL_BODY:
            return False
        return (
            access.event is not None
            or access.deletes_bucket
            or access.kind in (Kind.CREATE_BUCKET, Kind.LIST_BUCKETS)
            or (self.server.store == "gcs" and "uploadType=resumable" in self.path)
        )

    def _extra_upstream_headers(self, access: Access, identity: str | None) -> dict[str, str]:
        """moto applies object ACLs to unsigned requests (an anonymous GET of a public
        bucket's object gets 403). The gate has already allowed the read, so it forwards it
        as the bucket owner; moto does not verify signatures."""
        if self.server.store != "s3" or identity is not ANONYMOUS or access.kind is not Kind.READ:
            return {}
        known = self.server.state.buckets().get(access.bucket or "")
        if known is None or "x-amz-credential" in self.path.lower():
            return {}
        key = ACCOUNTS[known.owner].s3_access_key_id
        return {
            "Authorization": f"AWS4-HMAC-SHA256 Credential={key}/20000101/us-east-1/s3/"
            "aws4_request, SignedHeaders=host, Signature=0"
        }

    def _forward(self, extra: dict[str, str] | None = None) -> _Upstream:
        """Send the request (streaming its body) to the emulator and return its response."""
        host, port = self.server.upstream
        conn = http.client.HTTPConnection(host, port, timeout=UPSTREAM_TIMEOUT)
        conn.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
        chunked = self._chunked()
        body = self._body
        for name, value in self.headers.items():
            lname = name.lower()
            if lname in _HOP_BY_HOP and not (lname == "transfer-encoding" and body is None):
                continue
            if lname == "content-length" and body is not None:
                continue
            conn.putheader(name, value)
        for name, value in (extra or {}).items():
            conn.putheader(name, value)
        if body is not None:
            conn.putheader("Content-Length", str(len(body)))
        conn.endheaders()
        if body is not None:
            if body:
                conn.send(body)
        elif chunked:
            for piece in self._raw_chunked():
                conn.send(piece)
        else:
            for piece in self._body_pieces():
                conn.send(piece)
        self._body_consumed = True
        return _Upstream(conn, conn.getresponse())

    def _content_length(self) -> int:
        try:
            return max(0, int(self.headers.get("Content-Length") or 0))
        except ValueError:
            return 0

    def _body_pieces(self) -> Iterator[bytes]:
        """The request body (Content-Length framing) in pieces of at most CHUNK bytes."""
        remaining = self._content_length()
        while remaining > 0:
            piece = self.rfile.read1(min(remaining, CHUNK))
            if not piece:
                raise ConnectionResetError("client closed the connection mid-body")
            remaining -= len(piece)
            yield piece

    def _raw_chunked(self) -> Iterator[bytes]:
        """The request body in chunked framing, passed through verbatim."""
        while True:
            line = self.rfile.readline(65537)
            if not line:
                raise ConnectionResetError("client closed the connection mid-body")
            yield line
            size = int(line.split(b";", 1)[0].strip() or b"0", 16)
            if size == 0:
                while True:
                    trailer = self.rfile.readline(65537)
                    yield trailer
                    if trailer in (b"\r\n", b"\n", b""):
                        return
            remaining = size + 2  # data and its CRLF
            while remaining > 0:
                piece = self.rfile.read1(min(remaining, CHUNK))
                if not piece:
                    raise ConnectionResetError("client closed the connection mid-body")
                remaining -= len(piece)
                yield piece

    def _read_body(self) -> bytes:
        """Read the whole (small) request body, de-chunked; it is forwarded from memory."""
        if self._body is None:
            if self._expect_continue_pending:
                self.send_response_only(100)
                self.end_headers()
                self._expect_continue_pending = False
            if self._chunked():
                raw = b"".join(self._raw_chunked())
                self._body = _dechunk(raw)
            else:
                if self._content_length() > MAX_SMALL_BODY:
                    raise ValueError("request body too large for this endpoint")
                self._body = b"".join(self._body_pieces())
            self._body_consumed = True
        return self._body

    def _chunked(self) -> bool:
        return "chunked" in (self.headers.get("Transfer-Encoding") or "").lower()

    def _answer_unforwarded(self, send: Callable[[], int]) -> int:
        """Answer a request the gate does not forward (admin or denied).

        A pending body is not read first: the answer goes out with ``Connection: close``,
        then the body is read and dropped (a lingering close, bounded in time), so that a
        client still sending sees the answer instead of a reset connection. With ``Expect:
        100-continue`` pending the client never sends the body at all.
        """
        if self._body_consumed:
            return send()
        if self._expect_continue_pending:
            self.close_connection = True
            self._body_consumed = True
            return send()
        if not self._chunked() and self._content_length() == 0:
            self._body_consumed = True
            return send()
        self.close_connection = True
        status = send()
        self._body_consumed = True
        deadline = time.monotonic() + LINGER_SECONDS
        with contextlib.suppress(OSError, ValueError):
            self.connection.settimeout(5)
            for _ in self._raw_chunked() if self._chunked() else self._body_pieces():
                if time.monotonic() > deadline:
                    break
        return status

    # --- responses -----------------------------------------------------------------------

    def _relay_whole(self, up: _Upstream, data: bytes) -> None:
        self.send_response_only(up.status, up.reason)
        for name, value in up.headers:
            if name.lower() in _HOP_BY_HOP or name.lower() == "content-length":
                continue
            self.send_header(name, value)
        if up.status not in (204, 304):
            self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD" and data:
            self.wfile.write(data)

    def _relay_stream(self, up: _Upstream) -> None:
        resp = up.resp
        no_body = self.command == "HEAD" or up.status in (204, 304) or 100 <= up.status < 200
        rechunk = not no_body and resp.length is None
        if rechunk and self.request_version == "HTTP/1.0":  # no chunked coding: end by close
            rechunk = False
            self.close_connection = True
        self.send_response_only(up.status, up.reason)
        for name, value in up.headers:
            lname = name.lower()
            if lname in _HOP_BY_HOP or (rechunk and lname == "content-length"):
                continue
            self.send_header(name, value)
        if rechunk:
            self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        if no_body:
            return
        while True:
            piece = resp.read1(CHUNK) if resp.length is None else resp.read(CHUNK)
            if not piece:
                break
            if rechunk:
                self.wfile.write(b"%x\r\n%b\r\n" % (len(piece), piece))
            else:
                self.wfile.write(piece)
        if rechunk:
            self.wfile.write(b"0\r\n\r\n")
        elif resp.length:
            self.close_connection = True  # upstream ended early: the client must notice

    def _send_simple(self, status: int, ctype: str, body: bytes) -> None:
        self.send_response_only(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _send_json(self, status: int, data: Any) -> int:
        self._send_simple(status, "application/json", json.dumps(data).encode())
        return status

    def _deny(self, verdict: Verdict, access: Access) -> int:
        return self._answer_unforwarded(lambda: self._send_error(verdict, access))

    def _send_error(self, verdict: Verdict, access: Access) -> int:
        """The verdict as the API's own error: GCS JSON or S3 XML."""
        if self.server.store == "gcs":
            reason = {403: "forbidden", 409: "conflict"}.get(verdict.status, "forbidden")
            err = {"domain": "global", "reason": reason, "message": verdict.message}
            data = {"error": {"code": verdict.status, "message": verdict.message, "errors": [err]}}
            self._send_json(verdict.status, data)
        else:
            resource = urlsplit(self.path).path
            named = (
                f"<BucketName>{_xml_escape(access.bucket)}</BucketName>" if access.bucket else ""
            )
            xml = (
                '<?xml version="1.0" encoding="UTF-8"?>\n<Error>'
                f"<Code>{verdict.code}</Code><Message>{_xml_escape(verdict.message)}</Message>"
                + named
                + f"<Resource>{_xml_escape(resource)}</Resource>"
                "<RequestId>skycore-gate</RequestId></Error>"
            )
            self._send_simple(verdict.status, "application/xml", xml.encode())
        return verdict.status

    # --- bookkeeping after a successful upstream response -------------------------------

    def _after_success(
        self, access: Access, identity: str | None, up: _Upstream, data: bytes
    ) -> bytes:
        store = self.server.store
        if store == "s3":
            return self._after_s3(access, identity, up, data)
        if store == "gcs":
            return self._after_gcs(access, identity, up, data)
        self._after_azure(access, up)
        return data

    def _after_s3(self, access: Access, identity: str | None, up: _Upstream, data: bytes) -> bytes:
        state = self.server.state
        bucket = access.bucket or ""
        if access.kind is Kind.CREATE_BUCKET and identity:
            if bucket not in state.buckets():  # a canned public ACL makes it public
                acl = (self.headers.get("x-amz-acl") or "").lower()
                public = acl in ("public-read", "public-read-write")
                state.set_bucket(bucket, identity, public=public)
        elif access.kind is Kind.LIST_BUCKETS and identity:
            mine = {n for n, b in state.buckets().items() if b.owner == identity}
            data = _filter_s3_bucket_list(data, mine)
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
        size = -1
        decoded = self.headers.get("x-amz-decoded-content-length")
        if access.event == "put" and (decoded or self.headers.get("Content-Length")):
            size = int(decoded or self.headers.get("Content-Length") or 0)
        else:
            size = self._upstream_size(urlsplit(self.path).path)
        state.record(bucket, access.key or "", size, access.event)
        return data

    def _after_gcs(self, access: Access, identity: str | None, up: _Upstream, data: bytes) -> bytes:
        state = self.server.state
        obj = _json_object(data)
        if access.kind is Kind.CREATE_BUCKET and identity:
            name = obj.get("name") or access.bucket
            if isinstance(name, str) and name not in state.buckets():
                state.set_bucket(name, identity, public=False)
            return data
        if access.kind is Kind.LIST_BUCKETS and identity and isinstance(obj.get("items"), list):
            mine = {n for n, b in state.buckets().items() if b.owner == identity}
            obj["items"] = [i for i in obj["items"] if i.get("name") in mine]
            return json.dumps(obj).encode()
        if access.deletes_bucket:
            state.drop_bucket(access.bucket or "")
            return data
        if "uploadType=resumable" in self.path and self.command == "POST":
            location = up.header("Location") or ""
            upload_id = parse_qs(urlsplit(location).query).get("upload_id", [None])[0]
            if upload_id and access.bucket:
                state.add_upload(upload_id, access.bucket, identity)
            return data
        if access.event == "delete":
            state.record(access.bucket or "", access.key or "", 0, "delete")
            return data
        if access.event is None:
            return data
        if access.event == "rewrite":
            if not obj.get("done"):
                return data
            obj = obj.get("resource") or {}
        name = obj.get("name")
        if not isinstance(name, str):
            if access.event == "put" and access.key and not obj:  # XML-style PUT /bucket/key
                state.record(access.bucket or "", access.key, self._content_length(), "put")
            return data
        try:
            size = int(obj.get("size", -1))
        except (TypeError, ValueError):
            size = -1
        state.record(str(obj.get("bucket") or access.bucket), name, size, access.event)
        if access.event == "resumable":
            state.finish_upload(parse_qs(urlsplit(self.path).query).get("upload_id", [""])[0])
        return data

    def _after_azure(self, access: Access, up: _Upstream) -> None:
        if access.event is None or access.bucket is None or access.key is None:
            return
        size = 0
        if access.event == "put":
            size = self._content_length()
        elif access.event != "delete":
            size = self._azure_size()
        self.server.state.record(access.bucket, access.key, size, access.event)

    def _upstream_size(self, path: str) -> int:
        """Object size from an unsigned HEAD to the emulator (moto does not check)."""
        host, port = self.server.upstream
        conn = http.client.HTTPConnection(host, port, timeout=30)
        try:
            conn.request("HEAD", path, headers={"Host": self.headers.get("Host") or host})
            resp = conn.getresponse()
            resp.read()
            return int(resp.getheader("Content-Length") or -1) if resp.status == 200 else -1
        except (OSError, ValueError):
            return -1
        finally:
            conn.close()

    def _azure_size(self) -> int:
        """Blob size via the SDK, signed with the account key from harness.accounts."""
        segs = urlsplit(self.path).path.lstrip("/").split("/", 2)
        account = next((a for a in ACCOUNTS.values() if a.azure_account == segs[0]), None)
        if account is None or len(segs) < 3:
            return -1
        from azure.storage.blob import BlobClient

        host, port = self.server.upstream
        blob = BlobClient(
            f"http://{host}:{port}/{account.azure_account}",
            container_name=unquote(segs[1]),
            blob_name=unquote(segs[2]),
            credential={"account_name": account.azure_account, "account_key": account.azure_key},
            retry_total=0,
        )
        try:
            return int(blob.get_blob_properties().size)
        except Exception:
            return -1


def _xml_escape(s: str) -> str:
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _json_object(data: bytes) -> dict[str, Any]:
    try:
        obj = json.loads(data or b"{}")
    except ValueError:
        return {}
    return obj if isinstance(obj, dict) else {}


def _filter_s3_bucket_list(data: bytes, keep: set[str]) -> bytes:
    def repl(m: re.Match[bytes]) -> bytes:
        return m.group(0) if unescape(m.group(1).decode()) in keep else b""

    return re.sub(rb"<Bucket>\s*<Name>(.*?)</Name>.*?</Bucket>", repl, data, flags=re.S)


def _dechunk(raw: bytes) -> bytes:
    out = bytearray()
    pos = 0
    while True:
        end = raw.index(b"\r\n", pos)
        size = int(raw[pos:end].split(b";", 1)[0] or b"0", 16)
        if size == 0:
            return bytes(out)
        out += raw[end + 2 : end + 2 + size]
        pos = end + 2 + size + 2


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _host_port(value: str, what: str) -> tuple[str, int]:
    parts = urlsplit(value if "//" in value else f"//{value}")
    if not parts.hostname or not parts.port or not _loopback(parts.hostname):
        raise SystemExit(f"gate: {what} must be a 127.0.0.0/8 address with a port, got {value}")
    return parts.hostname, parts.port


def main(argv: list[str] | None = None) -> None:
    """Command line entry point: run one gate until killed."""
    parser = argparse.ArgumentParser(prog="python -m harness.gate", description=__doc__)
    parser.add_argument("--store", choices=STORES, required=True)
    parser.add_argument("--listen", required=True, help="127.0.0.1:PORT to listen on")
    parser.add_argument("--upstream", required=True, help="http://127.0.0.1:PORT of the emulator")
    parser.add_argument("--state", required=True, type=Path, help="bucket ownership JSON file")
    args = parser.parse_args(argv)
    listen = _host_port(args.listen, "--listen")
    upstream = _host_port(args.upstream, "--upstream")
    server = GateServer(listen, args.store, upstream, GateState(args.state))
    print(
        f"gate {args.store}: listening on http://{listen[0]}:{listen[1]}, upstream "
        f"http://{upstream[0]}:{upstream[1]}, state {args.state}",
        file=sys.stderr,
        flush=True,
    )
    try:
        server.serve_forever(poll_interval=0.5)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
