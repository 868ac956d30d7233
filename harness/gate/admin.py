"""The gate's admin API, on aiohttp's router and never forwarded to the emulator.

``GET|HEAD /__gate__/health`` is open; every other route needs the header ``X-Gate-Token``
(the token file's content; else 401): ``GET|POST|DELETE /__gate__/buckets``,
``GET /__gate__/events?bucket=B``, ``GET|POST|DELETE /__gate__/faults``,
``GET /__gate__/faults/state?id=N`` (one fault, active or ended: a cheap poll for its
hits), ``GET /__gate__/faults/log?bucket=B``. Any other path under ``/__gate__/`` is a 404.
"""

from __future__ import annotations

import hmac
import json
import os
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from typing import Any

from aiohttp import web

from harness.accounts import OWNERS
from harness.gate.faults import FaultSpecError, FaultTable
from harness.gate.state import GateState

ADMIN_PREFIX = "/__gate__/"
TOKEN_HEADER = "X-Gate-Token"

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def json_response(status: int, data: Any) -> web.Response:
    """``data`` as a JSON response."""
    return web.Response(status=status, text=json.dumps(data), content_type="application/json")


@dataclass
class Admin:
    """The admin routes of one gate."""

    store: str
    state: GateState
    faults: FaultTable
    token: str | None
    upstream_problem: Callable[[], Awaitable[str | None]]
    """Why the emulator does not answer (None when it does)."""
    log: Callable[[str], None]

    def routes(self) -> dict[tuple[str, str], Handler]:
        """(method, route below the prefix) -> handler."""
        return {
            ("GET", "health"): self.health,
            ("HEAD", "health"): self.health,
            ("GET", "events"): self.events,
            ("GET", "buckets"): self.buckets,
            ("POST", "buckets"): self.set_bucket,
            ("DELETE", "buckets"): self.drop_bucket,
            ("GET", "faults"): self.active_faults,
            ("POST", "faults"): self.add_fault,
            ("DELETE", "faults"): self.clear_faults,
            ("GET", "faults/state"): self.fault_state,
            ("GET", "faults/log"): self.fault_log,
        }

    def install(
        self,
        router: web.UrlDispatcher,
        wrap: Callable[[Handler], Handler],
        expect: Callable[[web.Request], Awaitable[None]],
    ) -> None:
        """Add the routes to ``router`` (before the gate's catch-all proxy route); ``wrap``
        decorates every handler (logging), ``expect`` answers ``Expect: 100-continue``."""
        for (method, route), handler in self.routes().items():
            router.add_route(
                method, ADMIN_PREFIX + route, wrap(self._guard(handler)), expect_handler=expect
            )
        router.add_route(
            "*", ADMIN_PREFIX + "{tail:.*}", wrap(self._guard(self.other)), expect_handler=expect
        )

    def _guard(self, handler: Handler) -> Handler:
        """``handler`` behind the token check (health stays open)."""

        async def guarded(request: web.Request) -> web.StreamResponse:
            if handler == self.health or self._authorized(request):
                return await handler(request)
            resp = json_response(
                401, {"error": f"the gate's admin API needs the {TOKEN_HEADER} header"}
            )
            if request.body_exists:
                resp.force_close()
            return resp

        return guarded

    def _authorized(self, request: web.Request) -> bool:
        if self.token is None:
            return True
        given = request.headers.get(TOKEN_HEADER, "")
        return hmac.compare_digest(given.encode(), self.token.encode())

    async def other(self, request: web.Request) -> web.StreamResponse:
        """A path the router did not match as written (``/__gate__/buckets/``): the route
        with its slashes stripped, else 404."""
        route = request.path[len(ADMIN_PREFIX) :].strip("/")
        handler = self.routes().get((request.method, route))
        if handler is None:
            return json_response(404, {"error": f"no admin route {request.method} {request.path}"})
        return await handler(request)

    async def health(self, request: web.Request) -> web.StreamResponse:
        problem = await self.upstream_problem()
        body: dict[str, Any] = {"ok": problem is None, "store": self.store, "pid": os.getpid()}
        if problem:
            body["error"] = problem
        return json_response(200 if problem is None else 503, body)

    async def events(self, request: web.Request) -> web.StreamResponse:
        return json_response(
            200, [asdict(e) for e in self.state.events(request.query.get("bucket"))]
        )

    async def buckets(self, request: web.Request) -> web.StreamResponse:
        return json_response(200, {k: asdict(v) for k, v in sorted(self.state.buckets().items())})

    async def set_bucket(self, request: web.Request) -> web.StreamResponse:
        try:
            data = json.loads(await request.read())
            name, owner = data["bucket"], data["owner"]
            public = bool(data.get("public", False))
            if not isinstance(name, str) or not name or owner not in OWNERS:
                raise ValueError(f"owner must be one of {OWNERS} and bucket non-empty")
        except (ValueError, KeyError, TypeError) as e:
            return json_response(400, {"error": f"bad request: {e}"})
        self.state.set_bucket(name, owner, public)
        return json_response(200, {"bucket": name, "owner": owner, "public": public})

    async def drop_bucket(self, request: web.Request) -> web.StreamResponse:
        name = request.query.get("bucket", "")
        self.state.drop_bucket(name)
        return json_response(200, {"bucket": name})

    async def active_faults(self, request: web.Request) -> web.StreamResponse:
        return json_response(200, [f.public() for f in self.faults.active()])

    async def add_fault(self, request: web.Request) -> web.StreamResponse:
        try:
            fault = self.faults.add(json.loads(await request.read() or b"{}"))
        except (ValueError, FaultSpecError) as e:
            return json_response(400, {"error": f"bad fault: {e}"})
        self.log(f"fault started: {fault.public()}")
        return json_response(200, fault.public())

    async def clear_faults(self, request: web.Request) -> web.StreamResponse:
        fault_id = request.query.get("id")
        ended = self.faults.clear(
            int(fault_id) if fault_id and fault_id.isdigit() else None, request.query.get("bucket")
        )
        self.log(f"faults cleared: {[f.id for f in ended]}")
        return json_response(200, [f.public() for f in ended])

    async def fault_state(self, request: web.Request) -> web.StreamResponse:
        fault_id = request.query.get("id", "")
        fault = self.faults.get(int(fault_id)) if fault_id.isdigit() else None
        if fault is None:
            return json_response(404, {"error": f"no fault with id {fault_id!r}"})
        return json_response(200, fault.public())

    async def fault_log(self, request: web.Request) -> web.StreamResponse:
        return json_response(200, self.faults.log(request.query.get("bucket")))
