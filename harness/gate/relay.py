"""How the gate moves bytes: the headers it forwards, request and response bodies streamed
in chunks (throttled by bandwidth faults, cut by reset faults), small responses read whole,
and a connection reset on purpose."""

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


async def throttle(table: FaultTable, faults: list[Fault], nbytes: int) -> None:
    """Wait as long as the bandwidth ``faults`` make ``nbytes`` take."""
    delay = table.bandwidth_delay(faults, nbytes)
    if delay > 0:
        await asyncio.sleep(delay)


async def request_body(
    request: web.Request, table: FaultTable, faults: list[Fault]
) -> AsyncIterator[bytes]:
    """The request body in chunks, throttled by ``faults``."""
    async for piece in request.content.iter_chunked(CHUNK):
        if faults:
            await throttle(table, faults, len(piece))
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
    table: FaultTable,
    faults: list[Fault],
    reset: bool,
    added: Mapping[str, str] | None = None,
) -> web.StreamResponse:
    """Stream the upstream response ``up`` to the client (with the gate's ``added``
    headers), throttled by ``faults``; with ``reset``, the connection is reset half-way."""
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
    async for piece in up.content.iter_chunked(CHUNK):
        if faults:
            await throttle(table, faults, len(piece))
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
