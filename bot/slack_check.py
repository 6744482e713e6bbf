"""`galley run` asks Slack who it is (`auth.test`) before anything else talks to it, so
a wrong URL, an unreachable API or a refused token is one line naming the variable to
fix, not a traceback. (Socket Mode's app token is checked the same way when
bot/socket_link.py opens its first connection, before any work starts.) An answer that
says Slack is busy or down (429, 5xx) is asked again a few times, briefly; if Slack
stays down the line says so, and blames no variable.
"""

from __future__ import annotations

import http.client
import time
import urllib.error
from collections.abc import Callable, Sequence
from typing import Any

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from core.errors import SlackUnavailable

TOKEN_ERRORS = frozenset(
    {"invalid_auth", "not_authed", "token_revoked", "token_expired", "account_inactive"}
)
URL_VARIABLE = "GALLEY_SLACK_API_URL"
TOKEN_VARIABLE = "SLACK_BOT_TOKEN"
# Seconds between tries of an answer that says "busy" or "down": about 4 s in all, so a
# blip at start-up passes and an outage is reported while the operator is watching.
TRANSIENT_WAITS = (0.5, 1.0, 2.5)
RETRY_AFTER_CAP_SECONDS = 5.0
TRANSIENT_ERRORS = frozenset(
    {"ratelimited", "service_unavailable", "fatal_error", "internal_error", "request_timeout"}
)


def check_slack(
    client: WebClient,
    *,
    waits: Sequence[float] = TRANSIENT_WAITS,
    sleep: Callable[[float], object] = time.sleep,
) -> dict[str, Any]:
    """`auth.test`'s answer (team, bot user); `SlackUnavailable` saying what to fix."""
    url = client.base_url
    started = time.monotonic()
    for attempt in range(len(waits) + 1):
        try:
            return _auth_test(client, url)
        except SlackApiError as exc:
            if not _transient(exc):
                raise _refusal(exc, url) from exc
            if attempt == len(waits):
                raise _unavailable(exc, url, attempt + 1, time.monotonic() - started) from exc
            sleep(_wait(exc, waits[attempt]))
    raise AssertionError("unreachable")  # the loop returns or raises


def _auth_test(client: WebClient, url: str) -> dict[str, Any]:
    try:
        answer = client.auth_test().data
    except urllib.error.URLError as exc:
        raise SlackUnavailable(
            f"{URL_VARIABLE}: Slack API at {url} is unreachable ({exc.reason})"
        ) from exc
    except (OSError, http.client.HTTPException, ValueError) as exc:
        raise SlackUnavailable(
            f"{URL_VARIABLE}: {url} did not answer like the Slack Web API ({exc})"
        ) from exc
    if not isinstance(answer, dict):
        raise SlackUnavailable(f"{URL_VARIABLE}: {url} did not answer auth.test with JSON")
    return answer


def _transient(exc: SlackApiError) -> bool:
    """Slack said it is busy or down, not that the request, the URL or the token is wrong."""
    status = exc.response.status_code
    data = exc.response.data
    error = data.get("error") if isinstance(data, dict) else None
    return status == 429 or status >= 500 or error in TRANSIENT_ERRORS


def _wait(exc: SlackApiError, planned: float) -> float:
    header = exc.response.headers.get("Retry-After") or exc.response.headers.get("retry-after")
    try:
        asked = float(header) if header is not None else planned
    except ValueError:
        asked = planned
    return min(max(asked, planned), RETRY_AFTER_CAP_SECONDS)


def _unavailable(exc: SlackApiError, url: str, tries: int, seconds: float) -> SlackUnavailable:
    data = exc.response.data
    error = data.get("error") if isinstance(data, dict) else None
    shown = str(error) if len(str(error)) <= 60 else str(error)[:57] + "..."
    said = f"HTTP {exc.response.status_code}" + (f" ({shown})" if error else "")
    return SlackUnavailable(
        f"Slack is unavailable: auth.test at {url} answered {said} {tries} times in "
        f"{seconds:.0f} s; try again later"
    )


def _refusal(exc: SlackApiError, url: str) -> SlackUnavailable:
    status = exc.response.status_code
    data = exc.response.data
    error = data.get("error") if isinstance(data, dict) else None
    if status == 404:
        return SlackUnavailable(
            f"{URL_VARIABLE}: {url} answered 404 for auth.test: the URL looks wrong "
            "(it is Slack's Web API base URL and ends in /api/)"
        )
    if error in TOKEN_ERRORS or status in (401, 403):
        return SlackUnavailable(f"{TOKEN_VARIABLE}: Slack refused the bot token ({error})")
    return SlackUnavailable(
        f"{URL_VARIABLE}: auth.test at {url} failed: HTTP {status} ({error or 'no error'})"
    )
