"""Requests the HTTP parser refuses (an empty or negative Content-Length, a malformed
header) answered in the storage API's own error format, not aiohttp's plain text.

aiohttp answers such requests before any handler runs, from its request handler's
``handle_error``; :class:`GateRunner` serves the application with a request handler whose
``handle_error`` asks the gate for the answer instead.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aiohttp import web
from aiohttp.web_protocol import RequestHandler
from aiohttp.web_request import BaseRequest

BadRequestAnswer = Callable[[BaseRequest, str], web.StreamResponse]
"""(the refused request, the parser's message) -> the response to send."""


class _GateRequestHandler(RequestHandler):  # type: ignore[type-arg]
    answer_bad_request: BadRequestAnswer

    def handle_error(
        self,
        request: BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        if status != 400 or request.writer.output_size > 0:
            return super().handle_error(request, status, exc, message)
        resp = self.answer_bad_request(request, message or str(exc or "bad request"))
        resp.force_close()
        return resp


class GateRunner(web.AppRunner):
    """An AppRunner whose connections answer parser errors with ``answer``."""

    def __init__(self, app: web.Application, answer: BadRequestAnswer, **kwargs: Any) -> None:
        super().__init__(app, **kwargs)
        self._answer = answer

    async def _make_server(self) -> web.Server:
        server = await super()._make_server()
        if not hasattr(server, "_kwargs") or not hasattr(server, "_loop"):
            # an aiohttp whose Server is built differently: keep its plain-text answers
            # (tests/integration/harness/gate/test_http.py fails and says so)
            return server
        handler_class = type(
            "GateRequestHandler",
            (_GateRequestHandler,),
            {"answer_bad_request": staticmethod(self._answer)},
        )

        class _GateServer(web.Server):
            def __call__(self) -> RequestHandler:  # type: ignore[type-arg]
                return handler_class(self, loop=self._loop, **self._kwargs)  # type: ignore[no-any-return]

        server.__class__ = _GateServer
        return server
