"""The Anthropic adapter of the `Drafter` port, and the failure classification.

The SDK's own retries are off (`max_retries=0`): every attempt goes through Galley's
ledger, so a retry is a decision recorded in the database, never a hidden re-send.
The SDK is imported by `prepare()` (`galley run` calls it before the scheduler can fire)
or else on the first model call, never at import: it costs seconds, and `galley status`
or `--help` must not pay for a client they never use. A call's latency counts from the
moment the request is sent; the time spent before it (importing the SDK, building the
client) is reported beside it, never hidden in it.
"""

from __future__ import annotations

import base64
import dataclasses
import time
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

from core.drafting_policies import AttemptOutcome
from core.errors import ModelCallFailed, ModelUnavailable
from core.http_calls import call_timeout, never_sent, retry_after_seconds
from core.ports import DraftRequest, ModelReply
from core.telemetry import observe

CHECK_SECONDS = 10.0  # `galley check --online`: one read, answered or not

if TYPE_CHECKING:
    import anthropic
    from anthropic.types import Message


class AnthropicDrafter:
    """Drafts with the official client; one HTTP request per `draft` call."""

    def __init__(self, api_key: str, base_url: str | None = None) -> None:
        self._api_key = api_key
        self._base_url = base_url

    @cached_property
    def _client(self) -> anthropic.Anthropic:
        import anthropic

        return anthropic.Anthropic(api_key=self._api_key, base_url=self._base_url, max_retries=0)

    def prepare(self) -> float:
        """Load the SDK and build the client now, so that the first call spends its time
        on the wire; returns the seconds it took. Sends nothing."""
        began = time.monotonic()
        self._client.messages  # noqa: B018 (the resource is built on first access)
        return time.monotonic() - began

    def prove_key(self) -> str:
        """One cheap authenticated read (the newest model, `GET /v1/models?limit=1`), no
        tokens spent: `galley check --online`. Raises `ModelUnavailable` naming the cause:
        the key refused, the API unreachable, or another answer."""
        import anthropic

        try:
            page = self._client.models.list(limit=1, timeout=CHECK_SECONDS)
        except anthropic.AuthenticationError as exc:
            raise ModelUnavailable(
                f"Anthropic refused ANTHROPIC_API_KEY (401): {exc.message}"
            ) from exc
        except anthropic.APIConnectionError as exc:
            where = self._base_url or "the Anthropic API"
            raise ModelUnavailable(f"{where} is unreachable: {exc}") from exc
        except anthropic.APIStatusError as exc:
            raise ModelUnavailable(f"Anthropic answered {exc.status_code}: {exc.message}") from exc
        newest = page.data[0].id if page.data else "no model listed"
        return f"key accepted (newest model: {newest})"

    def draft(self, request: DraftRequest) -> ModelReply:
        """One model call, timed from the moment it is sent, logged and counted whatever
        its outcome; the reply or the failure carries both times."""
        times = _CallTimes(time.monotonic())
        try:
            reply = self._call(request, times)
        except ModelCallFailed as exc:
            exc.before_send_s, exc.latency_s = times.split()
            observe.model_called(request, exc.outcome, exc.latency_s, before_send=exc.before_send_s)
            raise
        before_send, latency = times.split()
        reply = dataclasses.replace(reply, latency_s=latency, before_send_s=before_send)
        observe.model_called(request, AttemptOutcome.OK, latency, reply, before_send=before_send)
        return reply

    def _call(self, request: DraftRequest, times: _CallTimes) -> ModelReply:
        import anthropic
        import httpx2

        from core.drafting.post_shape import shaped_reply, tool_params
        from core.drafting.prompt_cache import SYNC_TTL, system_param

        limits = call_timeout(request.timeout)
        timeout = httpx2.Timeout(limits.phase, connect=limits.connect)
        system = system_param(request.system, request.model, SYNC_TTL)
        optional: dict[str, Any] = {"system": system} if request.system else {}
        if request.shape is not None:  # a version per target, threads: docs/design.md §30
            optional |= tool_params(request.shape)
        client = self._client
        times.sent = time.monotonic()
        try:
            message = client.messages.create(
                model=request.model,
                max_tokens=request.max_tokens,
                messages=[{"role": "user", "content": user_content(request)}],
                timeout=timeout,
                **optional,
            )
        except anthropic.AnthropicError as exc:
            raise classify(exc) from exc
        return shaped_reply(request.shape, model_reply(message, message._request_id))


def user_content(request: DraftRequest) -> Any:
    """The prompt as sent: plain text, or each image as a base64 image block before it
    (`describe_images`, docs/design.md §32)."""
    if not request.images:
        return request.prompt
    blocks: list[dict[str, Any]] = [
        {
            "type": "image",
            "source": {
                "type": "base64",
                "media_type": image.media_type,
                "data": base64.b64encode(image.data).decode("ascii"),
            },
        }
        for image in request.images
    ]
    return [*blocks, {"type": "text", "text": request.prompt}]


@dataclass
class _CallTimes:
    """When one call began (in `draft`) and when its request left (None: not yet)."""

    began: float
    sent: float | None = None

    def split(self) -> tuple[float, float]:
        """(seconds before the request was sent, seconds from sending until now)."""
        now = time.monotonic()
        sent = now if self.sent is None else self.sent
        return sent - self.began, now - sent


def model_reply(message: Message, request_id: str | None) -> ModelReply:
    """A Messages API answer as the port's reply (a batch entry's too); a tool call's
    input is kept as it came, for `shaped_reply` to validate."""
    usage = message.usage
    return ModelReply(
        text="".join(block.text for block in message.content if block.type == "text"),
        structured=next((b.input for b in message.content if b.type == "tool_use"), None),
        model=message.model,
        request_id=request_id,
        stop_reason=message.stop_reason,
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        cache_creation_tokens=usage.cache_creation_input_tokens or 0,
        cache_read_tokens=usage.cache_read_input_tokens or 0,
    )


def classify(exc: anthropic.AnthropicError) -> ModelCallFailed:
    """Map an SDK error to the retry table of docs/design.md §8."""
    import anthropic

    if isinstance(exc, anthropic.APIStatusError):
        return _classify_status(exc)
    if isinstance(exc, anthropic.APIConnectionError):
        if exc.__cause__ is not None and never_sent(exc.__cause__):
            return ModelCallFailed(AttemptOutcome.NOT_SENT, f"request never sent: {exc.__cause__}")
        cause = type(exc.__cause__).__name__ if exc.__cause__ else type(exc).__name__
        return ModelCallFailed(
            AttemptOutcome.OUTCOME_UNKNOWN, f"request sent, no complete answer ({cause})"
        )
    return ModelCallFailed(AttemptOutcome.INVALID_REQUEST, f"client error: {exc}")


def _classify_status(exc: anthropic.APIStatusError) -> ModelCallFailed:
    status = exc.status_code
    request_id = exc.response.headers.get("request-id")
    message = f"HTTP {status}: {_error_message(exc)}"
    return ModelCallFailed(
        status_outcome(status),
        message,
        status=status,
        retry_after=retry_after_seconds(exc.response.headers.get("retry-after")),
        request_id=request_id,
    )


def status_outcome(status: int) -> AttemptOutcome:
    """The retry table's row for an HTTP status the API answered with (or, for a batch
    entry, the status its error type stands for)."""
    if status in (401, 403):
        return AttemptOutcome.AUTH
    if status == 429 or status >= 500:
        return AttemptOutcome.REJECTED_RETRYABLE
    return AttemptOutcome.INVALID_REQUEST


def _error_message(exc: anthropic.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        error = body.get("error")
        text = error.get("message") if isinstance(error, dict) else None
        if isinstance(text, str):
            return text
    return str(exc.message)
