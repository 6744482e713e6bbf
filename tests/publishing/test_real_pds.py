"""Galley's Bluesky publishing against the reference PDS (docs/design.md §20): the server
Bluesky runs, started locally from npm (tests/harness/real_pds.py), not our fake.

Each test signs in as an account of its own and counts what the server holds with
`com.atproto.repo.listRecords`: one record per part, whatever was lost on the way.
Without the installed PDS (tests/harness/pds/install.sh) every test here is skipped.

The two thread tests (`test_real_pds_publishes_a_five_part_thread_once`,
`test_real_pds_a_thread_whose_apply_writes_answer_is_lost_is_published_once`) drive
Publication.replies through the PublishingService: they pass once Bluesky threads
(one `applyWrites`, issue 38) are merged from the branch that builds them.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from core.errors import EffectOutcomeUnknown
from core.identity import bluesky_record_key, publish_effect_key
from core.policies import PublishOutcome
from core.ports import PostQuery, Publication
from core.post_body import EVERY_TARGET, PostBody
from core.publishing.platforms.bluesky import BlueskyPublisher
from core.review.queue import edit
from core.setup.publish_targets import BlueskyTarget
from tests.harness.real_pds import Account, RealPds, assert_one_thread, real_pds, world_on
from tests.harness.worlds import KEY, RUN, MakeWorld, World

__all__ = ["real_pds"]  # the module's server, a fixture: used by every test below

CREATE = "com.atproto.repo.createRecord"
APPLY_WRITES = "com.atproto.repo.applyWrites"
TEXT = "Our week, in brief: https://example.com/week and more."
THREAD = tuple(
    f"Part {n} of 5: what we shipped, in order. https://example.com/{n}" for n in range(1, 6)
)
EDITOR, APPROVER = "U0EDITOR", "U0ADMIN"


@pytest.fixture
def account(real_pds: RealPds) -> Account:
    return real_pds.new_account()


def publisher(pds: RealPds, account: Account) -> BlueskyPublisher:
    target = BlueskyTarget(to="bluesky", handle=account.handle, service=pds.url)
    return BlueskyPublisher(
        target, timedelta(seconds=10), {"GALLEY_BLUESKY_PASSWORD": account.password}
    )


@pytest.fixture
def bluesky(real_pds: RealPds, account: Account) -> Iterator[BlueskyPublisher]:
    pub = publisher(real_pds, account)
    yield pub
    pub.close()


def publication(account: Account, text: str = TEXT) -> Publication:
    return Publication(
        effect_key=publish_effect_key(KEY, f"bluesky:{account.handle}"),
        draft_key=KEY,
        recipe="weekly-update",
        platform="bluesky",
        slot_at=datetime(2026, 11, 23, 9, 0, tzinfo=UTC),
        text=text,
        approver=EDITOR,
        approved_at=datetime(2026, 11, 23, 8, 30, tzinfo=UTC),
    )


# --- one post, straight through the publisher ---------------------------------------------


def test_real_pds_publishes_one_post_under_the_key_derived_from_the_effect_key(
    real_pds: RealPds, account: Account, bluesky: BlueskyPublisher
) -> None:
    pub = publication(account)
    uri = bluesky.publish(pub)

    rkey = bluesky_record_key(pub.effect_key)
    assert uri == f"at://{account.did}/app.bsky.feed.post/{rkey}"
    [record] = real_pds.records(account.did)
    assert record["uri"] == uri and record["value"]["text"] == TEXT
    [facet] = record["value"]["facets"]  # the link made clickable, at its byte offsets
    start, end = facet["index"]["byteStart"], facet["index"]["byteEnd"]
    assert TEXT.encode()[start:end] == b"https://example.com/week"
    assert bluesky.lookup(PostQuery(pub.effect_key, TEXT, pub.approved_at)) == uri


def test_real_pds_a_second_create_under_the_key_is_unknown_and_never_a_second_post(
    real_pds: RealPds, account: Account, bluesky: BlueskyPublisher
) -> None:
    uri = bluesky.publish(publication(account))
    with pytest.raises(EffectOutcomeUnknown):
        bluesky.publish(publication(account))
    assert [record["uri"] for record in real_pds.records(account.did)] == [uri]


def test_real_pds_a_lost_create_answer_is_unknown_and_the_lookup_finds_the_one_post(
    real_pds: RealPds, account: Account, bluesky: BlueskyPublisher
) -> None:
    bluesky.prove_credentials()  # signed in: the next call is the create
    real_pds.proxy.lose_answer(CREATE)
    pub = publication(account)
    with pytest.raises(EffectOutcomeUnknown):
        bluesky.publish(pub)
    [record] = real_pds.records(account.did)
    assert bluesky.lookup(PostQuery(pub.effect_key, TEXT, pub.approved_at)) == record["uri"]


# --- through the effect ledger: a world publishing to the real PDS -------------------------


# --- threads: Publication.replies through the PublishingService ----------------------------


def approved_thread(world: World, parts: tuple[str, ...]) -> None:
    """Draft, edit the draft into a thread for every target, approve that revision."""
    world.draft()
    text = PostBody({EVERY_TARGET: parts}).to_text()
    saved = edit(
        world.store,
        world.config,
        world.clock,
        draft_key=KEY,
        revision=1,
        text=text,
        user=EDITOR,
        permitted=True,
    )
    assert saved.accepted, saved
    assert world.approve(KEY, revision=2, user=APPROVER).accepted


def test_real_pds_publishes_a_five_part_thread_once(
    db_url: str, worlds: MakeWorld, real_pds: RealPds, account: Account
) -> None:
    world = world_on(worlds, db_url, real_pds, account)
    approved_thread(world, THREAD)
    assert world.service().publish_run(RUN).outcome == PublishOutcome.PUBLISHED
    assert_one_thread(real_pds.records(account.did), THREAD)


def test_real_pds_a_thread_whose_apply_writes_answer_is_lost_is_published_once(
    db_url: str, worlds: MakeWorld, real_pds: RealPds, account: Account
) -> None:
    world = world_on(worlds, db_url, real_pds, account)
    approved_thread(world, THREAD)
    real_pds.proxy.lose_answer(APPLY_WRITES)
    before = real_pds.proxy.calls(APPLY_WRITES)
    assert world.service().publish_run(RUN).outcome == PublishOutcome.UNCERTAIN
    assert real_pds.proxy.calls(APPLY_WRITES) - before == 1  # it reached the server

    world.clock.advance(timedelta(minutes=1))
    assert world.service().publish_run(RUN).outcome == PublishOutcome.PUBLISHED
    assert_one_thread(real_pds.records(account.did), THREAD)
