"""Slack's requests to an app, built and signed as Slack builds and signs them.

Slack signs each request with the app's signing secret: `X-Slack-Request-Timestamp`
and `X-Slack-Signature` = "v0=" + hex HMAC-SHA256(secret, "v0:{ts}:{body}"). Interactive
payloads (block_actions, view_submission) are form-encoded as `payload=<json>`; slash
commands are plain form fields. Nothing here knows Galley's internals.
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import time
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import urlencode

import httpx
from slack_bolt import App, BoltRequest

TEAM = "T1"
APP_ID = "A0GALLEY"
LEGACY_TOKEN = "legacy-verification-token"  # deprecated field Slack still sends
_triggers = itertools.count(1)


def signature(secret: str, timestamp: int | str, body: str) -> str:
    digest = hmac.new(
        secret.encode(), f"v0:{timestamp}:{body}".encode(), hashlib.sha256
    ).hexdigest()
    return f"v0={digest}"


def signed_headers(secret: str, body: str, *, timestamp: int | None = None) -> dict[str, str]:
    ts = int(time.time()) if timestamp is None else timestamp
    return {
        "Content-Type": "application/x-www-form-urlencoded",
        "X-Slack-Request-Timestamp": str(ts),
        "X-Slack-Signature": signature(secret, ts, body),
    }


def trigger_id() -> str:
    return f"{next(_triggers)}.1337.0123456789abcdef"


def interactive_body(payload: dict[str, Any]) -> str:
    return urlencode({"payload": json.dumps(payload)})


def block_actions(
    *,
    user: str,
    action_id: str,
    value: str,
    message_ts: str,
    response_url: str,
    channel: str = "C0REVIEW",
    block_id: str = "galley_review",
    message: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A button click on a message, as Slack sends it."""
    return {
        "type": "block_actions",
        "user": {"id": user, "username": user.lower(), "name": user.lower(), "team_id": TEAM},
        "api_app_id": APP_ID,
        "token": LEGACY_TOKEN,
        "container": {
            "type": "message",
            "message_ts": message_ts,
            "channel_id": channel,
            "is_ephemeral": False,
        },
        "trigger_id": trigger_id(),
        "team": {"id": TEAM, "domain": "galley-test"},
        "enterprise": None,
        "is_enterprise_install": False,
        "channel": {"id": channel, "name": "review"},
        "message": message or {"type": "message", "ts": message_ts, "text": ""},
        "state": {"values": {}},
        "response_url": response_url,
        "actions": [
            {
                "action_id": action_id,
                "block_id": block_id,
                "text": {"type": "plain_text", "text": action_id, "emoji": True},
                "value": value,
                "type": "button",
                "action_ts": f"{time.time():.6f}",
            }
        ],
    }


def view_submission(
    *,
    user: str,
    callback_id: str,
    private_metadata: str,
    values: dict[str, Any],
    view_id: str = "V00000001",
) -> dict[str, Any]:
    """A modal's Submit, as Slack sends it: the typed values under state.values."""
    return {
        "type": "view_submission",
        "team": {"id": TEAM, "domain": "galley-test"},
        "user": {"id": user, "username": user.lower(), "name": user.lower(), "team_id": TEAM},
        "api_app_id": APP_ID,
        "token": LEGACY_TOKEN,
        "trigger_id": trigger_id(),
        "view": {
            "id": view_id,
            "team_id": TEAM,
            "type": "modal",
            "callback_id": callback_id,
            "private_metadata": private_metadata,
            "state": {"values": values},
            "hash": "1700000000.abcdef",
            "title": {"type": "plain_text", "text": "Galley"},
            "blocks": [],
            "app_id": APP_ID,
            "bot_id": "BBOT",
        },
        "response_urls": [],
        "is_enterprise_install": False,
        "enterprise": None,
    }


def text_input(value: str | None) -> dict[str, Any]:
    """One plain_text_input's state, as it appears in view.state.values[block][action]."""
    return {"type": "plain_text_input", "value": value}


def slash_command(*, text: str, user: str, response_url: str, channel: str = "C0REVIEW") -> str:
    """`/galley <text>`: form fields, not a JSON payload."""
    return urlencode(
        {
            "token": LEGACY_TOKEN,
            "team_id": TEAM,
            "team_domain": "galley-test",
            "channel_id": channel,
            "channel_name": "review",
            "user_id": user,
            "user_name": user.lower(),
            "command": "/galley",
            "text": text,
            "api_app_id": APP_ID,
            "is_enterprise_install": "false",
            "response_url": response_url,
            "trigger_id": trigger_id(),
        }
    )


def app_home_opened(*, user: str, event_id: str = "Ev0HOME") -> dict[str, Any]:
    """An Events API callback: `user` opened the app's Home tab."""
    now = time.time()
    return {
        "token": LEGACY_TOKEN,
        "team_id": TEAM,
        "api_app_id": APP_ID,
        "event": {
            "type": "app_home_opened",
            "user": user,
            "channel": "D0GALLEY",
            "tab": "home",
            "event_ts": f"{now:.6f}",
        },
        "type": "event_callback",
        "event_id": event_id,
        "event_time": int(now),
        "authorizations": [
            {"team_id": TEAM, "user_id": "UBOT", "is_bot": True, "is_enterprise_install": False}
        ],
        "is_ext_shared_channel": False,
    }


class SlackSender:
    """Posts signed requests to an app's `/slack/events` over real HTTP."""

    def __init__(self, url: str, secret: str) -> None:
        self.url, self.secret = url, secret
        self.http = httpx.Client(timeout=10)

    def send(
        self, body: str, *, secret: str | None = None, timestamp: int | None = None
    ) -> SlackAnswer:
        headers = signed_headers(secret or self.secret, body, timestamp=timestamp)
        return self.http.post(self.url, content=body.encode(), headers=headers)

    def interactive(self, payload: dict[str, Any], **signing: Any) -> SlackAnswer:
        return self.send(interactive_body(payload), **signing)

    def event(self, payload: dict[str, Any]) -> SlackAnswer:
        """An Events API callback: JSON, signed like the rest."""
        body = json.dumps(payload)
        headers = signed_headers(self.secret, body) | {"Content-Type": "application/json"}
        return self.http.post(self.url, content=body.encode(), headers=headers)

    def close(self) -> None:
        self.http.close()


class SlackAnswer(Protocol):
    """What a test reads of the app's answer, over HTTP or from Bolt's dispatch."""

    @property
    def status_code(self) -> int: ...

    @property
    def text(self) -> str: ...

    def json(self) -> Any: ...


@dataclass(frozen=True)
class DispatchedAnswer:
    """Bolt's answer to a dispatched request, read as an HTTP answer is read."""

    status_code: int
    text: str

    def json(self) -> Any:
        return json.loads(self.text)


class DispatchSender(SlackSender):
    """Hands the same signed requests to Bolt's `App.dispatch` in this process: what the
    bot's `/slack/events` does behind uvicorn, without the server (tests of the HTTP
    transport itself use `SlackSender`)."""

    def __init__(self, bolt: App, secret: str) -> None:
        super().__init__("", secret)
        self.bolt = bolt

    def send(
        self, body: str, *, secret: str | None = None, timestamp: int | None = None
    ) -> SlackAnswer:
        headers = signed_headers(secret or self.secret, body, timestamp=timestamp)
        return self._dispatch(body, headers)

    def event(self, payload: dict[str, Any]) -> SlackAnswer:
        body = json.dumps(payload)
        headers = signed_headers(self.secret, body) | {"Content-Type": "application/json"}
        return self._dispatch(body, headers)

    def _dispatch(self, body: str, headers: dict[str, str]) -> SlackAnswer:
        answer = self.bolt.dispatch(BoltRequest(body=body, headers=headers))
        return DispatchedAnswer(answer.status, answer.body)
