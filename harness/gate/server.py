"""The access gate: a streaming reverse proxy (aiohttp server + client) in front of one
storage emulator. ``python -m harness.gate`` runs one (harness/gate/__main__.py).

Every request is decided before its body is read (in the ``Expect: 100-continue`` handler
when the client asks for it): the store's protocol classifies it and checks its credentials,
injected faults apply (harness.gate.faults), the local cloud's access rules decide
(harness.gate.rules). Denials are answered in the API's own error format. Bodies stream both
ways (harness.gate.relay); only small control responses (bucket creation, listings of
buckets, write acknowledgements) are read whole so that the protocol can record write
events. The admin API under ``/__gate__/`` (harness.gate.admin) is never forwarded.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

from aiohttp import ClientSession, ClientTimeout, TCPConnector, web
from aiohttp.web_request import BaseRequest
from yarl import URL

from harness.gate import relay
from harness.gate.admin import Admin, Handler
from harness.gate.faults import Fault, FaultTable
from harness.gate.protocol import Exchange, GateProtocol
from harness.gate.rules import Access, Kind, Verdict
from harness.gate.state import Event, GateState

__all__ = ["Event", "Gate", "GateState"]

UPSTREAM_TIMEOUT = 600.0


@dataclass
class _Decision:
    """What the gate made of one request before reading its body."""

    ex: Exchange
    access: Access
    identity: str | None
    verdict: Verdict
    faults: list[Fault] = field(default_factory=list)
    """Active bandwidth and stream-bandwidth faults that apply to the bodies."""
    reset: bool = False
    corrupt: list[Fault] = field(default_factory=list)
    """Active corrupt faults that apply to the answer if the write succeeds."""
    reads_corrupted: bool = False
    """The request reads an object whose write was answered with a wrong checksum."""


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
            client_max_size=relay.MAX_SMALL_BODY,
            handler_args={
                "max_line_size": 65536,
                "max_field_size": 65536,
                "read_bufsize": relay.READ_BUFSIZE,
            },
        )
        admin = Admin(store, state, self.faults, token, self._upstream_problem, _log)
        admin.install(self.app.router, _logged, self._continue)
        self.app.router.add_route(
            "*", "/{tail:.*}", _logged(self._proxy), expect_handler=self._expect
        )
        self.app.on_startup.append(self._start)
        self.app.on_cleanup.append(self._stop)

    async def _start(self, _app: web.Application) -> None:
        loop = asyncio.get_running_loop()
        loop.set_default_executor(ThreadPoolExecutor(64, thread_name_prefix="gate"))
        self._session = ClientSession(
            connector=TCPConnector(limit=0, enable_cleanup_closed=True),
            timeout=ClientTimeout(total=None, sock_connect=30, sock_read=UPSTREAM_TIMEOUT),
            auto_decompress=False,
            read_bufsize=relay.READ_BUFSIZE,
            skip_auto_headers=("Accept", "Accept-Encoding", "User-Agent", "Content-Type"),
        )

    async def _stop(self, _app: web.Application) -> None:
        if self._session is not None:
            await self._session.close()

    @property
    def session(self) -> ClientSession:
        assert self._session is not None, "the gate has not started"
        return self._session

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

    # --- top level -----------------------------------------------------------------------

    async def _expect(self, request: web.Request) -> web.StreamResponse | None:
        """``Expect: 100-continue``: decide first; a denied upload is never sent."""
        decision = await self._decide(request)
        denied = await self._refusal(request, decision)
        if denied is not None:
            denied.force_close()
            return denied
        await self._continue(request)
        return None

    async def _continue(self, request: web.Request) -> None:
        if request.get("continued") or request.version < (1, 1):
            return
        if (request.headers.get("Expect") or "").lower() == "100-continue":
            request["continued"] = True
            await request.writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")

    async def _refusal(self, request: web.Request, decision: _Decision) -> web.Response | None:
        """Reset the connection if a reset fault hits before the body; the denial if the
        request is not allowed; else None."""
        if decision.reset and request.body_exists and request.get("body") is None:
            await self._continue(request)
            await relay.reset_mid_body(request)  # the network fails, whatever the answer
        if not decision.verdict.allowed:
            return self._denial(decision)
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
        decision.reads_corrupted = request.method in ("GET", "HEAD") and self.faults.corrupted(
            access.bucket, access.key
        )
        await self._apply_faults(request, decision)
        if decision.verdict.allowed:
            decision.verdict = protocol.decide(ex, access, identity)
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
                raise relay.Reset()  # the client gave up (or its node is gone): drop it
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
        decision.faults = [f for f in faults if f.kind in ("bandwidth", "stream-bandwidth")]
        decision.reset = any(f.kind == "reset" and self.faults.roll(f) for f in faults)
        if self.protocol.corrupts(decision.ex, decision.access):
            decision.corrupt = [f for f in faults if f.kind == "corrupt"]

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
        denied = await self._refusal(request, decision)
        if denied is not None:
            if request.get("body") is None and request.body_exists and request.get("continued"):
                denied.force_close()
            return denied
        await self._continue(request)
        answer = None
        if self.protocol.answers(decision.access):
            answer = await asyncio.to_thread(
                self.protocol.answer, decision.ex, decision.access, decision.identity
            )
        if answer is not None:
            resp = web.Response(status=answer.status, body=answer.body, content_type=None)
            resp.headers.update(answer.headers)
            return resp
        if decision.access.kind is Kind.CREATE_BUCKET:
            async with self._create_lock:  # decide again now that creation is serial
                decision.verdict = self.protocol.decide(
                    decision.ex, decision.access, decision.identity
                )
                if not decision.verdict.allowed:
                    return self._denial(decision)
                return await self._forward(request, decision)
        return await self._forward(request, decision)

    async def _forward(self, request: web.Request, decision: _Decision) -> web.StreamResponse:
        ex, access, identity = decision.ex, decision.access, decision.identity
        extra = await asyncio.to_thread(self.protocol.upstream_headers, ex, access, identity)
        target = self.protocol.upstream_target(ex, access, identity)
        added = self.protocol.response_headers(ex, access, identity)
        body: bytes | None = request.get("body")
        headers = relay.forwarded_headers(request, extra, body)
        pace = relay.Pace.of(self.faults, decision.faults, request)
        data: Any = body
        if body is None and request.body_exists:
            data = relay.request_body(request, pace)
        host, port = self.upstream
        url = URL(f"http://{host}:{port}{target}", encoded=True)
        with pace or contextlib.nullcontext():
            async with self.session.request(
                request.method,
                url,
                headers=headers,
                data=data,
                allow_redirects=False,
                compress=None,
            ) as up:
                refusal = self.protocol.refuse_answer(ex, access, up.status, dict(up.headers))
                if refusal is not None:
                    decision.verdict = refusal
                    return self._denial(decision)
                if self._wants_whole_response(request, decision, up):
                    payload = await up.read()
                    if 200 <= up.status < 300:
                        payload = await asyncio.to_thread(
                            self.protocol.after_success,
                            ex,
                            access,
                            identity,
                            relay.Upstream(up.status, dict(up.headers)),
                            payload,
                        )
                        wrong, changed = self._corrupt(decision, up, payload)
                        payload = payload if changed is None else changed
                        added = {**added, **wrong}
                    return relay.whole(up, payload, added)
                if 200 <= up.status < 300:
                    added = {**added, **self._corrupt(decision, up, None)[0]}
                return await relay.stream(request, up, pace, decision.reset, added)

    def _wants_whole_response(self, request: web.Request, decision: _Decision, up: Any) -> bool:
        ex, access = decision.ex, decision.access
        if request.method == "HEAD" or not 200 <= up.status < 300:
            return False
        if up.content_length is not None and up.content_length > relay.MAX_SMALL_BODY:
            return False
        return (
            access.event is not None
            or access.deletes_bucket
            or access.kind in (Kind.CREATE_BUCKET, Kind.LIST_BUCKETS)
            or self.protocol.wants_whole_response(ex, access)
            or (decision.reads_corrupted and self.protocol.corrupt_reads_body(ex, access))
        )

    def _corrupt(
        self, decision: _Decision, up: Any, body: bytes | None
    ) -> tuple[dict[str, str], bytes | None]:
        """The ``corrupt`` fault on a successful answer: (headers to replace, new body or
        None). A write it hits is answered with wrong checksums, and so are its object's
        reads from then on; another write or a deletion of the object ends that."""
        ex, access = decision.ex, decision.access
        if access.deletes_bucket:
            self.faults.forget_corrupted(access.bucket)
            return {}, None
        rewritten = access.event is not None and self.faults.corrupted_in(access.bucket)
        if not (decision.corrupt or decision.reads_corrupted or rewritten):
            return {}, None
        upstream = relay.Upstream(up.status, dict(up.headers))
        wrong = self.protocol.corrupt_answer(ex, access, upstream, body)
        if decision.reads_corrupted:
            return (wrong.headers, wrong.body) if wrong is not None else ({}, None)
        key = access.key or (wrong.key if wrong is not None else None)
        hit = next((f for f in decision.corrupt if self.faults.roll(f)), None)
        if hit is None:
            if key is not None:
                self.faults.forget_corrupted(access.bucket, key)
            return {}, None
        if access.bucket is not None and key is not None:
            self.faults.mark_corrupted(access.bucket, key, hit)
        _log(f"corrupted the answer of {ex.method} {ex.path[:200]} (fault #{hit.id})")
        return (wrong.headers, wrong.body) if wrong is not None else ({}, None)

    def bad_request(self, request: BaseRequest, message: str) -> web.Response:
        """A request the HTTP parser refused, answered in the API's error format."""
        ex = Exchange(
            method=request.method,
            path=request.raw_path,
            headers={},
            query={},
            state=self.state,
            upstream=self.upstream,
            read_body=lambda: b"",
        )
        verdict = self.protocol.malformed_verdict(message)
        _log(f"{request.method} {request.raw_path[:200]} -> {verdict.status} ({message})")
        return self._denial(_Decision(ex, Access(Kind.DENY), None, verdict))

    def _denial(self, decision: _Decision) -> web.Response:
        verdict = decision.verdict
        ctype, body = self.protocol.error_body(decision.ex, verdict, decision.access)
        resp = web.Response(status=verdict.status, body=body, content_type=None)
        resp.headers["Content-Type"] = ctype
        for name, value in self.protocol.error_headers(verdict).items():
            resp.headers[name] = value
        return resp


def _logged(handler: Handler) -> Handler:
    """``handler`` with one log line per request; an unexpected error is answered 502 (the
    gate stays up). A client that goes away is logged as a disconnect, with the status it
    had already been sent, if any."""

    async def logged(request: web.Request) -> web.StreamResponse:
        started = time.monotonic()
        status: int | str = 0
        try:
            resp = await handler(request)
            status = resp.status
            return resp
        except relay.Reset:
            status = "reset"
            raise
        except asyncio.CancelledError:
            status = _disconnect(request)
            raise
        except Exception as e:  # keep the gate alive; tell the client
            if _client_gone(request):
                status = _disconnect(request)
                raise
            _log(f"error on {request.method} {request.path_qs[:200]}: {e!r}")
            status = 502
            resp = web.Response(status=502, text=f"access gate error: {e!r}\n")
            resp.force_close()
            return resp
        finally:
            elapsed = (time.monotonic() - started) * 1000
            _log(f"{request.method} {request.path_qs[:200]} -> {status} ({elapsed:.0f} ms)")

    return logged


def _client_gone(request: web.Request) -> bool:
    transport = request.transport
    return transport is None or transport.is_closing()


def _disconnect(request: web.Request) -> str:
    sent = request.get(relay.SENT_STATUS)
    return f"client disconnected after {sent}" if sent else "client disconnected"


def _log(message: str) -> None:
    sys.stderr.write(f"{time.strftime('%H:%M:%S')} {message}\n")
