"""An items recipe whose source cannot be read is told to people (docs/design.md §29), on
SQLite and PostgreSQL: a refusal (404) at once, timeouts and 5xx after three failed polls,
once per episode however many polls fail, settled in place when a poll reads again; and
`galley status` shows each items recipe's latest poll and an uncertain item run's title.
Final state only: the item_polls row and the requests the Slack fake received."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa
from sqlmodel import col, select

from bot.slack_publishing import SlackAlerter
from core.api.status_read import read_status
from core.identity import alert_settled_key, poll_alert_key
from core.models import EffectRow, ItemPollRow, RunRow
from core.operations.poll_alerts import PollAlerts
from core.policies import PollOutcome
from core.setup.config import Config
from core.sources.items import ReadContext, SourceItem, SourceReadError, Window
from core.sources.poll_health import FAILING_ALERTED, is_alert_due
from core.sources.specs import SourceSpec
from core.states import EffectState, RunState
from core.store.effects import EffectLedger
from core.store.engine import Store
from core.testing import FrozenClock
from tests.fakes.slack_api import FakeSlack
from tests.harness.slow_marks import starts_a_server
from tests.harness.worlds import slack_channels
from tests.scheduling.test_items import (
    T0,
    FeedStub,
    Poller,
    feed_of,
    items_config,
    make_poller,
)

REFUSED = SourceReadError("blog", "404 Not Found from blog.example.com/feed.xml", retryable=False)
UNAVAILABLE = SourceReadError("blog", "503 Service Unavailable", retryable=True)


@dataclass
class FlakyFeed(FeedStub):
    """A feed that answers, or fails as the test says, on each read."""

    failure: SourceReadError | None = None
    failed_reads: int = field(default=0)

    def read(self, spec: SourceSpec, window: Window, context: ReadContext) -> list[SourceItem]:
        if self.failure is not None:
            self.failed_reads += 1
            raise self.failure
        return super().read(spec, window, context)


@pytest.fixture
@starts_a_server
def slack() -> Iterator[FakeSlack]:
    fake = FakeSlack().start()
    yield fake
    fake.stop()


@dataclass
class Polls:
    poller: Poller
    config: Config
    slack: FakeSlack
    store: Store

    def poll(self) -> None:
        self.poller.poll(self.config.recipe("weekly-update"))

    def alerts(self) -> list[dict[str, object]]:
        return self.slack.messages(self.config.slack.alert_channel_or_review)

    def row(self) -> ItemPollRow:
        with self.store.read() as session:
            found = session.get(ItemPollRow, "weekly-update")
        assert found is not None
        return found


def polls_of(store: Store, slack: FakeSlack, feed: FlakyFeed, config: Config) -> Polls:
    clock = FrozenClock(T0)
    alerter = SlackAlerter(slack_channels(slack), config.slack.alert_channel_or_review)
    alerts = PollAlerts(store, config, clock, EffectLedger(store, clock, "w1"), alerter)
    return Polls(make_poller(store, feed, clock=clock, told=alerts.tell), config, slack, store)


def text_of(message: dict[str, object]) -> str:
    return str(message.get("blocks"))


def test_a_refused_poll_is_alerted_once_and_settled_when_the_source_reads_again(
    store: Store, slack: FakeSlack
) -> None:
    feed = FlakyFeed(feed_of(1, 2))
    polls = polls_of(store, slack, feed, items_config())
    polls.poll()  # the first poll: the items are backfilled
    feed.failure = REFUSED

    polls.poll()
    polls.poll()

    assert feed.failed_reads == 2  # a 404 is not asked again within a poll
    [alert] = polls.alerts()
    assert "refused" in text_of(alert) and "404 Not Found" in text_of(alert)
    assert "actions" not in text_of(alert)  # nothing to click: a source to fix
    row = polls.row()
    assert (row.outcome, row.failures, row.lasting) == (PollOutcome.FAILED, 2, True)

    feed.failure = None
    polls.poll()
    polls.poll()

    [settled] = polls.alerts()
    assert "Settled" in text_of(settled) and settled["ts"] == alert["ts"]
    assert len(slack.calls("chat.postMessage")) == 1
    assert len(slack.calls("chat.update")) == 1
    row = polls.row()
    assert (row.outcome, row.failures, row.failing_since) == (PollOutcome.READ, 0, None)
    assert row.ended_since is not None
    told = poll_alert_key("weekly-update", row.ended_since)
    with store.read() as session:  # the alert and its settling: one receipt each
        receipts = session.exec(select(EffectRow.key, EffectRow.state)).all()
    assert sorted(receipts) == [
        (told, EffectState.SUCCEEDED),
        (alert_settled_key(told), EffectState.SUCCEEDED),
    ]


def test_timeouts_and_5xx_are_alerted_after_three_failed_polls_in_a_row(
    store: Store, slack: FakeSlack
) -> None:
    feed = FlakyFeed(feed_of(1))
    polls = polls_of(store, slack, feed, items_config())
    polls.poll()
    feed.failure = UNAVAILABLE

    polls.poll()
    polls.poll()
    assert polls.alerts() == []  # the next poll may read it: not yet people's

    polls.poll()
    polls.poll()

    [alert] = polls.alerts()
    assert "3 polls in a row" in text_of(alert) and "503" in text_of(alert)
    feed.failure = None
    polls.poll()
    feed.failure = UNAVAILABLE
    polls.poll()  # a new episode, one failure: not told

    [settled] = polls.alerts()
    assert "Settled" in text_of(settled)
    assert len(slack.calls("chat.postMessage")) == 1


def test_status_shows_the_latest_poll_and_an_uncertain_item_run_by_its_title(
    store: Store, slack: FakeSlack
) -> None:
    config = items_config(backfill="1")
    feed = FlakyFeed(feed_of(1, 2))
    polls = polls_of(store, slack, feed, config)
    polls.poll()
    with store.transaction() as session:  # its publication's outcome unknown
        session.execute(
            sa.update(RunRow)
            .where(col(RunRow.state) != RunState.SKIPPED)
            .values(state=RunState.UNCERTAIN)
        )

    with store.read_core() as connection:
        status = read_status(connection, config, polls.poller.clock.now())

    [recipe] = status.recipes
    assert recipe.last_poll is not None and recipe.last_poll.endswith(" read")
    [run] = status.uncertain
    assert "Post 2 <https://blog.example.com/post-2>" in str(status)
    assert status.to_json()["items"] == {run: "Post 2 <https://blog.example.com/post-2>"}

    feed.failure = REFUSED
    polls.poll()
    with store.read_core() as connection:
        status = read_status(connection, config, polls.poller.clock.now())
    assert "failed: source 'blog': 404 Not Found" in (status.recipes[0].last_poll or "")


def test_a_failing_episode_is_due_after_an_hour_whatever_the_count() -> None:
    since = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
    row = ItemPollRow(
        recipe="weekly-update",
        polled_at=since,
        outcome=PollOutcome.FAILED,
        failures=1,
        failing_since=since,
    )

    assert not is_alert_due(row, since + FAILING_ALERTED - timedelta(seconds=1))
    assert is_alert_due(row, since + FAILING_ALERTED)
