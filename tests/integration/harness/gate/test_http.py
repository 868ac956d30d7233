"""The gate at the HTTP level, the same for every store: requests the HTTP parser refuses
get the API's own error format, and a client that goes away is logged as a disconnect."""

from __future__ import annotations

import socket
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from harness.emulators.fleet import RunningEmulator
from harness.emulators.s3 import S3Emulator
from tests.integration.helpers import emulator_bucket, stores_of_kind
from tests.polling import wait_for

API_CONTENT_TYPES = {"s3": "application/xml", "r2": "application/xml", "gcs": "application/json"}
"""store -> the content type of its API's errors (Azure: XML as well, the default)"""


def _raw_exchange(endpoint: str, request: bytes, timeout: float = 10.0) -> bytes:
    """Send ``request`` as is on a new connection; everything the gate answers."""
    parts = urlsplit(endpoint)
    with socket.create_connection((parts.hostname, parts.port), timeout=timeout) as sock:
        sock.sendall(request)
        chunks = []
        while True:
            piece = sock.recv(65536)
            if not piece:
                break
            chunks.append(piece)
    return b"".join(chunks)


@pytest.mark.parametrize("length", ["-1", "", "abc"])
def test_bad_content_length_is_an_api_error(store_emulator: RunningEmulator, length: str) -> None:
    """An empty, negative or non-numeric Content-Length: 400 in the API's error format (XML or
    JSON with the API's error code), not aiohttp's plain-text page; the gate stays up."""
    host = urlsplit(store_emulator.endpoint).netloc
    request = f"PUT /some-bucket/key HTTP/1.1\r\nHost: {host}\r\nContent-Length: {length}\r\n\r\n"
    answer = _raw_exchange(store_emulator.endpoint, request.encode())
    head, _, body = answer.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (h.partition(":") for h in header_lines)}
    assert status_line.split(" ")[1] == "400", answer[:300]
    wanted = API_CONTENT_TYPES.get(store_emulator.store, "application/xml")
    assert headers["content-type"].startswith(wanted), answer[:300]
    if wanted == "application/xml":
        assert b"<Error><Code>" in body and b"</Code>" in body, body
    else:
        assert b'"error"' in body and b'"code": 400' in body, body
    assert store_emulator.healthy()


@pytest.mark.parametrize("store_name", stores_of_kind(S3Emulator))
def test_client_that_stops_reading_is_logged_as_a_disconnect(
    emulators: dict[str, RunningEmulator], store_name: str
) -> None:
    """A client that closes its connection in the middle of a 200 body: the gate's log says
    it disconnected after 200, not that the gate failed (502). (The logging is the same for
    every store; a presigned URL makes the raw GET simple on the S3-compatible ones.)"""
    store_emulator = emulators[store_name]
    assert isinstance(store_emulator, S3Emulator)
    with emulator_bucket(
        store_emulator, "disc", owner="user", public=False, objects={"big": bytes(32 << 20)}
    ) as (name, _url):
        url = store_emulator.client("user").generate_presigned_url(
            "get_object", Params={"Bucket": name, "Key": "big"}
        )
        parts = urlsplit(url)
        with socket.create_connection((parts.hostname, parts.port), timeout=10) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            target = f"{parts.path}?{parts.query}"
            sock.sendall(f"GET {target} HTTP/1.1\r\nHost: {parts.netloc}\r\n\r\n".encode())
            head = sock.recv(64)
            assert head.startswith(b"HTTP/1.1 200")

            def body_waiting() -> bool:
                """Body bytes lie unread past the headers: with a 32 MiB body and these
                small buffers, the gate is mid-body, waiting for the reader."""
                try:
                    unread = sock.recv(1 << 16, socket.MSG_PEEK | socket.MSG_DONTWAIT)
                except BlockingIOError:
                    return False
                seen = head + unread
                end = seen.find(b"\r\n\r\n")
                return end >= 0 and len(seen) > end + 4

            wait_for("the body to reach the client's socket", body_waiting, timeout=30)
        log = Path(store_emulator.record.gate_log)
        marker = f"GET {parts.path}"

        def logged() -> str | None:
            lines = [line for line in log.read_text().splitlines() if marker in line]
            done = [line for line in lines if " -> " in line]
            return done[-1] if done else None

        line = wait_for("the gate's log line of the dropped GET", logged, timeout=30)
        assert "client disconnected after 200" in line, line
        assert "error on" not in "\n".join(x for x in log.read_text().splitlines() if marker in x)
