"""How the gate moves bytes: the headers it forwards, request and response bodies streamed
in chunks (paced by bandwidth and stream-bandwidth faults, cut by reset faults), small
responses read whole, and a connection reset on purpose."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from multidict import CIMultiDict

from harness.gate.faults import Fault, FaultTable
from harness.gate.pacing import TokenBucket, slice_bytes

SENT_STATUS = "sent_status"
"""Request key: the status of a streamed response whose headers went out."""
MAX_SMALL_BODY = 16 << 20  # bodies the gate reads whole to classify a request
CHUNK = 1 << 20
READ_BUFSIZE = 4 << 20  # stream buffers (aiohttp's 64 KiB default costs CPU on big bodies)

# Headers that describe one connection, not the message (RFC 9110 7.6.1), plus Expect,
# which the gate answers itself.
HOP_BY_HOP = frozenset(
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
class Upstream:
    """The emulator's response as a protocol sees it (harness.gate.protocol.UpstreamResponse)."""

    status: int
    headers: dict[str, str]

    def header(self, name: str) -> str | None:
        """First value of a response header (case-insensitive)."""
        lname = name.lower()
        return next((v for k, v in self.headers.items() if k.lower() == lname), None)


class Reset(Exception):
    """The connection was reset on purpose (a ``reset`` fault)."""


def forwarded_headers(
    request: web.Request, extra: Mapping[str, str], body: bytes | None
) -> CIMultiDict[str]:
    """The client's headers as sent upstream: no hop-by-hop ones, ``extra`` replacing those
    of the same names, and the Content-Length of ``body`` when it was read whole."""
    headers = CIMultiDict[str]()
    replaced = {name.lower() for name in extra}
    for name, value in request.headers.items():
        lname = name.lower()
        if lname in HOP_BY_HOP or lname in replaced:
            continue
        if lname == "content-length" and body is not None:
            continue
        headers.add(name, value)
    for name, value in extra.items():
        headers[name] = value
    if body is not None:
        headers["Content-Length"] = str(len(body))
    return headers


class Pace:
    """How one request's bodies are slowed: the ``bandwidth`` faults' buckets, shared with
    every request they hit, and the ``stream-bandwidth`` faults' cap on this request alone
    (each direction on its own, at the slowest cap). A piece waits for the slower; the
    stream faults keep a record of the request (FaultTable.open_stream)."""

    def __init__(
        self, table: FaultTable, faults: list[Fault], streams: list[Fault], request: web.Request
    ) -> None:
        self.table = table
        self.faults = faults
        self.streams = streams
        self.request = request
        mibps = min((f.mibps for f in streams), default=0.0)
        self.chunk = slice_bytes(mibps) if mibps else CHUNK
        """The size of the pieces bodies are read in (fine enough to flow smoothly)."""
        self._sides = {
            side: TokenBucket.stream(mibps) for side in ("request_bytes", "response_bytes") if mibps
        }
        self._records: list[dict[str, Any]] | None = None

    @classmethod
    def of(cls, table: FaultTable, faults: list[Fault], request: web.Request) -> Pace | None:
        """The pace of ``request`` under the active ``faults`` that apply to it (None when
        none slows bodies: the gate then moves them at full speed)."""
        shared = [f for f in faults if f.kind == "bandwidth"]
        streams = [f for f in faults if f.kind == "stream-bandwidth"]
        return cls(table, shared, streams, request) if shared or streams else None

    async def passing(self, side: str, nbytes: int) -> None:
        """Wait until ``nbytes`` more of the body may pass on ``side`` (``request_bytes``:
        from the client; ``response_bytes``: to it)."""
        own = self._sides.get(side)
        delay = self.table.bandwidth_delay(self.faults, nbytes, own)
        if own is not None:
            if self._records is None:
                request = self.request
                self._records = self.table.open_stream(
                    self.streams, request.method, request.raw_path
                )
            self.table.note_stream(self._records, side, nbytes, delay)
        if delay > 0:
            await asyncio.sleep(delay)

    def __enter__(self) -> Pace:
        return self

    def __exit__(self, *_exc: object) -> None:
        """The request is over (its stream records say when)."""
        if self._records is not None:
            self.table.close_stream(self._records)


async def request_body(request: web.Request, pace: Pace | None) -> AsyncIterator[bytes]:
    """The request body in chunks, paced by ``pace``."""
    if pace is None:
        async for piece in request.content.iter_chunked(CHUNK):
            yield piece
        return
    async for piece in request.content.iter_chunked(pace.chunk):
        await pace.passing("request_bytes", len(piece))
        yield piece


async def reset_mid_body(request: web.Request) -> None:
    """Read part of the request body, then reset the connection (RST)."""
    want = max(1, (request.content_length or CHUNK) // 2)
    got = 0
    with contextlib.suppress(Exception):
        while got < want:
            piece = await request.content.readany()
            if not piece:
                break
            got += len(piece)
    abort(request)
    raise Reset()


def whole(up: Any, payload: bytes, added: Mapping[str, str] | None = None) -> web.Response:
    """The upstream response ``up`` with its body read whole (``payload``) and the gate's
    ``added`` headers."""
    resp = web.Response(status=up.status, reason=up.reason, body=payload)
    for name, value in up.headers.items():
        lname = name.lower()
        if lname in HOP_BY_HOP or lname == "content-length":
            continue
        resp.headers.add(name, value)
    if "Content-Type" not in up.headers:
        resp.headers.pop("Content-Type", None)
    for name, value in (added or {}).items():
        resp.headers[name] = value
    return resp


async def stream(
    request: web.Request,
    up: Any,
    pace: Pace | None,
    reset: bool,
    added: Mapping[str, str] | None = None,
) -> web.StreamResponse:
    """Stream the upstream response ``up`` to the client (with the gate's ``added``
    headers), paced by ``pace``; with ``reset``, the connection is reset half-way."""
    resp = web.StreamResponse(status=up.status, reason=up.reason)
    for name, value in up.headers.items():
        if name.lower() in HOP_BY_HOP:
            continue
        resp.headers.add(name, value)
    for name, value in (added or {}).items():
        resp.headers[name] = value
    no_body = request.method == "HEAD" or up.status in (204, 304) or up.status < 200
    if no_body and "Content-Length" in up.headers:
        resp.headers["Content-Length"] = up.headers["Content-Length"]
    await resp.prepare(request)
    request[SENT_STATUS] = up.status
    if no_body:
        await resp.write_eof()
        return resp
    expected = up.content_length
    reset_at = (expected or CHUNK) // 2 if reset else None
    sent = 0
    async for piece in up.content.iter_chunked(CHUNK if pace is None else pace.chunk):
        if pace is not None:
            await pace.passing("response_bytes", len(piece))
        if reset_at is not None and sent + len(piece) >= reset_at:
            await resp.write(piece[: max(0, reset_at - sent)])
            abort(request)
            raise Reset()
        await resp.write(piece)
        sent += len(piece)
    if expected is not None and sent < expected:  # upstream ended early: tell the client
        abort(request)
        raise Reset()
    await resp.write_eof()
    return resp


def abort(request: web.Request) -> None:
    """Reset the client's connection (RST, not FIN)."""
    transport = request.transport
    if transport is None:
        return
    sock = transport.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    transport.abort()
