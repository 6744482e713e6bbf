"""Slack's HTTP requests taken in (HTTP mode, docs/design.md §34): a request without
Slack's signature headers, or with a body over `MAX_BODY`, is refused before its body is
read; a body is read under the cap as it arrives; a signed request is acted on once.

It never reads a body whole before knowing its size, and never records a delivery whose
signature it has not checked (a forger could otherwise fill the deliveries table).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from slack_bolt import App, BoltRequest, BoltResponse
from slack_sdk.signature import SignatureVerifier
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response

MAX_BODY = 1024 * 1024  # bytes: Slack's largest payloads are a few hundred KB
SIGNATURE = "x-slack-signature"
TIMESTAMP = "x-slack-request-timestamp"
DELIVERY_PREFIX = "http:"  # deliveries table ids: Socket Mode's are Slack's envelope ids


class Unread(StrEnum):
    """Why a request was refused before its body was read."""

    UNSIGNED = "the request carries no Slack signature headers"
    TOO_LARGE = f"the body is over {MAX_BODY // (1024 * 1024)} MiB"


def refusal(why: Unread) -> Response:
    status = 401 if why == Unread.UNSIGNED else 413
    return PlainTextResponse(f"refused: {why}", status_code=status)


def refused_unread(headers: Headers) -> Unread | None:
    """Why the request is refused from its headers alone, or None to read its body."""
    if not headers.get(SIGNATURE) or not headers.get(TIMESTAMP):
        return Unread.UNSIGNED
    length = headers.get("content-length")
    if length is not None and (not length.isdigit() or int(length) > MAX_BODY):
        return Unread.TOO_LARGE
    return None


async def body_within(request: Request, cap: int = MAX_BODY) -> bytes | None:
    """The body, read chunk by chunk as it arrives; None as soon as it passes `cap` (the
    rest is never read: the server closes the connection after the answer)."""
    chunks: list[bytes] = []
    count = 0
    async for chunk in request.stream():
        count += len(chunk)
        if count > cap:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


@dataclass(frozen=True)
class SlackEvents:
    """What `/slack/events` answers with: Bolt, behind the signature check and the
    deliveries seen once (`first_delivery`: `core/store/deliveries.py`'s rule, the one
    Socket Mode's envelopes go through)."""

    bolt: App
    signing_secret: str
    first_delivery: Callable[[str], bool]

    def answer(self, request: BoltRequest, raw_body: bytes) -> BoltResponse:
        """Bolt's answer; a replay of a request already acted on is acked, not acted on.
        The signature names the request: HMAC of its timestamp and body, so two distinct
        requests (each has its own trigger, action or event id) never share one."""
        headers = {name: values[0] for name, values in request.headers.items() if values}
        signature = headers.get(SIGNATURE, "")
        verifier = SignatureVerifier(self.signing_secret)
        if verifier.is_valid_request(raw_body, headers) and not self.first_delivery(
            DELIVERY_PREFIX + signature
        ):
            return BoltResponse(status=200, body="")
        return self.bolt.dispatch(request)  # Bolt checks the signature again: 401 if bad
