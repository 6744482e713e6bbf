"""What Meta's Threads API answers mean (docs/design.md §24): Graph API error bodies
(`{"error": {"message", "type", "code", "error_subcode", "fbtrace_id"}}`) classified by
their code as much as their HTTP status, the waits a throttled answer names, and the
timestamps Threads writes. Pure functions over an `httpx.Response`.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import httpx

from core.errors import EffectNotSent, EffectOutcomeUnknown
from core.http_calls import retry_after_seconds

AUTH_CODES = frozenset({190, 102, 10})  # token invalid or expired; session; permission denied
THROTTLED_CODES = frozenset({4, 17, 32, 613})  # app, user, page and custom rate limits
NOT_FOUND_CODE, NOT_FOUND_SUBCODE = 100, 33  # "Object with ID … does not exist"
USAGE_HEADERS = ("x-business-use-case-usage", "x-app-usage")


def graph_error(response: httpx.Response) -> dict[str, Any]:
    """The `error` object of a Graph API answer ({} when the body is not one)."""
    try:
        body = response.json()
    except ValueError:
        return {}
    error = body.get("error") if isinstance(body, dict) else None
    return error if isinstance(error, dict) else {}


def said(response: httpx.Response) -> str:
    """What Threads said: its error message and code, else the body's first words. The
    request's URL is never quoted (an operator's API base may carry more than a host)."""
    error = graph_error(response)
    if error.get("message"):
        code = error.get("code")
        sub = error.get("error_subcode")
        where = f" (code {code}" + (f", subcode {sub})" if sub else ")") if code else ""
        return f"{error['message']}{where}"
    text = " ".join(response.text.split())
    return (text[:200] + "…" if len(text) > 200 else text) or "(empty body)"


def is_auth(response: httpx.Response) -> bool:
    """The token refused: OAuthException 190 (invalid or expired), a permission code
    (10, 200-299), or a plain 401/403."""
    code = graph_error(response).get("code")
    if isinstance(code, int) and (code in AUTH_CODES or 200 <= code <= 299):
        return True
    return response.status_code in (401, 403) and code not in THROTTLED_CODES


def is_throttled(response: httpx.Response) -> bool:
    return response.status_code == 429 or graph_error(response).get("code") in THROTTLED_CODES


def is_missing(response: httpx.Response) -> bool:
    """Threads does not have (or no longer shows) the object asked for."""
    error = graph_error(response)
    if response.status_code in (404, 410):
        return True
    return error.get("code") == NOT_FOUND_CODE and error.get("error_subcode") == NOT_FOUND_SUBCODE


def wait_of(response: httpx.Response) -> float | None:
    """`Retry-After`, else the longest `estimated_time_to_regain_access` (minutes) in the
    usage headers Meta sends with a throttled answer."""
    wait = retry_after_seconds(response.headers.get("retry-after"))
    if wait is not None:
        return wait
    minutes = [m for header in USAGE_HEADERS for m in _regain_minutes(response.headers.get(header))]
    return max(minutes) * 60.0 if minutes else None


def _regain_minutes(header: str | None) -> list[float]:
    if not header:
        return []
    try:
        usage = json.loads(header)
    except ValueError:
        return []
    entries: list[Any] = []
    if isinstance(usage, dict):
        for value in usage.values():
            entries += value if isinstance(value, list) else [value]
    found = []
    for entry in entries:
        if isinstance(entry, dict) and isinstance(
            entry.get("estimated_time_to_regain_access"), int | float
        ):
            found.append(float(entry["estimated_time_to_regain_access"]))
    return found


def refused(response: httpx.Response, secret_env: str) -> EffectNotSent | EffectOutcomeUnknown:
    """A write's answer other than 200: auth stops and alerts, throttling waits, a 5xx
    (or any other odd answer) may have acted, a 400 is refused for good."""
    status = response.status_code
    line = f"Threads answered {status}: {said(response)}"
    if is_throttled(response):
        wait = wait_of(response)
        hint = f" (retry after {wait:.0f}s)" if wait is not None else ""
        return EffectNotSent(line + hint, retry_after=wait)
    if is_auth(response):
        return EffectNotSent(f"{line} (check {secret_env})", auth=True)
    if status in (400, 404, 413, 422):
        return EffectNotSent(line, permanent=True)
    return EffectOutcomeUnknown(line)  # 500, 502, 503, 504, redirects: it may have acted


def timestamp(value: object) -> datetime | None:
    """Threads' `timestamp` (`2026-12-06T05:00:00+0000`), None when unreadable."""
    if not isinstance(value, str):
        return None
    try:
        return datetime.strptime(value, "%Y-%m-%dT%H:%M:%S%z")
    except ValueError:
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None


def describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
