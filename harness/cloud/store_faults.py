"""Faults of a store's gate: ``StoreFaults`` (fixture ``store_faults``), ``harness fault``."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from typing import Any

import click

from harness import emulator_registry as registry
from harness.cloud.chaos import ChaosError
from harness.cloud.status import describe_fault
from harness.emulators import fleet
from harness.gate.faults import KINDS

FAULT_KINDS = KINDS
POLL_S = 0.025  # wait_hits asks the gate this often (a local HTTP call: ~1 ms)


def inject_fault(store: str, kind: str, **options: Any) -> dict[str, Any]:
    """Start ``kind`` in ``store``'s gate (see harness.gate.faults); the fault as shown."""

    try:
        return fleet.get(store).add_fault(kind, **options)
    except fleet.EmulatorError as e:
        raise ChaosError(str(e)) from None


def _kind(kind: str, doc: str) -> Callable[..., contextlib.AbstractContextManager[Any]]:
    """A StoreFaults method: ``store_faults.<kind>(store, **options)``, the fault lasting for
    the block."""

    def inject(
        self: StoreFaults, store: str, **options: Any
    ) -> contextlib.AbstractContextManager[Any]:
        return self.inject(store, kind, **options)

    inject.__name__ = inject.__qualname__ = kind.replace("-", "_")
    inject.__doc__ = doc
    return inject


class StoreFaults:
    """Faults of the local cloud's stores (the ``store_faults`` fixture). A test holds a
    fault for a block and ends it on events, never on a timer::

        with store_faults.hold("s3", "corrupt", bucket=b, max_hits=1) as fault:
            ...  # start the upload
            store_faults.wait_hits("s3", fault, 1)

    A fault ends when its block ends, when it has hit ``max_hits`` requests, or when
    :meth:`stop` / :meth:`clear_all` end it; every fault started here is cleared by
    :meth:`clear_all`. ``seconds`` (a timed end) is for people at the command line
    (``harness fault``); :meth:`hold` refuses it."""

    def __init__(self) -> None:
        self._started: list[tuple[str, int]] = []

    def start(self, store: str, kind: str, **options: Any) -> dict[str, Any]:
        """Start a fault (it lasts until :meth:`stop` / :meth:`clear_all`, its max_hits or
        its seconds)."""
        fault = inject_fault(store, kind, **options)
        self._started.append((store, int(fault["id"])))
        return fault

    def stop(self, store: str, fault: dict[str, Any]) -> None:
        """End one fault now (nothing if it already ended)."""

        fleet.get(store).clear_faults(fault_id=int(fault["id"]))

    @contextlib.contextmanager
    def inject(self, store: str, kind: str, **options: Any) -> Iterator[dict[str, Any]]:
        """The fault lasts for the block (or less, with ``seconds`` or ``max_hits``)."""
        fault = self.start(store, kind, **options)
        try:
            yield fault
        finally:
            self.stop(store, fault)

    def hold(
        self, store: str, kind: str, **options: Any
    ) -> contextlib.AbstractContextManager[dict[str, Any]]:
        """The fault lasts until the block ends (or it has hit ``max_hits`` requests);
        yields the fault as the gate showed it at its start. No ``seconds``: a test ends
        its faults on events."""
        if options.get("seconds") is not None:
            raise ChaosError(
                "StoreFaults.hold() lasts until its block ends and takes no seconds; end the "
                "fault on an event (max_hits=N, or leave the block once wait_hits() returns)."
            )
        return self.inject(store, kind, **options)

    def state(self, store: str, fault: dict[str, Any] | int) -> dict[str, Any]:
        """The fault as the gate shows it now, active or ended (``hits``, ``ended``)."""

        fault_id = fault if isinstance(fault, int) else int(fault["id"])
        try:
            return fleet.get(store).fault(fault_id)
        except fleet.EmulatorError as e:
            raise ChaosError(str(e)) from None

    def wait_hits(
        self, store: str, fault: dict[str, Any] | int, n: int = 1, timeout: float = 60.0
    ) -> dict[str, Any]:
        """Wait until ``fault`` has hit at least ``n`` requests; its state then (polled
        every 25 ms). ``timeout`` is a hang guard: ChaosError if the hits do not come in
        time, or at once if the fault ended before (cleared, or its seconds up)."""
        deadline = time.monotonic() + timeout
        while True:
            now = self.state(store, fault)
            if now["hits"] >= n:
                return now
            if now.get("ended") is not None:
                raise ChaosError(
                    f"{store} fault {describe_fault(now)} ended ({now['ended']}) after "
                    f"{now['hits']} of the {n} hit(s) waited for."
                )
            if time.monotonic() > deadline:
                raise ChaosError(
                    f"{store} fault {describe_fault(now)} hit {now['hits']} of the {n} "
                    f"request(s) waited for in {timeout:g} s: no matching request came "
                    "(check its bucket and method)."
                )
            time.sleep(POLL_S)

    outage = _kind("outage", "Requests hang (no answer) for the block.")
    errors = _kind(
        "errors", "A share ``rate`` of requests gets ``status`` (503) in the API's error format."
    )
    latency = _kind("latency", "Every request waits ``ms`` first.")
    bandwidth = _kind("bandwidth", "Bodies flow at ``mibps`` MiB/s in total.")
    stream_bandwidth = _kind("stream-bandwidth", "Each request's body flows at ``mibps`` MiB/s.")
    reset = _kind("reset", "A share ``rate`` of connections is reset in the middle of a body.")
    deny = _kind("deny", "403 AccessDenied, as when the credentials were revoked.")
    corrupt = _kind(
        "corrupt",
        "A share ``rate`` of object writes is answered with a wrong checksum (the object "
        "is intact); the object's reads show it too until it is written again or deleted.",
    )

    def log(self, store: str, bucket: str | None = None) -> list[dict[str, Any]]:
        """The store's fault log (starts and ends)."""

        return fleet.get(store).fault_log(bucket)

    def clear_all(self) -> None:
        """End every fault started through this object."""

        for store, fault_id in reversed(self._started):
            with contextlib.suppress(fleet.EmulatorError):
                fleet.get(store).clear_faults(fault_id=fault_id)
        self._started.clear()


@click.command("fault")
@click.argument("store")
@click.argument("kind", type=click.Choice([*FAULT_KINDS, "clear", "list"]))
@click.option("--seconds", type=float, help="How long the fault lasts (default: until clear).")
@click.option(
    "--max-hits",
    type=click.IntRange(min=1),
    help="End the fault once it has hit this many requests.",
)
@click.option("--rate", type=float, help="Share of requests hit (errors, reset, corrupt; 1).")
@click.option("--status", type=int, help="HTTP status of 'errors' (default 503).")
@click.option("--ms", type=float, help="Delay of 'latency' in milliseconds.")
@click.option("--mibps", type=float, help="MiB/s of 'bandwidth' (all), 'stream-bandwidth' (each).")
@click.option("--bucket", help="Only requests on this bucket (container).")
@click.option(
    "--method",
    type=click.Choice(["GET", "HEAD", "PUT", "POST", "DELETE", "PATCH"], case_sensitive=False),
    help="Only requests with this method.",
)
@click.option("--id", "fault_id", type=int, help="clear: only this fault.")
def fault_command(
    store: str,
    kind: str,
    seconds: float | None,
    max_hits: int | None,
    rate: float | None,
    status: int | None,
    ms: float | None,
    mibps: float | None,
    bucket: str | None,
    method: str | None,
    fault_id: int | None,
) -> None:
    """Make STORE (a store or its alias) misbehave through its gate: outage, errors,
    latency, bandwidth, stream-bandwidth, reset, deny, corrupt; or clear / list its faults."""

    store = registry.resolve_store(store)
    try:
        emulator = fleet.get(store)
        if kind == "list":
            active = emulator.faults()
            for fault in active:
                click.echo(describe_fault(fault))
            if not active:
                click.echo(f"No faults on {store}.")
            return
        if kind == "clear":
            ended = emulator.clear_faults(fault_id=fault_id, bucket=bucket)
            click.echo(f"Cleared {len(ended)} fault(s) on {store}.")
            return
        fault = emulator.add_fault(
            kind,
            seconds=seconds,
            max_hits=max_hits,
            rate=rate,
            status=status,
            ms=ms,
            mibps=mibps,
            bucket=bucket,
            method=method.upper() if method else None,
        )
    except fleet.EmulatorError as e:
        raise click.ClickException(str(e)) from None
    click.echo(f"{store}: started {describe_fault(fault)}")
