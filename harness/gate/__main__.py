"""Run one gate until killed.

``python -m harness.gate --store NAME (--listen 127.0.0.1:G | --listen-fd N)
--upstream http://127.0.0.1:P --state FILE [--token-file F]``; NAME is a store of the
emulator registry (harness.emulator_registry), whose gate protocol says how to read that
API. With ``--listen-fd`` the gate serves on a listening socket it inherits (made by the
harness in the host network namespace while the gate and its emulator run in a private one).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ipaddress
import socket
import sys
from pathlib import Path
from urllib.parse import urlsplit

from aiohttp import web

from harness.emulator_registry import UnknownEmulatorError, get_emulator_class
from harness.gate.parse_errors import GateRunner
from harness.gate.server import Gate
from harness.gate.state import GateState
from harness.processes import listening_socket


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


async def _serve(gate: Gate, sock: socket.socket) -> None:
    runner = GateRunner(gate.app, gate.bad_request, access_log=None, handle_signals=True)
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
