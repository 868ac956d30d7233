"""The network a benchmark's bucket sits behind, made of the gate's faults scoped to that
bucket: a latency per request and, on the ``--wan`` profile, a cap per connection
(``stream-bandwidth``), as a long-RTT TCP stream is capped by its window. The faults start
before the bucket is mounted or written and are cleared when the run ends, also on an error.
"""

from __future__ import annotations

import argparse
import contextlib
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

WAN_LATENCY_MS = 30.0
WAN_STREAM_MIBPS = 8.0


@dataclass(frozen=True)
class Network:
    """Per-request latency (0: none) and per-stream cap in MiB/s (None: none)."""

    latency_ms: float = 0.0
    stream_mibps: float | None = None

    @property
    def label(self) -> str:
        """``0ms``, ``30ms`` or ``wan 30ms 8MiB/s/stream``."""
        if self.stream_mibps is None:
            return f"{self.latency_ms:g}ms"
        return f"wan {self.latency_ms:g}ms {self.stream_mibps:g}MiB/s/stream"

    def faults(self) -> list[tuple[str, dict[str, float]]]:
        """(kind, options) of the gate faults that make this network."""
        out: list[tuple[str, dict[str, float]]] = []
        if self.latency_ms > 0:
            out.append(("latency", {"ms": self.latency_ms}))
        if self.stream_mibps is not None:
            out.append(("stream-bandwidth", {"mibps": self.stream_mibps}))
        return out

    def as_json(self) -> dict[str, object]:
        return {"latency_ms": self.latency_ms, "stream_mibps": self.stream_mibps}


@contextlib.contextmanager
def behind(emulator: Any, bucket: str, network: Network) -> Iterator[dict[str, Any]]:
    """Keep ``bucket`` of ``emulator`` behind ``network``'s faults while the block runs. The
    dict it gives is filled when the block ends: per kind, the fault's ``hits`` and, if it
    was gone or ended before the block did (the gate restarted, or a client cleared every
    fault), why (``ended``); ``not_held`` turns that into problems."""
    started: list[tuple[str, int]] = []
    held: dict[str, Any] = {}
    try:
        for kind, options in network.faults():
            started.append((kind, emulator.add_fault(kind, bucket=bucket, **options)["id"]))
        yield held
    finally:
        for kind, fault_id in started:
            cleared = emulator.clear_faults(fault_id=fault_id)
            if cleared:
                held[kind] = {"hits": int(cleared[0].get("hits", 0)), "ended": None}
            else:  # ended before the block did, or unknown to the gate
                held[kind] = {"hits": None, "ended": _why_gone(emulator, fault_id)}


def _why_gone(emulator: Any, fault_id: int) -> str:
    try:
        return str(emulator.fault(fault_id).get("ended") or "gone")
    except Exception:  # a restarted gate no longer knows the fault
        return "unknown to the gate (restarted?)"


@contextlib.contextmanager
def fresh_bucket(
    emulator: Any, prefix: str, network: Network
) -> Iterator[tuple[str, dict[str, Any]]]:
    """A new bucket of the user's (named ``prefix``-random) behind ``network`` while the block
    runs: (its URL, what ``behind`` records of its faults). Deleted at the end."""
    bucket = f"{prefix}-{uuid.uuid4().hex[:8]}"
    url = emulator.make_bucket(bucket, owner="user", public=False)
    try:
        with behind(emulator, bucket, network) as held:
            yield url, held
    finally:
        emulator.delete_bucket(bucket)


def not_held(network: Network, held: dict[str, Any]) -> list[str]:
    """Why a run was not behind ``network`` for all its length (``held``: what ``behind``
    recorded): a fault never recorded, ended early, or that hit no request. Such a run is
    invalid, like one whose clocks drifted apart: run again, never averaged in."""
    problems = []
    for kind, _ in network.faults():
        state = held.get(kind)
        if state is None:
            problems.append(f"the {kind} fault was not recorded")
        elif state["ended"] is not None:
            problems.append(f"the {kind} fault ended before the run did ({state['ended']})")
        elif not state["hits"]:
            problems.append(f"the {kind} fault hit no request")
    return problems


def add_wan_options(parser: argparse.ArgumentParser) -> None:
    """``--wan`` and the profile's values."""
    parser.add_argument(
        "--wan",
        action="store_true",
        help="a modelled WAN: every request waits --wan-latency-ms and every connection "
        "is capped at --wan-stream-mibps (the gate's latency and stream-bandwidth faults)",
    )
    parser.add_argument("--wan-latency-ms", type=float, default=WAN_LATENCY_MS)
    parser.add_argument("--wan-stream-mibps", type=float, default=WAN_STREAM_MIBPS)


def wan_of(parser: argparse.ArgumentParser, args: argparse.Namespace) -> Network | None:
    """The ``--wan`` network (None without ``--wan``); bad values end with a usage error."""
    if not args.wan:
        return None
    if args.wan_latency_ms < 0:
        parser.error("--wan-latency-ms must be >= 0 (0: no latency)")
    if args.wan_stream_mibps <= 0:
        parser.error("--wan-stream-mibps must be > 0 (the cap of each connection, MiB/s)")
    return Network(args.wan_latency_ms, args.wan_stream_mibps)
