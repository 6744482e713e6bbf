"""What every HTTP adapter (model, webhook, Slack) decides the same way about one call:
its time limits, how long a `Retry-After` asks it to wait, and whether a failed request
is known never to have left. Pure functions: nothing here sends, sleeps or retries.
"""

from __future__ import annotations

import math
import socket
import time
import urllib.error
from datetime import timedelta
from email.utils import parsedate_to_datetime
from typing import NamedTuple

CONNECT_TIMEOUT_SECONDS = 10.0
_URLLIB_NEVER_SENT_REASONS = (ConnectionRefusedError, socket.gaierror)


class CallTimeout(NamedTuple):
    """The limits of one call, in seconds, for an httpx-style `Timeout(phase, connect=…)`:
    `phase` bounds each of reading, writing and waiting for a pooled connection;
    `connect` bounds opening the connection."""

    phase: float
    connect: float


def call_timeout(limit: timedelta) -> CallTimeout:
    """A call's limits: the configured `limit`, with connecting given at most
    CONNECT_TIMEOUT_SECONDS so an unreachable host fails fast, as never sent."""
    seconds = limit.total_seconds()
    return CallTimeout(phase=seconds, connect=min(CONNECT_TIMEOUT_SECONDS, seconds))


def retry_after_seconds(header: str | None, now: float | None = None) -> float | None:
    """A `Retry-After` header as seconds to wait: a number, or an HTTP date counted from
    `now` (seconds since the epoch; the wall clock when None). Never negative; None when
    the header is absent or unreadable."""
    if not header:
        return None
    seconds: float | None
    try:
        seconds = float(header)
    except ValueError:
        seconds = _seconds_until(header, time.time() if now is None else now)
    if seconds is None or not math.isfinite(seconds):
        return None
    return max(0.0, seconds)


def _seconds_until(http_date: str, now: float) -> float | None:
    try:
        return parsedate_to_datetime(http_date).timestamp() - now
    except (TypeError, ValueError):
        return None


def never_sent(exc: BaseException) -> bool:
    """True when a transport failure proves the request never left: the connection was
    refused, the name did not resolve, connecting or waiting for a pooled connection
    timed out. False for anything else (a read timeout, a dropped answer): it may have
    been acted on. Knows httpx, the anthropic SDK's httpx2, urllib's and requests' errors."""
    if isinstance(exc, urllib.error.URLError):
        return isinstance(exc.reason, _URLLIB_NEVER_SENT_REASONS)
    # Both imported late: a CLI read (which only loads the database layer) imports this
    # module through the drafter and must not pay for HTTP clients it never uses.
    import httpx
    import httpx2  # the anthropic SDK's httpx

    if isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)):
        return True
    if type(exc).__module__.startswith("requests."):
        return _requests_never_sent(exc)

    return isinstance(exc, (httpx2.ConnectError, httpx2.ConnectTimeout, httpx2.PoolTimeout))


def _requests_never_sent(exc: BaseException) -> bool:
    """requests (Mastodon.py's transport): a connect timeout, or a connection error whose
    cause is urllib3 failing to connect. A dropped answer is a ConnectionError too, but
    caused by a ProtocolError: it may have been acted on."""
    import requests
    import urllib3.exceptions

    if isinstance(exc, requests.exceptions.ConnectTimeout):
        return True
    if not isinstance(exc, requests.exceptions.ConnectionError) or not exc.args:
        return False
    cause = exc.args[0]
    cause = getattr(cause, "reason", cause)  # MaxRetryError wraps the connect failure
    return isinstance(
        cause, urllib3.exceptions.NewConnectionError | urllib3.exceptions.ConnectTimeoutError
    )
