"""The gate is the only door: the emulator answers only inside its own network namespace,
and the gate's connections do not stall small answers."""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import requests

from harness.accounts import OTHER
from tests.integration.harness.gate.helpers import (
    Emulators,
)
from tests.integration.helpers import stores_of_kind


@pytest.mark.parametrize("store_name", stores_of_kind())
def test_emulators_are_sealed(emulators: Emulators, store_name: str) -> None:
    """The emulator listens only inside its private network namespace: from the host
    namespace (where nodes live, --network host) its port refuses; its gate answers."""
    import socket

    emulator = emulators[store_name]
    assert emulator.record.sealed
    for address in ("127.0.0.1", "127.0.0.2", "127.5.6.7"):
        with socket.socket() as sock, pytest.raises(OSError):
            sock.settimeout(3)
            sock.connect((address, emulator.record.port))
    assert emulator.upstream_answers()  # it runs, inside
    assert requests.get(f"{emulator.endpoint}/__gate__/health", timeout=10).json()["ok"]
    gate_ns = os.readlink(f"/proc/{emulator.record.gate_pid}/ns/net")
    assert gate_ns == os.readlink(f"/proc/{emulator.record.pid}/ns/net")
    assert gate_ns != os.readlink("/proc/self/ns/net")


@pytest.mark.parametrize("store_name", stores_of_kind())
def test_small_responses_do_not_stall(emulators: Emulators, store_name: str) -> None:
    """TCP_NODELAY on the gate's connections: without it a small proxied answer with a body
    (a streamed response: headers, then body, in two writes) stalls ~45 ms on a keep-alive
    connection (Nagle and delayed ACK). The option is read on the gate's own end of the
    connection (its socket, duplicated with pidfd_getfd), after 40 answers on it: a timing
    bound here failed under a load of 20 (300-400 ms answers, none of it Nagle's)."""
    import socket

    emulator = emulators[store_name]
    from harness.emulators.azure import ACCOUNTS, AzureEmulator

    # a missing object of the public bucket: the emulator answers 404 with an error body
    path = f"/{emulator.public_dataset}/nx-{uuid.uuid4().hex[:12]}"
    if isinstance(emulator, AzureEmulator):
        path = f"/{ACCOUNTS[OTHER].name}{path}"
    request = f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode()
    times = []
    with socket.create_connection(("127.0.0.1", emulator.record.gate_port), timeout=10) as sock:
        for _ in range(40):
            started = time.monotonic()
            sock.sendall(request)
            reply = b""
            while b"\r\n\r\n" not in reply:
                reply += sock.recv(65536)
            head, _, body = reply.partition(b"\r\n\r\n")
            fields = dict(line.split(b":", 1) for line in head.split(b"\r\n")[1:] if b":" in line)
            headers = {k.strip().lower(): v.strip() for k, v in fields.items()}
            if b"content-length" in headers:
                while len(body) < int(headers[b"content-length"]):
                    body += sock.recv(65536)
            else:
                assert headers.get(b"transfer-encoding") == b"chunked", head
                while not body.endswith(b"0\r\n\r\n"):
                    body += sock.recv(65536)
            assert head.startswith(b"HTTP/1.1 404") and body, head
            times.append(time.monotonic() - started)
        gate_end = _peer_socket(emulator.record.gate_pid, sock)
        try:
            nodelay = gate_end.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
        finally:
            gate_end.close()
    assert nodelay, f"no TCP_NODELAY on the gate's end; answers took {times} s"


def _link(fd: Path) -> str | None:
    """What an fd of another process points at; None if it was closed meanwhile (the gate
    serves other connections while this test lists its fds; ours stays open)."""
    try:
        return os.readlink(fd)
    except FileNotFoundError:
        return None


def _peer_socket(pid: int, ours: Any) -> Any:
    """A duplicate of process ``pid``'s end of our TCP connection ``ours`` (same network
    namespace as ours: the gate's listening socket is in the host's)."""
    import ctypes
    import socket

    local_port = ours.getsockname()[1]
    server_port = ours.getpeername()[1]
    inode = None
    for line in Path("/proc/self/net/tcp").read_text().splitlines()[1:]:
        cols = line.split()
        here, there = int(cols[1].split(":")[1], 16), int(cols[2].split(":")[1], 16)
        if (here, there) == (server_port, local_port):
            inode = cols[9]
    assert inode is not None, "the gate's end of the connection is not in /proc/net/tcp"
    fds = [
        int(fd.name) for fd in Path(f"/proc/{pid}/fd").iterdir() if _link(fd) == f"socket:[{inode}]"
    ]
    assert fds, f"process {pid} holds no socket:[{inode}]"
    pidfd = os.pidfd_open(pid)
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        dup = libc.syscall(438, pidfd, fds[0], 0)  # pidfd_getfd (x86_64 and arm64)
        assert dup >= 0, os.strerror(ctypes.get_errno())
    finally:
        os.close(pidfd)
    return socket.socket(fileno=dup)
