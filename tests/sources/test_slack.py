"""The `slack` reader against the fake Slack Web API over real HTTP: the window's
messages by people, threads folded in, mentions rendered as names (docs/design.md §26)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest

from core.sources.items import SourceReadError
from core.sources.reading import read_source
from core.sources.slack_history import slack_ts
from tests.fakes.slack_api import FakeSlack, error, rate_limited
from tests.harness.slow_marks import starts_a_server
from tests.sources.specs import SLOT, WEEK, context, source

CHANNEL = "C0SHIPPED"
HOUR = timedelta(hours=1)


@pytest.fixture
@starts_a_server
def slack() -> Iterator[FakeSlack]:
    with FakeSlack() as fake:
        fake.add_user("U1", "Ana Lopez", "ana")
        fake.add_user("U2", "Bo Chen")
        yield fake


def say(
    slack: FakeSlack, text: str, hours_before_slot: float, user: str = "U1", **fields: object
) -> str:
    ts = slack_ts(SLOT - hours_before_slot * HOUR)
    return slack.add_message(CHANNEL, text, user=user, ts=ts, **fields)


def reply(
    slack: FakeSlack, parent: str, text: str, hours_before_slot: float, user: str = "U2"
) -> str:
    return slack.add_reply(
        CHANNEL, parent, text, user=user, ts=slack_ts(SLOT - hours_before_slot * HOUR)
    )


def read(slack: FakeSlack, **keys: object) -> list[tuple[str, str, str]]:
    spec = source(kind="slack", channel=CHANNEL, **keys)
    items = read_source(spec, WEEK, context(slack_token="xoxb-test", slack_api=slack.url + "/api/"))
    return [(item.item_id, item.title, item.text) for item in items]


def test_messages_in_the_window_are_read_newest_first_with_their_dates(slack: FakeSlack) -> None:
    old = say(slack, "last month", 24 * 30)
    first = say(slack, "We shipped search", 48)
    second = say(slack, "Docs are live\nwith examples", 2)
    later = say(slack, "after the slot", -1)

    items = read_source(
        source(kind="slack", channel=CHANNEL),
        WEEK,
        context(slack_token="xoxb-test", slack_api=slack.url + "/api/"),
    )

    assert [(item.item_id, item.title, item.published_at) for item in items] == [
        (second, "Docs are live", SLOT - 2 * HOUR),
        (first, "We shipped search", SLOT - 48 * HOUR),
    ]
    assert items[0].text == "ana: Docs are live\nwith examples"
    assert (
        items[0].link
        == f"https://galley-test.slack.com/archives/{CHANNEL}/p{second.replace('.', '')}"
    )
    assert items[0].source == f"#{CHANNEL}"
    assert old and later
    [history] = slack.calls("conversations.history")
    assert history.params["oldest"] == slack_ts(WEEK.start)  # type: ignore[arg-type]
    assert history.params["latest"] == slack_ts(SLOT)
    assert history.headers["authorization"] == "Bearer xoxb-test"


def test_a_thread_is_folded_into_its_message_replies_oldest_first(slack: FakeSlack) -> None:
    parent = say(slack, "Release 2.0 is out", 10)
    reply(slack, parent, "Congrats!", 9)
    reply(slack, parent, "Changelog: <https://acme.dev/changes|here>", 8, user="U1")
    reply(slack, parent, "after the slot", -2)

    assert read(slack) == [
        (
            parent,
            "Release 2.0 is out",
            "ana: Release 2.0 is out\n  reply: Bo Chen: Congrats!\n  reply: ana: Changelog: here (https://acme.dev/changes)",
        )
    ]


def test_bots_messages_and_channel_events_are_left_out(slack: FakeSlack) -> None:
    kept = say(slack, "A person wrote this", 5)
    say(slack, "Draft for review", 4, user="UBOT", bot_id="BBOT")
    say(slack, "Posted by an integration", 3, user="", subtype="bot_message", bot_id="B2")
    say(slack, "<@U2> has joined the channel", 2, user="U2", subtype="channel_join")
    thread = say(slack, "Thread", 6)
    slack.add_reply(
        CHANNEL, thread, "bot reply", user="UBOT", bot_id="BBOT", ts=slack_ts(SLOT - HOUR)
    )

    assert [(item_id, text) for item_id, _, text in read(slack)] == [
        (kept, "ana: A person wrote this"),
        (thread, "ana: Thread"),
    ]


def test_mentions_become_names_and_broadcasts_lose_their_ping(slack: FakeSlack) -> None:
    say(slack, "<!here> thanks <@U2> and <@U9> in <#C1|general> &amp; &lt;!channel&gt;", 1)

    [(_, _, text)] = read(slack)

    assert text == "ana: @here thanks @Bo Chen and @someone in #general & @channel"
    assert "<@" not in text and "<!" not in text


def test_each_person_is_looked_up_once(slack: FakeSlack) -> None:
    for hour in range(1, 6):
        say(slack, f"update {hour} for <@U2>", hour)

    read(slack)

    assert sorted(call.params["user"] for call in slack.calls("users.info")) == ["U1", "U2"]


def test_history_pages_are_followed_by_cursor_up_to_max_items(slack: FakeSlack) -> None:
    for minute in range(1, 451):
        say(slack, f"message {minute}", minute / 60)

    items = read(slack, max_items=300)

    assert len(items) == 300
    assert items[0][1] == "message 1"
    assert len(slack.calls("conversations.history")) == 2  # 200 a page; the third never asked


@pytest.mark.parametrize(
    ("fault", "retryable", "says"),
    [
        (error("not_in_channel"), False, "conversations.history: not_in_channel"),
        (error("invalid_auth"), False, "conversations.history: invalid_auth"),
        (error("internal_error"), True, "conversations.history: internal_error"),
        (rate_limited(30), True, "conversations.history: ratelimited (Retry-After 30s)"),
        (error("fatal_error", status=503), True, "HTTP 503"),
    ],
)
def test_slack_errors_are_classified(
    slack: FakeSlack, fault: object, retryable: bool, says: str
) -> None:
    say(slack, "hello", 1)
    slack.script("conversations.history", fault)  # type: ignore[arg-type]

    with pytest.raises(SourceReadError) as raised:
        read(slack, name="shipped")

    assert (raised.value.source, raised.value.retryable) == ("shipped", retryable)
    assert raised.value.answer.startswith(says)
