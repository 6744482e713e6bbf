"""After publication (docs/design.md §28): each post published to Bluesky and Mastodon
read back over their fakes (found, deleted, a read that cannot tell), then counted at
each offset, refused reads paced. Each test checks the rows kept, the requests the fakes
received and the alerts posted. Both backends.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime, timedelta

import pytest
from sqlmodel import col, select

from core.errors import ReadRefused
from core.failpoints import hook
from core.identity import publish_effect_key
from core.models import EffectRow, PostCheckRow, PostReadingRow
from core.policies import EffectStep, PostCheck, PublishOutcome
from core.ports import PostCounts, PostFound, PostRead
from core.publishing import post_checks
from core.publishing.readings import PostReadings
from core.states import EffectState
from core.store.engine import Store
from core.testing import FrozenClock
from tests.conftest import make_config
from tests.fakes import social, webhook
from tests.fakes.bluesky import rate_limited
from tests.harness.two_platforms import BLUESKY, Platforms, world_of
from tests.harness.worlds import ANNOUNCE, KEY, RUN, MakeWorld, World


@pytest.fixture
def world(db_url: str, worlds: MakeWorld, platforms: Platforms) -> Iterator[World]:
    made = world_of(worlds, db_url, platforms)
    made.approved()
    assert made.service().publish_run(RUN).outcome == PublishOutcome.PUBLISHED
    yield made


def readings(world: World, worker: str = "w1") -> PostReadings:
    return PostReadings(
        world.store,
        world.config,
        world.clock,
        worker,
        world.publishers.publishers_for,
        world.alerts(worker).alert_post_gone,
    )


def checks(world: World) -> dict[str, PostCheckRow]:
    with world.store.read() as session:
        return {row.target: row for row in session.exec(select(PostCheckRow)).all()}


def kept(world: World) -> list[tuple[str, str, int, int]]:
    with world.store.read() as session:
        rows = session.exec(
            select(PostReadingRow).order_by(col(PostReadingRow.after_seconds))
        ).all()
        return [(r.target, r.label, r.likes, r.reposts) for r in rows]


def mine(post: dict[str, object]) -> bool:
    return True  # each fake holds the one post the world published


def test_a_published_post_is_verified_after_verify_after_and_not_before(
    world: World, platforms: Platforms
) -> None:
    first = readings(world).read_due()
    assert first.taken_up == 2 and first.verified == 0  # due two minutes after publication
    world.clock.advance(timedelta(minutes=2))
    assert readings(world).read_due().verified == 2
    found = checks(world)
    assert {row.state for row in found.values()} == {PostCheck.VERIFIED}
    assert {row.verified_at for row in found.values()} == {world.clock.now()}
    assert readings(world).read_due().verified == 0  # once


def test_a_post_deleted_after_publication_is_alerted_once_and_never_read_again(
    world: World, platforms: Platforms
) -> None:
    platforms.mastodon.delete(mine)
    for _ in range(3):
        world.clock.advance(timedelta(minutes=5))
        readings(world).read_due()
        readings(world, "w2").read_due()
    found = checks(world)
    assert found[platforms.mastodon_target].state == PostCheck.GONE
    assert found[platforms.mastodon_target].due_at is None
    assert found[BLUESKY].state == PostCheck.VERIFIED
    [alert] = world.alert_messages()
    assert "Published to Mastodon, then gone (404 at" in alert["blocks"][0]["text"]["text"]
    reads = [r for r in platforms.mastodon.requests if "/api/v1/statuses/" in r.path]
    assert len(reads) == 1  # told once, and a gone post is not read again


def test_a_read_that_cannot_tell_is_tried_again_with_backoff_and_never_taken_as_gone(
    world: World, platforms: Platforms
) -> None:
    platforms.mastodon.script("status", social.status(503), social.status(503))
    world.clock.advance(timedelta(minutes=2))
    readings(world).read_due()
    row = checks(world)[platforms.mastodon_target]
    assert (row.state, row.tries) == (PostCheck.DUE, 1)
    assert row.due_at == world.clock.now() + timedelta(minutes=1)
    world.clock.advance(timedelta(minutes=1))
    readings(world).read_due()
    row = checks(world)[platforms.mastodon_target]
    assert (row.state, row.tries) == (PostCheck.DUE, 2)
    assert row.due_at == world.clock.now() + timedelta(minutes=2)  # backoff doubles
    world.clock.advance(timedelta(minutes=2))
    readings(world).read_due()
    assert checks(world)[platforms.mastodon_target].state == PostCheck.VERIFIED
    assert world.alert_messages() == []


def test_counts_that_change_between_readings_are_kept_per_reading(
    world: World, platforms: Platforms
) -> None:
    world.clock.advance(timedelta(minutes=2))
    readings(world).read_due()  # verified
    platforms.bluesky.set_counts(mine, likes=3, reposts=1)
    platforms.mastodon.set_counts(mine, likes=5, reposts=2)
    world.clock.advance(timedelta(hours=1))
    assert readings(world).read_due().readings == 2
    platforms.bluesky.set_counts(mine, likes=40, reposts=9)
    platforms.mastodon.set_counts(mine, likes=50, reposts=8)
    world.clock.advance(timedelta(hours=23))
    assert readings(world).read_due().readings == 2
    assert readings(world).read_due().readings == 0  # nothing due until 7d
    mastodon = platforms.mastodon_target
    assert sorted(kept(world)) == [
        (BLUESKY, "1d", 40, 9),
        (BLUESKY, "1h", 3, 1),
        (mastodon, "1d", 50, 8),
        (mastodon, "1h", 5, 2),
    ]
    assert len(platforms.bluesky.requests_to("app.bsky.feed.getPosts")) == 2


def test_a_429_on_counts_defers_the_reading_to_when_the_platform_allows(
    world: World, platforms: Platforms
) -> None:
    world.clock.advance(timedelta(minutes=2))
    readings(world).read_due()
    platforms.bluesky.script("counts", rate_limited(reset_in=600))
    world.clock.advance(timedelta(hours=1))
    reader = readings(world)
    done = reader.read_due()
    assert (done.readings, done.refused) == (1, 1)  # Mastodon read; Bluesky refused
    row = checks(world)[BLUESKY]
    assert row.due_at is not None and row.due_at >= world.clock.now() + timedelta(minutes=9)
    assert reader.read_due().readings == 0  # nothing asked of Bluesky before its reset
    assert len(platforms.bluesky.requests_to("app.bsky.feed.getPosts")) == 1
    world.clock.set(row.due_at)
    assert reader.read_due().readings == 1
    assert len(platforms.bluesky.requests_to("app.bsky.feed.getPosts")) == 2


def test_a_pass_whose_claim_ran_out_writes_nothing(world: World) -> None:
    readings(world).read_due()  # taken up
    world.clock.advance(timedelta(minutes=2))
    now = world.clock.now()
    with world.store.transaction() as session:
        [first, _] = post_checks.claim_due(session, now, "w1/a", 10)
    later = now + post_checks.CLAIM_FOR
    with world.store.transaction() as session:
        taken = post_checks.claim_due(session, later, "w2/b", 10)
    assert len(taken) == 2
    with world.store.transaction() as session:
        assert not post_checks.finish(session, first, "w1/a", state=PostCheck.GONE)
    receipt = publish_effect_key(KEY, BLUESKY)
    assert {row.state for row in checks(world).values()} == {PostCheck.DUE}
    assert receipt in {row.receipt for row in taken}


def test_a_row_claimed_by_another_pass_between_its_read_and_its_claim_is_not_read_twice(
    world: World,
) -> None:
    if world.store.dialect == "sqlite":
        pytest.skip("SQLite serialises writers: a claim's transaction holds the write lock")
    readings(world).read_due()  # taken up
    world.clock.advance(timedelta(minutes=2))
    now = world.clock.now()
    other: list[PostCheckRow] = []

    replica = Store(world.db_url)  # another process: its own connections

    ran: list[bool] = []

    def claim_meanwhile() -> None:
        if ran:
            return  # the other pass's own read: no interleaving inside it
        ran.append(True)
        with replica.transaction() as session:
            other.extend(post_checks.claim_due(session, now, "w2/b", 10))

    with hook("readings_due_read", claim_meanwhile), world.store.transaction() as session:
        mine_claimed = post_checks.claim_due(session, now, "w1/a", 10)
    replica.dispose()
    assert len(other) == 2 and mine_claimed == []


class RefusingReader:
    """Refuses its first counts read (429 with a wait), then counts: one post a request."""

    target = "stub"
    counts_per_request = 1

    def __init__(self) -> None:
        self.requests = 0

    def read_post(self, external_id: str, effect_key: str) -> PostRead:
        return PostFound()

    def read_counts(self, external_ids: Sequence[str]) -> Mapping[str, PostCounts]:
        self.requests += 1
        if self.requests == 1:
            raise ReadRefused("429 Too Many Requests", retry_after=120)
        return {i: PostCounts(likes=1) for i in external_ids}


def test_after_a_429_the_rest_of_the_pass_asks_that_platform_nothing(store: Store) -> None:
    clock = FrozenClock()
    config = make_config()
    with store.transaction() as session:
        for n in range(3):
            session.add(
                PostCheckRow(
                    receipt=f"linkedin|weekly-update@2026-11-23T09:00|v1|publish:stub{n}",
                    recipe="weekly-update",
                    target="stub",
                    external_id=f"post-{n}",
                    published_at=clock.now() - timedelta(hours=1),
                    state=PostCheck.VERIFIED,
                    due_at=clock.now(),
                )
            )
    reader = RefusingReader()
    done = PostReadings(
        store, config, clock, "w1", lambda recipe: [reader], lambda *_: False
    ).read_due()
    assert (reader.requests, done.refused, done.readings) == (1, 3, 0)
    with store.read() as session:
        due = {row.due_at for row in session.exec(select(PostCheckRow)).all()}
    assert due == {clock.now() + timedelta(seconds=120)}


def test_a_webhook_publication_is_read_back_at_its_status_url_and_a_404_is_alerted_once(
    db_url: str, worlds: MakeWorld
) -> None:
    world = worlds(db_url)  # a webhook with a status URL, and no counts to read
    world.approved()
    assert world.service().publish_run(RUN).outcome == PublishOutcome.PUBLISHED
    readings(world).read_due()
    world.hook.script_status(webhook.status(404))  # the receiver no longer has it
    world.clock.advance(timedelta(minutes=2))
    assert readings(world).read_due().gone == 1
    [row] = checks(world).values()
    assert (row.state, row.due_at) == (PostCheck.GONE, None)
    world.clock.advance(timedelta(days=8))
    readings(world).read_due()
    [alert] = world.alert_messages()
    assert "Published to the webhook, then gone (404 at" in alert["blocks"][0]["text"]["text"]


def test_a_webhook_publication_found_is_verified_and_never_counted(
    db_url: str, worlds: MakeWorld
) -> None:
    world = worlds(db_url)
    world.approved()
    assert world.service().publish_run(RUN).outcome == PublishOutcome.PUBLISHED
    readings(world).read_due()
    world.clock.advance(timedelta(minutes=2))
    assert readings(world).read_due().verified == 1
    [row] = checks(world).values()
    assert (row.state, row.due_at) == (PostCheck.VERIFIED, None)


def test_a_slack_post_is_read_back_and_its_reactions_and_replies_counted(
    db_url: str, worlds: MakeWorld
) -> None:
    world = worlds(db_url, target="slack")
    world.approved()
    assert world.service().publish_run(RUN).outcome == PublishOutcome.PUBLISHED
    [post] = world.announced()
    readings(world).read_due()
    world.clock.advance(timedelta(minutes=2))
    assert readings(world).read_due().verified == 1
    reactions = [{"name": "tada", "count": 3}, {"name": "eyes", "count": 2}]
    world.slack.edit_message(ANNOUNCE, post["ts"], reactions=reactions, reply_count=4)
    world.clock.advance(timedelta(hours=1))
    assert readings(world).read_due().readings == 1
    with world.store.read() as session:
        [reading] = session.exec(select(PostReadingRow)).all()
    assert (reading.label, reading.likes, reading.replies) == ("1h", 5, 4)


def test_a_deleted_slack_post_is_alerted_once_as_gone(db_url: str, worlds: MakeWorld) -> None:
    world = worlds(db_url, target="slack")
    world.approved()
    assert world.service().publish_run(RUN).outcome == PublishOutcome.PUBLISHED
    [post] = world.announced()
    world.slack.delete_message(ANNOUNCE, post["ts"])
    for _ in range(3):
        world.clock.advance(timedelta(minutes=2))
        readings(world).read_due()
    [row] = checks(world).values()
    assert row.state == PostCheck.GONE
    [alert] = world.alert_messages()
    assert "Published to Slack, then gone" in alert["blocks"][0]["text"]["text"]


def publication_receipt(key: str, at: datetime) -> EffectRow:
    return EffectRow(
        key=key,
        draft_key=key.rpartition("|")[0],
        step=EffectStep.PUBLISH,
        payload_hash="0" * 64,
        state=EffectState.SUCCEEDED,
        external_id=f"id-{at:%H%M}",
        created_at=at,
        updated_at=at,
    )


def test_a_publication_committed_after_a_newer_one_was_taken_up_is_taken_up_too(
    store: Store,
) -> None:
    now = FrozenClock().now()
    first = "linkedin|weekly-update@2026-11-23T09:00|v1|publish:webhook"
    late = "linkedin|weekly-update@2026-11-16T09:00|v1|publish:webhook"
    with store.transaction() as session:
        session.add(publication_receipt(first, now))
    with store.transaction() as session:
        assert post_checks.take_up_publications(session, now, lambda _: timedelta(minutes=2)) == 1
    with store.transaction() as session:  # stamped five minutes earlier, committed now
        session.add(publication_receipt(late, now - timedelta(minutes=5)))
    with store.transaction() as session:
        assert post_checks.take_up_publications(session, now, lambda _: timedelta(minutes=2)) == 1
    with store.read() as session:
        assert set(session.exec(select(PostCheckRow.receipt)).all()) == {first, late}
