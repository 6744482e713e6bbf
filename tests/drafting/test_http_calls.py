"""The HTTP decisions the model, webhook and Slack adapters share: a call's time limits,
a `Retry-After` read as seconds, and which transport failures prove nothing was sent.
"""

from __future__ import annotations

import socket
import time
import urllib.error
from datetime import timedelta
from email.utils import formatdate
from typing import Any

import httpx
import httpx2
import pytest
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from slack_sdk.web.slack_response import SlackResponse

from bot.slack_surface import ChannelPacer, SlackChannels
from core.http_calls import CONNECT_TIMEOUT_SECONDS, call_timeout, never_sent, retry_after_seconds

NOW = 1_790_000_000.0  # a fixed wall clock, seconds since the epoch


def http_date(epoch_seconds: float) -> str:
    return formatdate(epoch_seconds, usegmt=True)


@pytest.mark.parametrize(
    ("header", "seconds"), [("7", 7.0), ("0", 0.0), ("0.3", 0.3), (" 12 ", 12.0), ("-5", 0.0)]
)
def test_a_number_is_seconds_to_wait_never_negative(header: str, seconds: float) -> None:
    assert retry_after_seconds(header, now=NOW) == seconds


def test_a_future_http_date_is_the_seconds_until_it() -> None:
    assert retry_after_seconds(http_date(NOW + 90), now=NOW) == 90.0


def test_a_past_http_date_means_no_wait() -> None:
    assert retry_after_seconds(http_date(NOW - 3600), now=NOW) == 0.0


def test_an_http_date_is_counted_from_the_wall_clock_by_default() -> None:
    waited = retry_after_seconds(http_date(time.time() + 60))
    assert waited is not None and 58.0 <= waited <= 60.0


@pytest.mark.parametrize("header", [None, "", "soon", "Mon, 99 Foo 2026", "inf", "nan"])
def test_an_absent_or_unreadable_header_is_none(header: str | None) -> None:
    assert retry_after_seconds(header, now=NOW) is None


def test_connecting_gets_at_most_the_connect_limit() -> None:
    limits = call_timeout(timedelta(minutes=2))
    assert (limits.phase, limits.connect) == (120.0, CONNECT_TIMEOUT_SECONDS)


def test_a_short_call_limit_bounds_connecting_too() -> None:
    limits = call_timeout(timedelta(seconds=3))
    assert (limits.phase, limits.connect) == (3.0, 3.0)


NEVER_SENT = [
    httpx.ConnectError("refused"),
    httpx.ConnectTimeout("connect timed out"),
    httpx.PoolTimeout("no pooled connection"),
    httpx2.ConnectError("refused"),
    httpx2.ConnectTimeout("connect timed out"),
    httpx2.PoolTimeout("no pooled connection"),
    urllib.error.URLError(ConnectionRefusedError(111, "Connection refused")),
    urllib.error.URLError(socket.gaierror(-2, "Name or service not known")),
]
MAYBE_SENT = [
    httpx.ReadTimeout("read timed out"),
    httpx.WriteTimeout("write timed out"),
    httpx.RemoteProtocolError("server disconnected"),
    httpx.ReadError("connection reset"),
    httpx2.ReadTimeout("read timed out"),
    httpx2.RemoteProtocolError("server disconnected"),
    urllib.error.URLError(TimeoutError("timed out")),  # connecting or sending: cannot tell
    urllib.error.URLError(ConnectionResetError(104, "Connection reset by peer")),
    TimeoutError("timed out"),
    ConnectionResetError(104, "Connection reset by peer"),
]


@pytest.mark.parametrize("failure", NEVER_SENT, ids=lambda e: f"{type(e).__module__}.{e!r}")
def test_refused_unresolved_or_not_connected_in_time_is_never_sent(failure: Exception) -> None:
    assert never_sent(failure)


@pytest.mark.parametrize("failure", MAYBE_SENT, ids=lambda e: f"{type(e).__module__}.{e!r}")
def test_a_failure_after_connecting_may_have_been_acted_on(failure: Exception) -> None:
    assert not never_sent(failure)


class RecordingPacer(ChannelPacer):
    """Never sleeps; keeps each back-off it was asked for."""

    def __init__(self) -> None:
        super().__init__(interval=0.0)
        self.backed_off: list[float] = []

    def wait_turn(self, channel: str) -> None:
        pass

    def back_off(self, channel: str, seconds: float) -> None:
        self.backed_off.append(seconds)


def rate_limited_once(headers: dict[str, str]) -> Any:
    """A Web API method refused once with a 429 carrying `headers`, then answered."""
    calls: list[dict[str, Any]] = []

    def chat_postMessage(**fields: Any) -> SlackResponse:  # noqa: N802 - Slack's own name
        calls.append(fields)
        if len(calls) == 1:
            raise SlackApiError("ratelimited", answer(429, {"ok": False}, headers))
        return answer(200, {"ok": True, "channel": fields["channel"], "ts": "1.0"}, {})

    return chat_postMessage


def answer(status: int, data: dict[str, Any], headers: dict[str, str]) -> SlackResponse:
    return SlackResponse(
        client=WebClient(),
        http_verb="POST",
        api_url="https://slack.com/api/chat.postMessage",
        req_args={},
        data=data,
        headers=headers,
        status_code=status,
    )


@pytest.mark.parametrize(
    ("headers", "low", "high"),
    [
        ({"Retry-After": "4"}, 4.0, 4.0),
        ({}, 1.0, 1.0),  # Slack sent none: a second, as always
        ({"Retry-After": "soon"}, 1.0, 1.0),
        (None, 27.0, 30.0),  # an HTTP date 30 s ahead, written when the test runs
    ],
    ids=["seconds", "absent", "unreadable", "http-date"],
)
def test_slack_pacer_backs_off_for_a_429s_retry_after(
    headers: dict[str, str] | None, low: float, high: float
) -> None:
    headers = headers if headers is not None else {"Retry-After": http_date(time.time() + 30)}
    pacer = RecordingPacer()
    channels = SlackChannels(WebClient(), pacer)
    answered = channels.call(rate_limited_once(headers), channel="C0REVIEW", text="hi")
    assert answered["ts"] == "1.0"
    assert len(pacer.backed_off) == 1 and low <= pacer.backed_off[0] <= high
