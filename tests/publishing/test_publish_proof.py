"""Every target exactly once when the text repeats, a target fails or the approval goes
stale halfway (docs/design.md §24: look-up proof, partial publication).

In process, over real HTTP: the real `Mastodon.py`, `atproto` and `httpx` clients against
the platforms' fakes. Each test asserts what the fakes hold and what the rows say, on
both backends.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
from sqlmodel import col, select

from core.drafting.revisions import keep_revisions
from core.errors import LookupUnavailable
from core.identity import publish_effect_key
from core.models import DraftRow, EffectRow, RunRow
from core.policies import FailReason, PublishOutcome, Refusal
from core.ports import PostQuery, Publication, Publisher
from core.publishing.lookup_proof import LOOKUP_SKEW, post_query
from core.publishing.platforms.mastodon import MastodonPublisher
from core.publishing.targets import found_at
from core.review.queue import edit
from core.review.redraft_claims import RedraftClaim
from core.scheduling.recipe_changes import RecipeChanges
from core.setup.config import parse_config
from core.setup.publish_targets import MastodonTarget
from core.states import DraftState, EffectState, RunState
from tests.fakes import social
from tests.fakes.linkedin import TOKEN as LINKEDIN_TOKEN
from tests.fakes.linkedin import FakeLinkedIn
from tests.fakes.mastodon import TOKEN, FakeMastodon
from tests.harness.two_platforms import BLUESKY, Platforms, world_of
from tests.harness.worlds import (
    KEY,
    RECIPE,
    RUN,
    MakeWorld,
    World,
    WrappedPublisher,
    galley_config,
)

NEXT_SLOT = "2026-11-30T09:00"
NEXT_RUN = f"{RECIPE}@{NEXT_SLOT}"
NEXT_KEY = f"linkedin|{NEXT_RUN}|v1"
ORGANIZATION = "urn:li:organization:5515715"
NEXT_VERSION = f"linkedin|{RUN}|v2"


HIRING = "We're hiring: come build Galley with us."


def draft_and_approve(world: World, slot: str, text: str = HIRING) -> str:
    """The slot drafted, its text edited to `text` (the post people repeat), approved."""
    result = world.galley.draft(RECIPE, slot)
    assert result.key is not None, result
    edited = edit(
        world.store,
        world.config,
        world.clock,
        draft_key=result.key,
        revision=1,
        text=text,
        user="U0EDITOR",
        permitted=True,
    )
    assert edited.accepted, edited
    assert world.approve(result.key, revision=2).accepted
    return result.key


# --- 1. a look-up never takes someone else's post as proof ---------------------------------


def test_a_recurring_text_on_mastodon_is_posted_for_each_slot_never_taken_twice(
    db_url: str, worlds: MakeWorld
) -> None:
    """Two slots carry the same text (a "We're hiring" post), sent a minute apart: the
    second slot's look-up finds the first slot's status, within its window but already
    that receipt's proof, and must post its own."""
    with FakeMastodon() as mastodon:
        world = worlds(
            db_url,
            publish=f'publish = {{ to = "mastodon", instance = "{mastodon.url}" }}',
            environ={"GALLEY_MASTODON_TOKEN": TOKEN},
        )
        world.clock.set(datetime.now(UTC))  # the fake's clock: both sends minutes apart
        draft_and_approve(world, "2026-11-23T09:00")
        assert world.service().publish_run(RUN).outcome == PublishOutcome.PUBLISHED
        world.clock.advance(timedelta(minutes=1))
        draft_and_approve(world, NEXT_SLOT)

        assert world.service().publish_run(NEXT_RUN).outcome == PublishOutcome.PUBLISHED

        assert len(mastodon.statuses_of()) == 2
        receipts = [r for r in world.publish_effects() if r.state == EffectState.SUCCEEDED]
        assert len({r.external_id for r in receipts}) == 2  # each slot its own status


def test_a_linkedin_duplicate_of_an_earlier_slots_post_fails_the_run_and_tells_people(
    db_url: str, worlds: MakeWorld
) -> None:
    with FakeLinkedIn() as linkedin:
        world = worlds(
            db_url,
            publish=(
                f'publish = {{ to = "linkedin", author = "{ORGANIZATION}", '
                f'api = "{linkedin.api}" }}'
            ),
            environ={"GALLEY_LINKEDIN_TOKEN": LINKEDIN_TOKEN},
        )
        world.clock.set(datetime.now(UTC))  # the fake's clock
        draft_and_approve(world, "2026-11-23T09:00")
        assert world.service().publish_run(RUN).outcome == PublishOutcome.PUBLISHED
        world.clock.advance(timedelta(minutes=1))
        draft_and_approve(world, NEXT_SLOT)

        result = world.service().publish_run(NEXT_RUN)

        assert result.outcome == PublishOutcome.FAILED  # not `succeeded` under last week's post
        assert world.run_row(NEXT_RUN).state == RunState.FAILED
        assert world.run_row(NEXT_RUN).reason == FailReason.PUBLISH_REJECTED
        assert "duplicate" in (result.detail or "")
        assert len(linkedin.posts_of(ORGANIZATION)) == 1
        assert world.alerts().sweep() == 1  # people are told about the slot


def test_a_look_up_compares_the_text_the_receipt_was_sent_with_and_starts_at_its_first_send(
    db_url: str, worlds: MakeWorld
) -> None:
    world = worlds(db_url)
    world.approved()
    world.clock.advance(timedelta(hours=3))  # the first send comes hours after the approval
    key = publish_effect_key(KEY, "webhook")
    assert world.service().publish_run(RUN).outcome == PublishOutcome.PUBLISHED
    sent = world.draft_row().text
    with world.store.transaction() as session:  # the text changed after the send, somehow
        draft = session.exec(select(DraftRow).where(col(DraftRow.key) == KEY)).one()
        keep_revisions(
            session, draft, new_text="A later text.", editor="U0EDITOR", at=draft.updated_at
        )
        draft.text, draft.revision = "A later text.", draft.revision + 1
        session.add(draft)
        receipt = session.get(EffectRow, key)
        assert receipt is not None
        first_send = receipt.created_at

    query = post_query(world.store, key, PostQuery(key, "fallback", world.clock.now()))

    assert query.text == sent
    assert query.since == first_send - LOOKUP_SKEW
    assert not query.taken(receipt.external_id or "")  # its own proof is not another's


# --- 2. a partly published draft cannot be wedged ------------------------------------------


def stale_after_bluesky(world: World, platforms: Platforms) -> None:
    """Bluesky published, Mastodon waits out a 503, then the approval goes stale: the draft
    is back for review with Bluesky's post out."""
    world.approved()
    platforms.mastodon.script("create", social.status(503))
    assert world.service().publish_run(RUN).outcome == PublishOutcome.WAITING
    world.clock.advance(world.recipe.approval_ttl + timedelta(minutes=1))
    assert world.service().publish_run(RUN).outcome == PublishOutcome.SENT_BACK
    assert world.draft_row().state == DraftState.READY
    assert platforms.posts() == (1, 0)


def test_a_partly_published_draft_keeps_its_text_and_publishes_the_rest_once_reapproved(
    db_url: str, worlds: MakeWorld, platforms: Platforms
) -> None:
    world = world_of(worlds, db_url, platforms)
    stale_after_bluesky(world, platforms)
    revision = world.draft_row().revision

    edited = edit(
        world.store,
        world.config,
        world.clock,
        draft_key=KEY,
        revision=revision,
        text="Another text.",
        user="U0EDITOR",
        permitted=True,
    )
    redraft = world.core.redrafting.ask(
        draft_key=KEY, revision=revision, note="shorter", user="U0EDITOR", permitted=True
    )

    assert not edited.accepted and edited.refusal == Refusal.TEXT_FROZEN
    assert BLUESKY in edited.message and "cancel" in edited.message
    assert not isinstance(redraft, RedraftClaim) and redraft.refusal == Refusal.TEXT_FROZEN
    RecipeChanges(world.store, world.config, world.clock).bump(RECIPE, actor="U0ADMIN")
    assert world.draft_row().state == DraftState.READY  # a bump would post to Bluesky again

    assert world.approve(KEY, revision=revision).accepted  # the same text, approved again
    assert world.service().publish_run(RUN).outcome == PublishOutcome.PUBLISHED
    assert platforms.posts() == (1, 1)
    assert platforms.creates() == (1, 2)
    assert world.run_row().state == RunState.SUCCEEDED


# --- 3. a retry after a partial failure reaches the failed target --------------------------


def uncertain_and_refused(worlds: MakeWorld, db_url: str, platforms: Platforms) -> World:
    """Bluesky's answer lost (its post is out), Mastodon's token refused: the run fails."""
    world = world_of(worlds, db_url, platforms)
    world.approved()
    platforms.bluesky.script("create", social.accept_then_drop())
    invalid = {"error": "The access token is invalid"}
    platforms.mastodon.script("create", social.status(401, invalid))
    assert world.service().publish_run(RUN).outcome == PublishOutcome.FAILED
    assert world.run_row().reason == FailReason.PUBLISH_AUTH
    return world


def test_a_retry_after_an_uncertain_target_and_a_refused_one_reaches_the_refused_one(
    db_url: str, worlds: MakeWorld, platforms: Platforms
) -> None:
    world = uncertain_and_refused(worlds, db_url, platforms)

    world.clock.advance(timedelta(minutes=1))
    world.service().publish_pending()  # the orphan pass finds Bluesky's post
    bluesky = world.effect(publish_effect_key(KEY, BLUESKY))
    assert bluesky is not None and bluesky.state == EffectState.SUCCEEDED
    assert world.draft_row().state == DraftState.APPROVED  # Mastodon has no post yet

    answer = world.resolver().retry(RUN, actor="U0ADMIN")  # the token is fixed
    assert "published once more" in answer
    assert world.service().publish_run(RUN).outcome == PublishOutcome.PUBLISHED
    assert platforms.posts() == (1, 1)
    assert world.draft_row().state == DraftState.PUBLISHED
    assert world.run_row().state == RunState.SUCCEEDED


def test_a_retry_before_the_uncertain_target_is_settled_reconciles_it_and_sends_the_other(
    db_url: str, worlds: MakeWorld, platforms: Platforms
) -> None:
    world = uncertain_and_refused(worlds, db_url, platforms)

    answer = world.resolver().retry(RUN, actor="U0ADMIN")  # Bluesky still uncertain
    assert "published once more" in answer
    world.clock.advance(timedelta(minutes=1))
    assert world.service().publish_run(RUN).outcome == PublishOutcome.PUBLISHED
    assert platforms.posts() == (1, 1)
    assert platforms.creates() == (1, 2)  # Bluesky looked up by its key, never sent again


def test_found_at_never_takes_a_post_already_proof_of_another_receipt() -> None:
    class Answers:
        target = "mastodon:m.test"

        def lookup(self, query: PostQuery) -> str | None:
            return "111"

        def link(self, external_id: str) -> str | None:
            return None

    query = PostQuery("k|publish:mastodon:m.test", "text", datetime.now(UTC))
    assert found_at(Answers(), query) is not None  # type: ignore[arg-type]
    taken = PostQuery(query.effect_key, query.text, query.since, taken=lambda found: True)
    with pytest.raises(LookupUnavailable, match="already the proof of another"):
        found_at(Answers(), taken)  # type: ignore[arg-type]


@pytest.mark.slow
def test_the_mastodon_look_up_skips_a_status_already_proof_of_another_receipt() -> None:
    with FakeMastodon() as mastodon:
        target = MastodonTarget(to="mastodon", instance=mastodon.url)
        publisher = MastodonPublisher(
            target, timedelta(seconds=5), {"GALLEY_MASTODON_TOKEN": TOKEN}
        )
        since = datetime.now(UTC) - timedelta(minutes=1)
        ids = [publisher.publish(_publication(f"k{n}|publish:{target.target}")) for n in (1, 2)]
        query = PostQuery(f"k2|publish:{target.target}", HIRING, since)
        newest_first = sorted(ids, key=int, reverse=True)
        assert publisher.lookup(query) == newest_first[0]
        skip_newest = PostQuery(
            query.effect_key, HIRING, since, taken={newest_first[0]}.__contains__
        )
        assert publisher.lookup(skip_newest) == newest_first[1]  # read on past the taken one
        none_left = PostQuery(query.effect_key, HIRING, since, taken=set(ids).__contains__)
        assert publisher.lookup(none_left) is None


def _publication(effect_key: str) -> Publication:
    now = datetime.now(UTC)
    return Publication(
        effect_key=effect_key,
        draft_key=effect_key.partition("|publish:")[0],
        recipe=RECIPE,
        platform="mastodon",
        slot_at=now,
        text=HIRING,
        approver="U0EDITOR",
        approved_at=now,
    )


# --- 9. the publish fence: the run still publishes this approved draft ---------------------


class ChangedDuringLookup(WrappedPublisher):
    """The webhook's publisher, with rows changed while its look-up runs: what another
    worker or a person may do between the publish start and the fence."""

    def __init__(self, inner: Publisher, change: Callable[[], None]) -> None:
        super().__init__(inner)
        self.change = change

    def lookup(self, query: PostQuery) -> str | None:
        self.change()
        return self.inner.lookup(query)


@pytest.mark.parametrize("change", ["run_moved_to_another_draft", "draft_superseded"])
def test_the_fence_sends_nothing_once_the_run_no_longer_publishes_this_approved_draft(
    db_url: str, worlds: MakeWorld, change: str
) -> None:
    world = worlds(db_url)
    world.approved()

    def meanwhile() -> None:
        with world.store.transaction() as session:
            if change == "run_moved_to_another_draft":  # a manual run drafted v2, approved
                run = session.exec(select(RunRow).where(col(RunRow.id) == RUN)).one()
                run.draft_key = NEXT_VERSION
                session.add(run)
            else:
                draft = session.exec(select(DraftRow).where(col(DraftRow.key) == KEY)).one()
                draft.state = DraftState.SUPERSEDED
                session.add(draft)

    publisher = ChangedDuringLookup(world.publisher(world.recipe), meanwhile)
    world.service(publisher=publisher).publish_run(RUN)

    assert world.posts() == 0  # nothing sent for a draft its run no longer publishes
    receipt = world.effect()
    assert receipt is not None and receipt.state == EffectState.FAILED
    assert "no longer publishes it" in (receipt.detail or "")


# --- 10. a target's id changed in the config mid-publication -------------------------------


def test_a_target_renamed_mid_publication_is_not_sent_again_under_its_new_id(
    db_url: str, worlds: MakeWorld, platforms: Platforms
) -> None:
    world = world_of(worlds, db_url, platforms)
    world.approved()
    platforms.bluesky.script("create", social.status(503))
    assert world.service().publish_run(RUN).outcome == PublishOutcome.WAITING
    assert platforms.posts() == (0, 1)  # Mastodon has it, Bluesky waits

    # The operator rewrites the instance's URL (the same server, the same account).
    renamed = platforms.publish.replace("http://127.0.0.1:", "http://localhost:")
    assert renamed != platforms.publish
    world.config = parse_config(galley_config(renamed))
    world.clock.advance(timedelta(minutes=1))
    result = world.service().publish_run(RUN)

    assert result.outcome == PublishOutcome.FAILED
    assert result.detail is not None and platforms.mastodon_target in result.detail
    assert platforms.posts() == (1, 1)  # Bluesky went; Mastodon was not posted twice
    assert world.run_row().state == RunState.FAILED
