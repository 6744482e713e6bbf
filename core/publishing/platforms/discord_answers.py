"""What Discord's answers say, read once for the Discord publisher: its error bodies
(`{"code", "message", "errors"}`), the wait a 429 names, message ids as times (snowflakes),
and a message's reactions. Pure functions: nothing here sends anything.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import httpx

from core.http_calls import retry_after_seconds

DISCORD_EPOCH_MS = 1_420_070_400_000  # 2015-01-01T00:00:00Z, the start of every snowflake
SNOWFLAKE_TIME_SHIFT = 22  # a snowflake's milliseconds sit above 22 bits of worker/sequence
REACTIONS_COUNTED = "every emoji reaction, counted as a like; replies and shares are not read"


def snowflake_at(at: datetime) -> str:
    """The smallest message id Discord can have made at `at`: `after=` this id lists the
    messages made since then (Discord's own "snowflake from a timestamp")."""
    ms = int(at.astimezone(UTC).timestamp() * 1000) - DISCORD_EPOCH_MS
    return str(max(0, ms) << SNOWFLAKE_TIME_SHIFT)


def snowflake_time(snowflake: str) -> datetime:
    """When the message `snowflake` was made, by Discord's clock (to the millisecond)."""
    ms = (int(snowflake) >> SNOWFLAKE_TIME_SHIFT) + DISCORD_EPOCH_MS
    return datetime.fromtimestamp(ms / 1000, UTC)


def error_of(response: httpx.Response) -> str:
    """Discord's own words: `message`, its JSON error `code`, and the first field error of
    `errors` (`content: Must be 2000 or fewer in length.`); the body's text otherwise."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if not isinstance(body, dict) or not body.get("message"):
        text = " ".join(response.text.split())
        return (text[:200] + "…" if len(text) > 200 else text) or "(empty body)"
    said = str(body["message"])
    if body.get("code"):
        said += f" (code {body['code']})"
    field = _first_field_error(body.get("errors"), "")
    return f"{said}: {field}" if field else said


def _first_field_error(errors: Any, path: str) -> str | None:
    """The first `_errors` entry of Discord's nested field errors, named by its path."""
    if not isinstance(errors, Mapping):
        return None
    listed = errors.get("_errors")
    if isinstance(listed, list) and listed and isinstance(listed[0], Mapping):
        return f"{path or 'body'}: {listed[0].get('message', listed[0].get('code', ''))}"
    for name, inner in errors.items():
        found = _first_field_error(inner, f"{path}.{name}" if path else str(name))
        if found:
            return found
    return None


def wait_of(response: httpx.Response) -> float | None:
    """How long a 429 asks to wait: the body's `retry_after` (seconds, with decimals),
    else `X-RateLimit-Reset-After`, else `Retry-After`; the longest of those given."""
    waits = []
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("retry_after"), int | float):
        waits.append(float(body["retry_after"]))
    for header in ("X-RateLimit-Reset-After", "Retry-After"):
        seconds = retry_after_seconds(response.headers.get(header))
        if seconds is not None:
            waits.append(seconds)
    return max(waits) if waits else None


def is_global_limit(response: httpx.Response) -> bool:
    try:
        body = response.json()
    except ValueError:
        return False
    return isinstance(body, dict) and bool(body.get("global"))


def reactions_of(message: Mapping[str, Any]) -> int:
    """Every reaction on a message: the sum of `reactions[].count` (normal and super)."""
    reactions = message.get("reactions") or []
    return sum(int(r.get("count") or 0) for r in reactions if isinstance(r, Mapping))
