"""The access gate: a streaming reverse proxy in front of one storage emulator.

Run as ``python -m harness.gate --store NAME --listen 127.0.0.1:G --upstream
http://127.0.0.1:P --state FILE``; NAME is a store of the emulator registry
(harness.registry), whose gate protocol says how to read that API.

It decides every request with the local cloud's access rules (harness.gate_rules), answers
denials in the API's own error format, and records each completed write as an event. Bodies
stream both ways in 1 MiB pieces (no buffering of uploads or downloads); only small control
responses (bucket creation, listings of buckets, write acknowledgements) are read whole.

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
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from harness.accounts import OWNERS
from harness.gate_protocol import Exchange, GateProtocol
from harness.gate_rules import Access, Kind, Verdict, decide
from harness.gate_state import Event, GateState

__all__ = ["Event", "GateServer", "GateState", "main"]

CHUNK = 1 << 20
ADMIN_PREFIX = "/__gate__/"
LINGER_SECONDS = 60.0  # how long a denied request's body is read and dropped
MAX_SMALL_BODY = 16 << 20  # bodies the gate reads whole to classify a request
UPSTREAM_TIMEOUT = 600.0

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


class GateServer(ThreadingHTTPServer):
    """The gate's HTTP server: one thread per client connection."""

    daemon_threads = True
    request_queue_size = 256

    def __init__(
        self,
        listen: tuple[str, int],
        store: str,
        upstream: tuple[str, int],
        state: GateState,
        protocol: GateProtocol,
    ) -> None:
        self.store = store
        self.protocol = protocol
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
        protocol = self.server.protocol
        state = self.server.state
        ex = Exchange(
            method=self.command,
            path=self.path,
            headers={k.lower(): v for k, v in self.headers.items()},
            query=parse_qs(urlsplit(self.path).query, keep_blank_values=True),
            state=state,
            upstream=self.server.upstream,
            read_body=self._read_body,
        )
        access, identity = protocol.classify(ex)
        verdict = decide(access, identity, state.buckets())
        if not verdict.allowed:
            return self._deny(ex, verdict, access)
        lock = state.create_lock if access.kind is Kind.CREATE_BUCKET else contextlib.nullcontext()
        with lock:
            if access.kind is Kind.CREATE_BUCKET:  # decide again now that creation is serial
                verdict = decide(access, identity, state.buckets())
                if not verdict.allowed:
                    return self._deny(ex, verdict, access)
            if self._expect_continue_pending:
                self.send_response_only(100)
                self.end_headers()
                self._expect_continue_pending = False
            up = self._forward(protocol.upstream_headers(ex, access, identity))
            try:
                if self._wants_whole_response(ex, access, up):
                    data = up.resp.read()
                    if 200 <= up.status < 300:
                        data = protocol.after_success(ex, access, identity, up, data)
                    self._relay_whole(up, data)
                else:
                    self._relay_stream(up)
            finally:
                up.close()
        return up.status

    def _wants_whole_response(self, ex: Exchange, access: Access, up: _Upstream) -> bool:
        if self.command == "HEAD" or not 200 <= up.status < 300:
            return False
        if up.resp.length is not None and up.resp.length > MAX_SMALL_BODY:
            return False
        return (
            access.event is not None
            or access.deletes_bucket
            or access.kind in (Kind.CREATE_BUCKET, Kind.LIST_BUCKETS)
            or self.server.protocol.wants_whole_response(ex, access)
        )

    def _forward(self, extra: dict[str, str] | None = None) -> _Upstream:
        """Send the request (streaming its body) to the emulator and return its response;
        ``extra`` headers replace the request's headers of the same names."""
        host, port = self.server.upstream
        conn = http.client.HTTPConnection(host, port, timeout=UPSTREAM_TIMEOUT)
        conn.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
        chunked = self._chunked()
        body = self._body
        replaced = {name.lower() for name in extra or {}}
        for name, value in self.headers.items():
            lname = name.lower()
            if lname in _HOP_BY_HOP and not (lname == "transfer-encoding" and body is None):
                continue
            if lname in replaced:
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

    def _deny(self, ex: Exchange, verdict: Verdict, access: Access) -> int:
        def send() -> int:
            ctype, body = self.server.protocol.error_body(ex, verdict, access)
            self._send_simple(verdict.status, ctype, body)
            return verdict.status

        return self._answer_unforwarded(send)


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
    parser.add_argument("--store", required=True, help="a store of the emulator registry")
    parser.add_argument("--listen", required=True, help="127.0.0.1:PORT to listen on")
    parser.add_argument("--upstream", required=True, help="http://127.0.0.1:PORT of the emulator")
    parser.add_argument("--state", required=True, type=Path, help="bucket ownership JSON file")
    args = parser.parse_args(argv)
    listen = _host_port(args.listen, "--listen")
    upstream = _host_port(args.upstream, "--upstream")
    from harness.registry import UnknownEmulatorError, get_emulator_class

    try:
        protocol = get_emulator_class(args.store).gate_protocol()
    except UnknownEmulatorError as e:
        raise SystemExit(f"gate: {e}") from None
    server = GateServer(listen, args.store, upstream, GateState(args.state), protocol)
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
