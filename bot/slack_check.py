"""`galley run` asks Slack who it is (`auth.test`) before anything else talks to it, so
a wrong URL, an unreachable API or a refused token is one line naming the variable to
fix, not a traceback. (Socket Mode's app token is checked the same way when
bot/socket_link.py opens its first connection, before any work starts.)
"""

from __future__ import annotations

import http.client
import urllib.error
from typing import Any

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from core.errors import SlackUnavailable

TOKEN_ERRORS = frozenset(
    {"invalid_auth", "not_authed", "token_revoked", "token_expired", "account_inactive"}
)
URL_VARIABLE = "GALLEY_SLACK_API_URL"
TOKEN_VARIABLE = "SLACK_BOT_TOKEN"


def check_slack(client: WebClient) -> dict[str, Any]:
    """`auth.test`'s answer (team, bot user); `SlackUnavailable` saying what to fix."""
    url = client.base_url
    try:
        answer = client.auth_test().data
    except SlackApiError as exc:
        raise _refusal(exc, url) from exc
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
