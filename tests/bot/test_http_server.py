"""The bot's HTTP server: `/slack/events` acts only on requests signed with the signing
secret and fresh (an unsigned or stale one changes nothing; a signed one replayed
inside the window acts once), and `/healthz`,
`/readyz` and `/metrics` answer.
"""

from __future__ import annotations

import time

import httpx
import pytest

from core.states import DraftState
from tests.fakes.slack_api import RESPONSE_URL
from tests.harness.slack_harness import (
    APPROVE,
    PEOPLE,
    RECIPE,
    SECRET,
    SETTLE,
    StartBot,
    eventually,
)
from tests.harness.slack_requests import signed_headers, slash_command

# --- signatures -----------------------------------------------------------------------------


def test_unsigned_or_replayed_requests_are_refused_and_change_nothing(
    start_bot: StartBot, sqlite_url: str
) -> None:
    h = start_bot(sqlite_url, slack=PEOPLE, over_http=True)
    key, _ = h.draft_and_post()
    stale = int(time.time()) - 6 * 60

    assert h.click(APPROVE, "U0EDITOR", key, secret="not-the-secret").status_code == 401
    assert h.click(APPROVE, "U0EDITOR", key, timestamp=stale).status_code == 401
    assert h.command("pause all", "U0ADMIN", secret="not-the-secret").status_code == 401
    assert h.command("pause all", "U0ADMIN", timestamp=stale).status_code == 401
    time.sleep(SETTLE)

    assert h.draft_row(key).state == DraftState.READY
    assert h.recipe_row().paused is False
    assert h.calls("chat.update") == []
    assert h.slack.calls(RESPONSE_URL) == []

    assert h.click(APPROVE, "U0EDITOR", key).status_code == 200  # the same click, signed
    eventually(lambda: h.draft_row(key).state == DraftState.APPROVED, "the signed approval")


# --- the HTTP server ------------------------------------------------------------------------


def test_health_readiness_and_metrics_answer_while_the_bot_runs(
    start_bot: StartBot, sqlite_url: str
) -> None:
    h = start_bot(sqlite_url, over_http=True)
    base = f"http://127.0.0.1:{h.bot.http_port}"

    health = httpx.get(f"{base}/healthz")
    assert (health.status_code, health.text) == (200, "ok")
    ready = httpx.get(f"{base}/readyz")
    assert ready.status_code == 200 and ready.json()["ready"] is True
    metrics = httpx.get(f"{base}/metrics")
    assert metrics.status_code == 200
    assert metrics.headers["content-type"].startswith("text/plain")
    assert "# TYPE " in metrics.text and "# HELP " in metrics.text


def test_metrics_and_readiness_listen_on_loopback_unless_configured(
    start_bot: StartBot, sqlite_url: str
) -> None:
    h = start_bot(sqlite_url, over_http=True)  # GALLEY_HTTP_HOST unset
    assert httpx.get(f"http://127.0.0.1:{h.bot.http_port}/readyz").status_code == 200
    with pytest.raises(httpx.ConnectError):  # another address of this machine: not bound
        httpx.get(f"http://127.0.0.2:{h.bot.http_port}/metrics")


# --- replays --------------------------------------------------------------------------------


def test_a_signed_admin_command_replayed_inside_the_window_runs_once(
    start_bot: StartBot, db_url: str
) -> None:
    h = start_bot(db_url, slack=PEOPLE, over_http=True)
    body = slash_command(
        text=f"bump {RECIPE} new tone", user="U0ADMIN", response_url=h.slack.response_url("U0ADMIN")
    )
    headers = signed_headers(SECRET, body)  # one signature, sent twice as an attacker would
    url = f"http://127.0.0.1:{h.bot.http_port}/slack/events"
    first = httpx.post(url, content=body.encode(), headers=headers)
    eventually(lambda: h.recipe_row().version == 2, "the bump")
    replay = httpx.post(url, content=body.encode(), headers=headers)
    assert (first.status_code, replay.status_code) == (200, 200)
    time.sleep(SETTLE)

    assert h.recipe_row().version == 2
    assert len(h.replies("U0ADMIN")) == 1
