"""What Bluesky's answers say, read once for the Bluesky publisher: an XRPC error's
status, name and message, the wait a refusal names, a transport failure, and what a
failed sign-in or create means for its effect (docs/design.md §8): not sent, sent with
its outcome unknown, or refused for an expired token. Pure functions: nothing here
sends anything.
"""

from __future__ import annotations

import time

import httpx

from core.errors import EffectNotSent, EffectOutcomeUnknown
from core.http_calls import never_sent, retry_after_seconds
from core.setup.publish_targets import BlueskyTarget

RETRY_LATER = frozenset({429, 503})  # refused for now: nothing happened


class Expired(Exception):
    """The PDS said our access token expired: the request was refused, so after a refresh
    it may be sent once more."""


def xrpc_error(exc: Exception) -> tuple[int | None, str | None, str]:
    """(HTTP status, XRPC error name, message) of an atproto request error."""
    response = getattr(exc, "response", None)
    if response is None or not hasattr(response, "status_code"):
        return None, None, ""
    content = response.content
    name = getattr(content, "error", None)
    message = getattr(content, "message", None) or ""
    return int(response.status_code), name, str(message)


def wait_of(exc: Exception) -> float | None:
    """Seconds to wait: `Retry-After`, else `ratelimit-reset` (epoch seconds)."""
    headers = getattr(getattr(exc, "response", None), "headers", None) or {}
    wait = retry_after_seconds(headers.get("retry-after"))
    if wait is not None:
        return wait
    try:
        return max(0.0, float(headers["ratelimit-reset"]) - time.time())
    except (KeyError, TypeError, ValueError):
        return None


def _hint(wait: float | None) -> str:
    return f" (retry after {wait:.0f}s)" if wait is not None else ""


def _is_transport(exc: Exception) -> bool:
    from atproto_client.exceptions import NetworkError

    return isinstance(exc, NetworkError) and getattr(exc, "response", None) is None


def describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def sign_in_failed(exc: Exception, config: BlueskyTarget) -> EffectNotSent:
    """Why a sign-in failed, as the effect's refusal: nothing was posted."""
    status, name, message = xrpc_error(exc)
    said = f"Bluesky sign-in for {config.handle} failed: {describe(exc)}"
    if status in RETRY_LATER:
        wait = wait_of(exc)
        return EffectNotSent(said + _hint(wait), retry_after=wait)
    if status in (400, 401, 403):
        var = config.secret_env
        return EffectNotSent(
            f"Bluesky refused the app password in {var} for {config.handle}: "
            f"{name or status} {message}".rstrip(),
            auth=True,
        )
    return EffectNotSent(said)  # unreachable or failing: no post was attempted


def create_failed(exc: Exception, config: BlueskyTarget, *, sent: bool) -> Exception:
    """A failed create classified (docs/design.md §8): not sent, outcome unknown, or
    `Expired`; `sent`: the create itself left, rather than a refresh before it."""
    status, name, message = xrpc_error(exc)
    if name == "ExpiredToken":
        return Expired()
    if status is None:
        cause = exc.__cause__ if isinstance(exc.__cause__, Exception) else exc
        if not sent or never_sent(cause):
            return EffectNotSent(f"Bluesky unreachable: {describe(cause)}")
        if isinstance(exc, httpx.HTTPError) or _is_transport(exc):
            return EffectOutcomeUnknown(f"Bluesky gave no complete answer: {describe(cause)}")
        return EffectOutcomeUnknown(f"Bluesky's answer could not be read: {describe(exc)}")
    said = f"Bluesky answered {status} {name or ''}: {message}".replace("  ", " ")
    if status in (401, 403):
        var = config.secret_env
        return EffectNotSent(f"{said} (check {var} for {config.handle})", auth=True)
    if status in RETRY_LATER:
        wait = wait_of(exc)
        return EffectNotSent(said + _hint(wait), retry_after=wait)
    if not sent:
        return EffectNotSent(f"Bluesky refused the session refresh: {said}")
    if name == "RecordAlreadyExists":
        return EffectOutcomeUnknown(f"{said}: the record key is taken; look it up")
    if status in (400, 413):
        return EffectNotSent(said, permanent=True)
    # bsky.social answers a duplicate record key with a bare 500: it may be there
    return EffectOutcomeUnknown(f"{said} (the record may exist already; look it up)")
