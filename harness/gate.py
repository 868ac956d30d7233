"""The access gate: a streaming reverse proxy (aiohttp server + client) in front of one
storage emulator.

Run as ``python -m harness.gate --store NAME (--listen 127.0.0.1:G | --listen-fd N)
--upstream http://127.0.0.1:P --state FILE [--token-file F]``; NAME is a store of the emulator
registry (harness.registry), whose gate protocol says how to read that API. With
``--listen-fd`` the gate serves on a listening socket it inherits (made by the harness in the
host network namespace while the gate and its emulator run in a private one).

Every request is decided before its body is read (in the ``Expect: 100-continue`` handler
when the client asks for it): the store's protocol classifies it and checks its credentials,
injected faults apply (harness.gate_faults), the local cloud's access rules decide
(harness.gate_rules). Denials are answered in the API's own error format. Bodies stream both
ways; only small control responses (bucket creation, listings of buckets, write
acknowledgements) are read whole so that the protocol can record write events.

Admin API, never forwarded: ``GET /__gate__/health`` (open); with the header
``X-Gate-Token`` (the token file's content; else 401): ``GET|POST|DELETE /__gate__/buckets``,
``GET /__gate__/events?bucket=B``, ``GET|POST|DELETE /__gate__/faults``,
``GET /__gate__/faults/log?bucket=B``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hmac
import ipaddress
import json
import os
import socket
import struct
import sys
import time
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from aiohttp import ClientSession, ClientTimeout, TCPConnector, web
from multidict import CIMultiDict
from yarl import URL

from harness.accounts import OWNERS
from harness.gate_faults import Fault, FaultSpecError, FaultTable
from harness.gate_protocol import Exchange, GateProtocol
from harness.gate_rules import Access, Kind, Verdict, decide
from harness.gate_state import Event, GateState

__all__ = ["Event", "Gate", "GateState", "main"]

ADMIN_PREFIX = "/__gate__/"
TOKEN_HEADER = "X-Gate-Token"
MAX_SMALL_BODY = 16 << 20  # bodies the gate reads whole to classify a request
UPSTREAM_TIMEOUT = 600.0
CHUNK = 1 << 20
READ_BUFSIZE = 4 << 20  # stream buffers (aiohttp's 64 KiB default costs CPU on big bodies)

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


@dataclass
class _Upstream:
    """The emulator's response as a protocol sees it (harness.gate_protocol.UpstreamResponse)."""

    status: int
    headers: dict[str, str]

    def header(self, name: str) -> str | None:
        """First value of a response header (case-insensitive)."""
        lname = name.lower()
        return next((v for k, v in self.headers.items() if k.lower() == lname), None)


class _Reset(Exception):
    """The connection was reset on purpose (a ``reset`` fault)."""


@dataclass
class _Decision:
    """What the gate made of one request before reading its body."""

    ex: Exchange
    access: Access
    identity: str | None
    verdict: Verdict
    faults: list[Fault] = field(default_factory=list)
    """Active bandwidth and reset faults that apply to the bodies."""
    reset: bool = False


class Gate:
    """One gate: the aiohttp application, its upstream client, state and faults."""

    def __init__(
        self,
        store: str,
        upstream: tuple[str, int],
        state: GateState,
        protocol: GateProtocol,
        token: str | None = None,
        faults: FaultTable | None = None,
    ) -> None:
        self.store = store
        self.upstream = upstream
        self.state = state
        self.protocol = protocol
        self.token = token
        self.faults = faults or FaultTable()
        self._session: ClientSession | None = None
        self._create_lock = asyncio.Lock()
        self.app = web.Application(
            client_max_size=MAX_SMALL_BODY,
            handler_args={
                "max_line_size": 65536,
                "max_field_size": 65536,
                "read_bufsize": READ_BUFSIZE,
            },
        )
        self.app.router.add_route("*", "/{tail:.*}", self._handle, expect_handler=self._expect)
        self.app.on_startup.append(self._start)
        self.app.on_cleanup.append(self._stop)

    async def _start(self, _app: web.Application) -> None:
        loop = asyncio.get_running_loop()
        loop.set_default_executor(ThreadPoolExecutor(64, thread_name_prefix="gate"))
        self._session = ClientSession(
            connector=TCPConnector(limit=0, enable_cleanup_closed=True),
            timeout=ClientTimeout(total=None, sock_connect=30, sock_read=UPSTREAM_TIMEOUT),
            auto_decompress=False,
            read_bufsize=READ_BUFSIZE,
            skip_auto_headers=("Accept", "Accept-Encoding", "User-Agent", "Content-Type"),
        )

    async def _stop(self, _app: web.Application) -> None:
        if self._session is not None:
            await self._session.close()

    @property
    def session(self) -> ClientSession:
        assert self._session is not None, "the gate has not started"
        return self._session

    # --- top level -----------------------------------------------------------------------

    async def _expect(self, request: web.Request) -> web.StreamResponse | None:
        """``Expect: 100-continue``: decide first; a denied upload is never sent."""
        if request.path.startswith(ADMIN_PREFIX):
            await self._continue(request)
            return None
        decision = await self._decide(request)
        if decision.reset and request.body_exists and request.get("body") is None:
            await self._continue(request)
            await self._reset_mid_body(request)  # the network fails, whatever the answer
        if not decision.verdict.allowed:
            resp = self._denial(decision)
            resp.force_close()
            return resp
        await self._continue(request)
        return None

    async def _continue(self, request: web.Request) -> None:
        if request.get("continued") or request.version < (1, 1):
            return
        if (request.headers.get("Expect") or "").lower() == "100-continue":
            request["continued"] = True
            await request.writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        started = time.monotonic()
        status: int | str = 0
        try:
            if request.path.startswith(ADMIN_PREFIX):
                resp = await self._admin(request)
            else:
                resp = await self._proxy(request)
            status = resp.status
            return resp
        except _Reset:
            status = "reset"
            raise
        except (ConnectionResetError, asyncio.CancelledError):
            status = "client gone"
            raise
        except Exception as e:  # keep the gate alive; tell the client
            _log(f"error on {request.method} {request.path_qs[:200]}: {e!r}")
            status = 502
            resp = web.Response(status=502, text=f"access gate error: {e!r}\n")
            resp.force_close()
            return resp
        finally:
            elapsed = (time.monotonic() - started) * 1000
            _log(f"{request.method} {request.path_qs[:200]} -> {status} ({elapsed:.0f} ms)")

    # --- admin API -----------------------------------------------------------------------

    async def _admin(self, request: web.Request) -> web.StreamResponse:
        route = request.path[len(ADMIN_PREFIX) :].strip("/")
        method = request.method
        query = request.query
        if route == "health" and method in ("GET", "HEAD"):
            problem = await self._upstream_problem()
            body: dict[str, Any] = {"ok": problem is None, "store": self.store, "pid": os.getpid()}
            if problem:
                body["error"] = problem
            return _json(200 if problem is None else 503, body)
        if not self._authorized(request):
            resp = _json(401, {"error": f"the gate's admin API needs the {TOKEN_HEADER} header"})
            if request.body_exists:
                resp.force_close()
            return resp
        state = self.state
        if route == "events" and method == "GET":
            return _json(200, [asdict(e) for e in state.events(query.get("bucket"))])
        if route == "buckets" and method == "GET":
            return _json(200, {k: asdict(v) for k, v in sorted(state.buckets().items())})
        if route == "buckets" and method == "POST":
            try:
                data = json.loads(await request.read())
                name, owner = data["bucket"], data["owner"]
                public = bool(data.get("public", False))
                if not isinstance(name, str) or not name or owner not in OWNERS:
                    raise ValueError(f"owner must be one of {OWNERS} and bucket non-empty")
            except (ValueError, KeyError, TypeError) as e:
                return _json(400, {"error": f"bad request: {e}"})
            state.set_bucket(name, owner, public)
            return _json(200, {"bucket": name, "owner": owner, "public": public})
        if route == "buckets" and method == "DELETE":
            name = query.get("bucket", "")
            state.drop_bucket(name)
            return _json(200, {"bucket": name})
        if route == "faults" and method == "GET":
            return _json(200, [f.public() for f in self.faults.active()])
        if route == "faults" and method == "POST":
            try:
                fault = self.faults.add(json.loads(await request.read() or b"{}"))
            except (ValueError, FaultSpecError) as e:
                return _json(400, {"error": f"bad fault: {e}"})
            _log(f"fault started: {fault.public()}")
            return _json(200, fault.public())
        if route == "faults" and method == "DELETE":
            fault_id = query.get("id")
            ended = self.faults.clear(
                int(fault_id) if fault_id and fault_id.isdigit() else None, query.get("bucket")
            )
            _log(f"faults cleared: {[f.id for f in ended]}")
            return _json(200, [f.public() for f in ended])
        if route == "faults/log" and method == "GET":
            return _json(200, self.faults.log(query.get("bucket")))
        return _json(404, {"error": f"no admin route {method} {request.path}"})

    def _authorized(self, request: web.Request) -> bool:
        if self.token is None:
            return True
        given = request.headers.get(TOKEN_HEADER, "")
        return hmac.compare_digest(given.encode(), self.token.encode())

    async def _upstream_problem(self) -> str | None:
        host, port = self.upstream
        try:
            async with self.session.head(
                f"http://{host}:{port}/", timeout=ClientTimeout(total=4)
            ) as resp:
                await resp.read()
        except Exception as e:
            return f"upstream {host}:{port} does not answer: {e!r}"
        return None

    # --- deciding ------------------------------------------------------------------------

    async def _decide(self, request: web.Request) -> _Decision:
        """Classify, check credentials, apply faults and the access rules (once per
        request; the body is read only if the protocol needs it)."""
        cached = request.get("decision")
        if cached is not None:
            return cached  # type: ignore[no-any-return]
        loop = asyncio.get_running_loop()

        def read_body() -> bytes:
            return asyncio.run_coroutine_threadsafe(self._read_body(request), loop).result()

        ex = Exchange(
            method=request.method,
            path=request.raw_path,
            headers={k.lower(): v for k, v in request.headers.items()},
            query=parse_qs(urlsplit(request.raw_path).query, keep_blank_values=True),
            state=self.state,
            upstream=self.upstream,
            read_body=read_body,
        )
        protocol = self.protocol

        def classify() -> tuple[Access, str | None, Verdict | None]:
            access, identity = protocol.classify(ex)
            return access, identity, protocol.authenticate(ex, access, identity)

        access, identity, refused = await asyncio.to_thread(classify)
        decision = _Decision(ex, access, identity, refused or Verdict(True))
        await self._apply_faults(request, decision)
        if decision.verdict.allowed:
            decision.verdict = decide(access, identity, self.state.buckets())
        request["decision"] = decision
        return decision

    async def _apply_faults(self, request: web.Request, decision: _Decision) -> None:
        bucket, method = decision.access.bucket, request.method
        faults = self.faults.matching(bucket, method)
        if not faults:
            return
        outages = [f for f in faults if f.kind == "outage"]
        for fault in outages:
            self.faults.roll(fault)
        while any(f.kind == "outage" for f in self.faults.matching(bucket, method)):
            await asyncio.sleep(0.05)  # no answer while the outage lasts
            if request.transport is None or request.transport.is_closing():
                raise _Reset()  # the client gave up (or its node is gone): drop the request
        delay = max((f.ms for f in faults if f.kind == "latency"), default=0.0)
        if delay:
            for fault in faults:
                if fault.kind == "latency":
                    self.faults.roll(fault)
            await asyncio.sleep(delay / 1000)
        for fault in faults:
            if fault.kind == "deny" and self.faults.roll(fault):
                decision.verdict = self.protocol.fault_verdict(403)
                return
            if fault.kind == "errors" and self.faults.roll(fault):
                decision.verdict = self.protocol.fault_verdict(fault.status)
                return
        decision.faults = [f for f in faults if f.kind == "bandwidth"]
        decision.reset = any(f.kind == "reset" and self.faults.roll(f) for f in faults)

    async def _read_body(self, request: web.Request) -> bytes:
        body: bytes | None = request.get("body")
        if body is None:
            await self._continue(request)
            body = await request.read()
            request["body"] = body
        return body

    # --- proxying ------------------------------------------------------------------------

    async def _proxy(self, request: web.Request) -> web.StreamResponse:
        decision = await self._decide(request)
        if decision.reset and request.body_exists and request.get("body") is None:
            await self._continue(request)
            await self._reset_mid_body(request)  # the network fails, whatever the answer
        if not decision.verdict.allowed:
            resp = self._denial(decision)
            if request.get("body") is None and request.body_exists and request.get("continued"):
                resp.force_close()
            return resp
        await self._continue(request)
        if decision.access.kind is Kind.CREATE_BUCKET:
            async with self._create_lock:  # decide again now that creation is serial
                decision.verdict = decide(decision.access, decision.identity, self.state.buckets())
                if not decision.verdict.allowed:
                    return self._denial(decision)
                return await self._forward(request, decision)
        return await self._forward(request, decision)

    async def _forward(self, request: web.Request, decision: _Decision) -> web.StreamResponse:
        ex, access = decision.ex, decision.access
        extra = await asyncio.to_thread(
            self.protocol.upstream_headers, ex, access, decision.identity
        )
        headers = CIMultiDict[str]()
        replaced = {name.lower() for name in extra}
        body: bytes | None = request.get("body")
        for name, value in request.headers.items():
            lname = name.lower()
            if lname in _HOP_BY_HOP or lname in replaced:
                continue
            if lname == "content-length" and body is not None:
                continue
            headers.add(name, value)
        for name, value in extra.items():
            headers[name] = value
        data: Any = None
        if body is not None:
            headers["Content-Length"] = str(len(body))
            data = body
        elif request.body_exists:
            data = self._request_body(request, decision.faults)
        host, port = self.upstream
        url = URL(f"http://{host}:{port}{request.raw_path}", encoded=True)
        async with self.session.request(
            request.method,
            url,
            headers=headers,
            data=data,
            allow_redirects=False,
            compress=None,
        ) as up:
            if self._wants_whole_response(request, ex, access, up):
                payload = await up.read()
                if 200 <= up.status < 300:
                    payload = await asyncio.to_thread(
                        self.protocol.after_success,
                        ex,
                        access,
                        decision.identity,
                        _Upstream(up.status, dict(up.headers)),
                        payload,
                    )
                return self._whole(up, payload)
            return await self._stream(request, up, decision)

    async def _request_body(
        self, request: web.Request, faults: list[Fault]
    ) -> AsyncIterator[bytes]:
        async for piece in request.content.iter_chunked(CHUNK):
            if faults:
                await self._throttle(faults, len(piece))
            yield piece

    async def _throttle(self, faults: list[Fault], nbytes: int) -> None:
        delay = self.faults.bandwidth_delay(faults, nbytes)
        if delay > 0:
            await asyncio.sleep(delay)

    async def _reset_mid_body(self, request: web.Request) -> None:
        """Read part of the request body, then reset the connection (RST)."""
        want = max(1, (request.content_length or CHUNK) // 2)
        got = 0
        with contextlib.suppress(Exception):
            while got < want:
                piece = await request.content.readany()
                if not piece:
                    break
                got += len(piece)
        _abort(request)
        raise _Reset()

    def _wants_whole_response(
        self, request: web.Request, ex: Exchange, access: Access, up: Any
    ) -> bool:
        if request.method == "HEAD" or not 200 <= up.status < 300:
            return False
        if up.content_length is not None and up.content_length > MAX_SMALL_BODY:
            return False
        return (
            access.event is not None
            or access.deletes_bucket
            or access.kind in (Kind.CREATE_BUCKET, Kind.LIST_BUCKETS)
            or self.protocol.wants_whole_response(ex, access)
        )

    def _whole(self, up: Any, payload: bytes) -> web.Response:
        resp = web.Response(status=up.status, reason=up.reason, body=payload)
        for name, value in up.headers.items():
            lname = name.lower()
            if lname in _HOP_BY_HOP or lname == "content-length":
                continue
            resp.headers.add(name, value)
        if "Content-Type" not in up.headers:
            resp.headers.pop("Content-Type", None)
        return resp

    async def _stream(
        self, request: web.Request, up: Any, decision: _Decision
    ) -> web.StreamResponse:
        resp = web.StreamResponse(status=up.status, reason=up.reason)
        for name, value in up.headers.items():
            if name.lower() in _HOP_BY_HOP:
                continue
            resp.headers.add(name, value)
        no_body = request.method == "HEAD" or up.status in (204, 304) or up.status < 200
        if no_body and "Content-Length" in up.headers:
            resp.headers["Content-Length"] = up.headers["Content-Length"]
        await resp.prepare(request)
        if no_body:
            await resp.write_eof()
            return resp
        expected = up.content_length
        reset_at = (expected or CHUNK) // 2 if decision.reset else None
        sent = 0
        async for piece in up.content.iter_chunked(CHUNK):
            if decision.faults:
                await self._throttle(decision.faults, len(piece))
            if reset_at is not None and sent + len(piece) >= reset_at:
                await resp.write(piece[: max(0, reset_at - sent)])
                _abort(request)
                raise _Reset()
            await resp.write(piece)
            sent += len(piece)
        if expected is not None and sent < expected:  # upstream ended early: tell the client
            _abort(request)
            raise _Reset()
        await resp.write_eof()
        return resp

    def _denial(self, decision: _Decision) -> web.Response:
        verdict = decision.verdict
        ctype, body = self.protocol.error_body(decision.ex, verdict, decision.access)
        resp = web.Response(status=verdict.status, body=body, content_type=None)
        resp.headers["Content-Type"] = ctype
        for name, value in self.protocol.error_headers(verdict).items():
            resp.headers[name] = value
        return resp


def _abort(request: web.Request) -> None:
    """Reset the client's connection (RST, not FIN)."""
    transport = request.transport
    if transport is None:
        return
    sock = transport.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    transport.abort()


def _json(status: int, data: Any) -> web.Response:
    return web.Response(status=status, text=json.dumps(data), content_type="application/json")


def _log(message: str) -> None:
    sys.stderr.write(f"{time.strftime('%H:%M:%S')} {message}\n")


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


def listening_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket for a gate (TCP_NODELAY, inherited by accepted connections)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind((host, port))
    sock.listen(512)
    return sock


async def _serve(gate: Gate, sock: socket.socket) -> None:
    runner = web.AppRunner(gate.app, access_log=None, handle_signals=True)
    await runner.setup()
    site = web.SockSite(runner, sock)
    await site.start()
    try:
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()


def main(argv: list[str] | None = None) -> None:
    """Command line entry point: run one gate until killed."""
    parser = argparse.ArgumentParser(prog="python -m harness.gate", description=__doc__)
    parser.add_argument("--store", required=True, help="a store of the emulator registry")
    listen = parser.add_mutually_exclusive_group(required=True)
    listen.add_argument("--listen", help="127.0.0.1:PORT to listen on")
    listen.add_argument("--listen-fd", type=int, help="an inherited listening socket")
    parser.add_argument("--upstream", required=True, help="http://127.0.0.1:PORT of the emulator")
    parser.add_argument("--state", required=True, type=Path, help="bucket ownership JSON file")
    parser.add_argument("--token-file", type=Path, help="the admin API's token (mode 0600)")
    args = parser.parse_args(argv)
    upstream = _host_port(args.upstream, "--upstream")
    if args.listen:
        host, port = _host_port(args.listen, "--listen")
    from harness.registry import UnknownEmulatorError, get_emulator_class

    try:
        protocol = get_emulator_class(args.store).gate_protocol()
    except UnknownEmulatorError as e:
        raise SystemExit(f"gate: {e}") from None
    token = args.token_file.read_text().strip() if args.token_file else None
    if args.listen_fd is not None:
        sock = socket.socket(fileno=args.listen_fd)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    else:
        sock = listening_socket(host, port)
    where = "{}:{}".format(*sock.getsockname()[:2])
    gate = Gate(args.store, upstream, GateState(args.state), protocol, token)
    print(
        f"gate {args.store}: listening on http://{where}, upstream "
        f"http://{upstream[0]}:{upstream[1]}, state {args.state}, admin token "
        f"{'required' if token else 'not required'}",
        file=sys.stderr,
        flush=True,
    )
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_serve(gate, sock))


if __name__ == "__main__":
    main()
