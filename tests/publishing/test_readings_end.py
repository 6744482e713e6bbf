"""Every reading row reaches an end (docs/design.md §28): a receipt a person marked
published is never read back as a post id; a post deleted after it was verified is read
back when the counts answer leaves it out, marked gone and told once; a row read in vain
ends after its last reading's time; one bad row, or a row tried forty times and more,
never stops a pass. Rows, requests the fakes received and alerts posted are checked.
Both backends.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import timedelta

import pytest
from sqlmodel import select

from core.failpoints import hook
from core.models import PostCheckRow, PostReadingRow
from core.policies import Finding, PostCheck, PublishOutcome
from core.ports import PostCounts, PostFound, PostRead, PostUnknown
from core.publishing import post_checks
from core.publishing.engagement import read_stats
from core.publishing.readings import PostReadings
from core.store.engine import Store
from core.testing import FrozenClock
from tests.conftest import make_config
from tests.fakes import social
from tests.fakes.linkedin import ORGANIZATION, FakeLinkedIn
from tests.fakes.linkedin import TOKEN as LINKEDIN_TOKEN
from tests.harness.two_platforms import BLUESKY, Platforms, world_of
from tests.harness.worlds import ANNOUNCE, RUN, MakeWorld, World


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


def published(db_url: str, worlds: MakeWorld, platforms: Platforms) -> World:
    world = world_of(worlds, db_url, platforms)
    world.approved()
    assert world.service().publish_run(RUN).outcome == PublishOutcome.PUBLISHED
    return world


def mine(post: dict[str, object]) -> bool:
    return True  # each fake holds the one post the world published


def gone_alerts(world: World) -> list[str]:
    texts = [m["blocks"][0]["text"]["text"] for m in world.alert_messages()]
    return [t for t in texts if "then gone" in t]


# --- a receipt a person marked published ----------------------------------------------


def test_a_receipt_marked_published_is_never_read_back_and_every_surface_says_so(
    db_url: str, worlds: MakeWorld, platforms: Platforms
) -> None:
    world = world_of(worlds, db_url, platforms)
    world.approved()
    platforms.mastodon.script("create", social.accept_then_drop())
    assert world.service().publish_run(RUN).outcome == PublishOutcome.UNCERTAIN
    world.resolver().resolve(RUN, Finding.PUBLISHED, actor="U0ADMIN")
    for _ in range(4):  # past verification and the first engagement reading
        world.clock.advance(timedelta(minutes=30))
        readings(world).read_due()
    row = checks(world)[platforms.mastodon_target]
    assert (row.state, row.due_at) == (PostCheck.MARKED, None)
    assert row.detail == "marked published by U0ADMIN; not read back"
    asked = [r.path for r in platforms.mastodon.requests if r.path.startswith("/api/v1/statuses")]
    assert [p for p in asked if "manual" in p] == []  # its id was never asked for
    assert gone_alerts(world) == []
    with world.store.read() as session:
        stats = {post.target: post for post in read_stats(session, world.clock.now(), 7)}
    marked = stats[platforms.mastodon_target]
    assert (marked.state, marked.gone, marked.note) == (PostCheck.MARKED, None, row.detail)
    assert stats[BLUESKY].state == PostCheck.VERIFIED


def test_a_marked_receipt_taken_up_as_due_before_is_marked_and_never_read(
    store: Store,
) -> None:
    clock = FrozenClock()
    reader = StubReader("stub-a")
    with store.transaction() as session:
        row = stub_row(clock, "stub-a", "post-x", PostCheck.DUE, 0, 10)
        row.external_id = "manual:U0ADMIN"
        session.add(row)
    PostReadings(
        store, make_config(), clock, "w1", lambda recipe: [reader], lambda *_: False
    ).read_due()
    with store.read() as session:
        [found] = session.exec(select(PostCheckRow)).all()
    assert (found.state, found.due_at) == (PostCheck.MARKED, None)
    assert found.detail == "marked published by U0ADMIN; not read back"
    assert reader.read == []


# --- a post deleted after it was verified -----------------------------------------------


def test_posts_deleted_after_verification_are_marked_gone_and_told_once_per_platform(
    db_url: str, worlds: MakeWorld, platforms: Platforms
) -> None:
    world = published(db_url, worlds, platforms)
    world.clock.advance(timedelta(minutes=2))
    assert readings(world).read_due().verified == 2
    platforms.bluesky.delete(mine)
    platforms.mastodon.delete(mine)
    world.clock.advance(timedelta(hours=1))
    assert readings(world).read_due().gone == 2
    for _ in range(3):
        world.clock.advance(timedelta(hours=2))
        readings(world).read_due()
    found = checks(world)
    assert {row.state for row in found.values()} == {PostCheck.GONE}
    assert {row.due_at for row in found.values()} == {None}
    told = gone_alerts(world)
    assert len(told) == 2
    assert any("Published to Mastodon, then gone (404 at" in t for t in told)
    assert any("Published to Bluesky, then gone (400 at" in t for t in told)
    with world.store.read() as session:
        assert session.exec(select(PostReadingRow)).all() == []


def test_a_slack_post_deleted_after_verification_is_marked_gone_and_told_once(
    db_url: str, worlds: MakeWorld
) -> None:
    world = worlds(db_url, target="slack")
    world.approved()
    assert world.service().publish_run(RUN).outcome == PublishOutcome.PUBLISHED
    [post] = world.announced()
    readings(world).read_due()
    world.clock.advance(timedelta(minutes=2))
    assert readings(world).read_due().verified == 1
    world.slack.delete_message(ANNOUNCE, post["ts"])
    for _ in range(3):
        world.clock.advance(timedelta(hours=1))
        readings(world).read_due()
    [row] = checks(world).values()
    assert (row.state, row.due_at) == (PostCheck.GONE, None)
    assert len(gone_alerts(world)) == 1


@pytest.mark.slow  # starts the LinkedIn fake in its body
def test_a_linkedin_post_deleted_after_verification_is_marked_gone_and_told_once(
    db_url: str, worlds: MakeWorld
) -> None:
    with FakeLinkedIn() as linkedin:
        publish = (
            f'publish = {{ to = "linkedin", author = "{ORGANIZATION}", api = "{linkedin.api}" }}'
        )
        world = worlds(db_url, publish=publish, environ={"GALLEY_LINKEDIN_TOKEN": LINKEDIN_TOKEN})
        world.approved()
        assert world.service().publish_run(RUN).outcome == PublishOutcome.PUBLISHED
        readings(world).read_due()
        world.clock.advance(timedelta(minutes=2))
        assert readings(world).read_due().verified == 1
        linkedin.delete(mine)
        for _ in range(3):
            world.clock.advance(timedelta(hours=1))
            readings(world).read_due()
    [row] = checks(world).values()
    assert (row.state, row.due_at) == (PostCheck.GONE, None)
    [told] = gone_alerts(world)
    assert "Published to LinkedIn, then gone (404 at" in told


def test_a_post_the_counts_never_hold_is_read_until_its_last_reading_then_ends(
    db_url: str, worlds: MakeWorld, platforms: Platforms
) -> None:
    """Bluesky's AppView never returns the post, getRecord finds it: never gone, never
    read hourly forever: the row ends a day after its last reading's time."""
    world = published(db_url, worlds, platforms)
    world.clock.advance(timedelta(minutes=2))
    readings(world).read_due()
    platforms.bluesky.script("counts", *[social.status(200, {"posts": []})] * 400)
    for _ in range(12 * 10):  # ten days, every two hours
        world.clock.advance(timedelta(hours=2))
        readings(world).read_due()
    row = checks(world)[BLUESKY]
    assert (row.state, row.due_at) == (PostCheck.VERIFIED, None)
    assert row.detail is not None and row.detail.startswith("not read by")
    assert gone_alerts(world) == []
    mastodon = checks(world)[platforms.mastodon_target]
    assert (mastodon.readings_done, mastodon.due_at) == (3, None)  # 1h, 1d, 7d


def test_a_post_never_verified_ends_unconfirmed_after_its_last_reading(
    db_url: str, worlds: MakeWorld, platforms: Platforms
) -> None:
    world = published(db_url, worlds, platforms)
    platforms.mastodon.script("status", *[social.status(503)] * 400)
    for _ in range(12 * 10):
        world.clock.advance(timedelta(hours=2))
        readings(world).read_due()
    row = checks(world)[platforms.mastodon_target]
    assert (row.state, row.due_at) == (PostCheck.UNCONFIRMED, None)
    assert gone_alerts(world) == []


# --- one bad row never stops a pass ------------------------------------------------------


class StubReader:
    """A target's reader: `post-bad` raises (an adapter's bug), `post-busy` cannot tell,
    `post-count-bad` raises on counts; every other post is found and counted."""

    counts_per_request = 1

    def __init__(self, target: str) -> None:
        self.target = target
        self.read: list[str] = []

    def read_post(self, external_id: str, effect_key: str) -> PostRead:
        self.read.append(external_id)
        if external_id.startswith("post-bad"):
            raise RuntimeError("the adapter tripped")
        if external_id.startswith("post-busy"):
            return PostUnknown("503 Service Unavailable")
        return PostFound()

    def read_counts(self, external_ids: Sequence[str]) -> Mapping[str, PostCounts]:
        if any(i.startswith("post-count-bad") for i in external_ids):
            raise RuntimeError("the counts tripped")
        return {i: PostCounts(likes=1) for i in external_ids}


def stub_row(
    clock: FrozenClock, target: str, post: str, state: PostCheck, tries: int, due_in: int
) -> PostCheckRow:
    return PostCheckRow(
        receipt=f"linkedin|weekly-update@2026-11-23T09:00|v1|publish:{target}-{post}",
        recipe="weekly-update",
        target=target,
        external_id=post,
        published_at=clock.now() - timedelta(hours=1),
        state=state,
        due_at=clock.now() - timedelta(seconds=due_in),
        tries=tries,
    )


def test_a_row_at_its_42nd_try_and_rows_that_raise_never_stop_the_pass(store: Store) -> None:
    clock = FrozenClock()
    first, later = StubReader("stub-a"), StubReader("stub-b")
    with store.transaction() as session:
        session.add(stub_row(clock, "stub-a", "post-busy", PostCheck.DUE, 42, 90))
        session.add(stub_row(clock, "stub-a", "post-bad", PostCheck.DUE, 0, 80))
        session.add(stub_row(clock, "stub-a", "post-count-bad", PostCheck.VERIFIED, 0, 70))
        session.add(stub_row(clock, "stub-a", "post-ok", PostCheck.DUE, 0, 60))
        session.add(stub_row(clock, "stub-a", "post-counted", PostCheck.VERIFIED, 0, 50))
        session.add(stub_row(clock, "stub-b", "post-later", PostCheck.DUE, 0, 10))
    done = PostReadings(
        store, make_config(), clock, "w1", lambda recipe: [first, later], lambda *_: False
    ).read_due()
    with store.read() as session:
        rows = {row.external_id: row for row in session.exec(select(PostCheckRow)).all()}
        counted = {r.receipt for r in session.exec(select(PostReadingRow)).all()}
    busy = rows["post-busy"]  # the 43rd read that cannot tell: an hour on, no overflow
    assert (busy.tries, busy.detail) == (43, "503 Service Unavailable")
    assert busy.due_at == clock.now() + post_checks.LAST_RETRY
    for bad in ("post-bad", "post-count-bad"):  # recorded on its row, read again later
        assert rows[bad].tries == 1 and "RuntimeError" in (rows[bad].detail or "")
        assert rows[bad].due_at is not None and rows[bad].due_at > clock.now()
    assert rows["post-ok"].state == PostCheck.VERIFIED
    assert rows["post-later"].state == PostCheck.VERIFIED  # a later target still read
    assert counted == {rows["post-counted"].receipt}
    assert done.failed == 1  # the adapter that raised; a counts read that raised cannot tell
    assert later.read == ["post-later"]


class BatchReader(StubReader):
    counts_per_request = 25  # every row of the target in one counts request


def test_a_row_whose_write_raises_fails_alone_and_its_batch_is_kept(store: Store) -> None:
    clock = FrozenClock()
    reader = BatchReader("stub-a")
    with store.transaction() as session:
        for n in range(3):
            session.add(stub_row(clock, "stub-a", f"post-{n}", PostCheck.VERIFIED, 0, 10 - n))
    writes: list[int] = []

    def second_write_raises() -> None:  # the second row: in the batch, then alone
        writes.append(1)
        if len(writes) in (2, 4):
            raise RuntimeError("the database tripped")

    readings = PostReadings(
        store, make_config(), clock, "w1", lambda recipe: [reader], lambda *_: False
    )
    with hook("reading_keep", second_write_raises):
        done = readings.read_due()
    with store.read() as session:
        rows = {row.external_id: row for row in session.exec(select(PostCheckRow)).all()}
        counted = {r.receipt for r in session.exec(select(PostReadingRow)).all()}
    assert (done.readings, done.failed) == (2, 1)
    failed = [row for row in rows.values() if row.receipt not in counted]
    [bad] = failed
    assert bad.tries == 1 and "RuntimeError" in (bad.detail or "")
    assert len(counted) == 2


def test_the_retry_delay_never_overflows_whatever_the_tries() -> None:
    assert post_checks.retry_delay(10**6) == post_checks.LAST_RETRY
    assert post_checks.retry_delay(3, asked=1e18) == post_checks.LONGEST_ASKED
