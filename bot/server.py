"""The HTTP side of `galley run`: health, readiness, metrics and, in HTTP mode, Slack's
requests at `POST /slack/events` (refused unread when unsigned or too large, then
signature-checked and acted on once: `bot/inbound.py`, before any listener runs).
Served by uvicorn; Bolt's sync dispatch runs in a worker thread, off the event loop.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest
from slack_bolt import BoltResponse
from slack_bolt.adapter.starlette.handler import to_bolt_request, to_starlette_response
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from bot.inbound import SlackEvents, Unread, body_within, refusal, refused_unread
from core.telemetry.metrics import SLACK_ACK_LATENCY


def timed_ack(next_: Callable[[], BoltResponse]) -> BoltResponse:
    """Bolt middleware for Socket Mode, where no HTTP route sees the request: the rest of
    the chain returns once the listener has acked (process_before_response=False)."""
    received = time.perf_counter()
    try:
        return next_()
    finally:
        SLACK_ACK_LATENCY.observe(time.perf_counter() - received)


def web_app(slack: SlackEvents | None, ready: Callable[[], tuple[bool, str]]) -> Starlette:
    """`slack` is None in Socket Mode: then there is no /slack/events."""

    async def healthz(_: Request) -> Response:
        return PlainTextResponse("ok")

    async def readyz(_: Request) -> Response:
        is_ready, detail = await run_in_threadpool(ready)
        return JSONResponse(
            {"ready": is_ready, "detail": detail}, status_code=200 if is_ready else 503
        )

    async def metrics(_: Request) -> Response:
        return Response(generate_latest(REGISTRY), media_type=CONTENT_TYPE_LATEST)

    routes = [
        Route("/healthz", healthz),
        Route("/readyz", readyz),
        Route("/metrics", metrics),
    ]
    if slack is not None:

        async def slack_events(request: Request) -> Response:
            received = time.perf_counter()
            unread = refused_unread(request.headers)
            if unread is not None:
                return refusal(unread)
            body = await body_within(request)
            if body is None:
                return refusal(Unread.TOO_LARGE)
            bolt_request = to_bolt_request(request, body)
            bolt_response = await run_in_threadpool(slack.answer, bolt_request, body)
            # Listeners run after the ack (process_before_response=False): this is the ack.
            SLACK_ACK_LATENCY.observe(time.perf_counter() - received)
            return to_starlette_response(bolt_response)

        routes.append(Route("/slack/events", slack_events, methods=["POST"]))
    return Starlette(routes=routes)
