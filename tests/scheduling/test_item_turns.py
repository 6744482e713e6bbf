"""Items keep their turn (docs/design.md §29), on SQLite and PostgreSQL: a failed item run a
person retries while the queue is full waits and is drafted by a later poll, the retry
naming them in the decision log; a renamed source's next poll is no first poll, so an item
recorded new is never skipped as backfill; an item run given back by the sweeper, or met
by a closed gate at `resume`, is drafted whatever its age. Final state only: rows, the
decision log and the model's calls."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest
from sqlmodel import select

from core.api.decisions import read_decisions
from core.api.services import Services
from core.drafting.sweeper import sweep_expired_claims
from core.drafting_policies import AttemptOutcome, DraftOutcome
from core.errors import ModelCallFailed
from core.failpoints import Failpoint, hook
from core.identity import item_run_id, item_token
from core.models import DraftRow, RecipeRow
from core.policies import DecisionKind, PendingReason, SkipReason
from core.port_values import DraftRequest, ModelReply
from core.scheduling.dispatch import SlotDispatcher
from core.setup.config import Recipe
from core.slots.schedule import latest_slot_at_or_before
from core.states import DraftState, RunState
from core.store.engine import Store
from core.testing import FrozenClock
from tests.scheduling.test_items import (
    T0,
    Crash,
    FeedStub,
    Poller,
    entry,
    feed_of,
    items_config,
    items_recipe,
    make_poller,
    of_state,
    runs,
)

RECIPE = "weekly-update"


def run_of(n: int) -> str:
    return item_run_id(RECIPE, item_token(entry(n).item_id))


def state_of(store: Store, run_id: str) -> tuple[RunState, str | None]:
    [run] = [r for r in runs(store) if r.id == run_id]
    return run.state, run.reason


def reject_ready(store: Store) -> None:
    """A reviewer decides the waiting draft: room in the queue for one more."""
    with store.transaction() as session:
        for draft in session.exec(select(DraftRow).where(DraftRow.state == DraftState.READY)):
            draft.state = DraftState.REJECTED
            session.add(draft)


class FailsFirst:
    """The model refuses Galley's credentials at the first call (the run fails before it
    has a draft), and answers every other call."""

    def __init__(self) -> None:
        self.calls = 0

    def draft(self, request: DraftRequest) -> ModelReply:
        self.calls += 1
        if self.calls == 1:
            raise ModelCallFailed(AttemptOutcome.AUTH, "401 from the API")
        return ModelReply(f"draft {self.calls}", request.model, "req", "end_turn", 10, 20, 0, 0)


def items_services(store: Store, feed: FeedStub, pending_limit: int) -> Services:
    services = Services(
        items_config(pending_limit=pending_limit),
        store,
        drafter=FailsFirst(),  # type: ignore[arg-type]
        clock=FrozenClock(T0),
    )
    services.items.reader = feed.read
    return services


def poll(services: Services) -> None:
    recipe = services.recipe(RECIPE)
    services.clock.advance(timedelta(minutes=5))
    slot = latest_slot_at_or_before(recipe, services.clock.now())
    assert slot is not None
    services.items.poll(recipe, slot)


def failed_item_run(store: Store, pending_limit: int) -> tuple[Services, FeedStub]:
    """Item 2's run failed while drafting; item 3 was drafted after it and waits."""
    feed = FeedStub(feed_of(1))
    services = items_services(store, feed, pending_limit)
    poll(services)  # the first poll: item 1 is backfill
    feed.entries = feed_of(1, 2, 3)
    poll(services)
    assert state_of(store, run_of(2))[0] == RunState.FAILED
    assert state_of(store, run_of(3))[0] == RunState.AWAITING_REVIEW
    return services, feed


def test_a_failed_item_run_retried_while_the_queue_is_full_is_drafted_by_a_later_poll(
    store: Store,
) -> None:
    services, _feed = failed_item_run(store, pending_limit=1)

    result = services.retry(run_of(2), actor="U0ADMIN")

    assert not isinstance(result, str) and result.outcome == DraftOutcome.QUEUED
    assert state_of(store, run_of(2)) == (RunState.PENDING, PendingReason.ITEM_WAITS)
    reject_ready(store)
    poll(services)
    assert state_of(store, run_of(2))[0] == RunState.AWAITING_REVIEW
    assert services.drafting.drafter.calls == 3


def test_a_persons_retry_of_a_run_that_failed_while_drafting_is_in_the_decision_log(
    store: Store,
) -> None:
    services, _feed = failed_item_run(store, pending_limit=5)

    result = services.retry(run_of(2), actor="U0ADMIN")

    assert not isinstance(result, str) and result.outcome == DraftOutcome.DRAFTED
    with store.read() as session:
        logged = read_decisions(session, services.config)
    [retry] = [d for d in logged if d.run_id == run_of(2)]
    assert (retry.decision, retry.who, retry.outcome) == (
        DecisionKind.RESOLUTION,
        "U0ADMIN",
        "retried",
    )
    assert {d.who for d in logged} == {"U0ADMIN"}  # no pass's or worker's act among them


def renamed(recipe: Recipe, name: str) -> Recipe:
    source = recipe.sources[0].model_copy(update={"name": name})
    return recipe.model_copy(update={"sources": (source,)})


def test_a_renamed_sources_next_poll_keeps_its_waiting_items_and_drafts_new_ones(
    store: Store,
) -> None:
    feed = FeedStub(feed_of(1))
    p = make_poller(store, feed)
    tight = items_recipe(pending_limit=1)
    p.poll(tight)
    feed.entries = feed_of(1, 2, 3)
    p.clock.advance(timedelta(minutes=5))
    p.poll(tight)  # item 2 drafted, item 3 waits for room
    assert state_of(store, run_of(3)) == (RunState.PENDING, PendingReason.ITEM_WAITS)
    feed.entries = [replace(item, source="news") for item in feed_of(1, 2, 3, 4)]
    p.clock.advance(timedelta(minutes=5))

    p.poll(renamed(tight, "news"))  # a `name` given: a new label for the same feed

    assert state_of(store, run_of(3)) == (RunState.PENDING, PendingReason.ITEM_WAITS)
    assert state_of(store, run_of(4)) == (RunState.PENDING, PendingReason.ITEM_WAITS)
    assert len(runs(store)) == 4
    reject_ready(store)
    p.clock.advance(timedelta(minutes=5))
    p.poll(renamed(tight, "news"))
    assert state_of(store, run_of(3))[0] == RunState.AWAITING_REVIEW
    assert p.drafter.calls == 2


def given_back_item_run(store: Store, item_ttl: str) -> tuple[Poller, Recipe]:
    """Item 2's claim was taken by a worker that died; the sweeper gave it back, far past
    `item_ttl`."""
    feed = FeedStub(feed_of(1))
    p = make_poller(store, feed)
    recipe = items_recipe(item_ttl=item_ttl)
    p.poll(recipe)
    feed.entries = feed_of(1, 2)
    p.clock.advance(timedelta(minutes=5))

    def crash() -> None:
        raise Crash

    with hook(Failpoint.AFTER_CLAIM_COMMIT, crash), pytest.raises(Crash):
        p.poll(recipe)
    p.clock.advance(timedelta(hours=3))
    assert sweep_expired_claims(store, p.clock)
    assert state_of(store, run_of(2)) == (RunState.PENDING, PendingReason.CLAIM_EXPIRED)
    return p, recipe


def test_an_item_run_given_back_by_the_sweeper_is_drafted_by_a_poll_past_item_ttl(
    store: Store,
) -> None:
    p, recipe = given_back_item_run(store, item_ttl='"2h"')

    p.poll(recipe)

    assert state_of(store, run_of(2))[0] == RunState.AWAITING_REVIEW
    assert p.drafter.calls == 1
    assert not [r for r in runs(store) if r.reason == SkipReason.STALE_ITEM]


def test_an_item_run_resume_finds_behind_a_closed_gate_is_drafted_whatever_its_age(
    store: Store,
) -> None:
    p, recipe = given_back_item_run(store, item_ttl='"2h"')
    set_paused(store, True)
    dispatcher = SlotDispatcher(store, p.poller.drafting, p.clock, recipes={RECIPE: recipe})
    queued = dispatcher.resume(run_of(2))
    assert queued is not None and queued.outcome == DraftOutcome.QUEUED
    set_paused(store, False)
    p.clock.advance(timedelta(days=1))

    p.poll(recipe)

    assert state_of(store, run_of(2))[0] == RunState.AWAITING_REVIEW
    assert not of_state(store, RunState.SKIPPED)[1:]  # item 1's backfill only


def set_paused(store: Store, paused: bool) -> None:
    with store.transaction() as session:
        row = session.get(RecipeRow, RECIPE)
        assert row is not None
        row.paused = paused
        session.add(row)


def test_an_entry_not_drafted_as_a_re_issue_is_said_by_the_poll_and_by_status(
    store: Store,
) -> None:
    """A daily report linking one page under one title: each new id is a re-issue of the
    first, never drafted; the poll's report says so, and `galley status` keeps saying it
    after later polls find nothing new."""
    from core.api.status_read import read_status

    feed = FeedStub([])
    p = make_poller(store, feed)
    recipe = items_recipe()
    p.poll(recipe)
    feed.entries = [entry(5, guid="report-1", title="Daily report")]
    p.clock.advance(timedelta(minutes=5))
    p.poll(recipe)  # the first report: drafted
    feed.entries = [entry(5, guid="report-2", title="Daily report"), *feed.entries]
    p.clock.advance(timedelta(days=1))
    slot = latest_slot_at_or_before(recipe, p.clock.now())
    assert slot is not None

    said = p.poller.poll(recipe, slot).describe()
    p.clock.advance(timedelta(minutes=5))
    p.poll(recipe)  # nothing new

    assert "1 not drafted as re-issues" in said
    with store.engine.connect() as connection:
        status = read_status(connection, items_config(), p.clock.now())
    [shown] = [r.last_poll for r in status.recipes if r.name == RECIPE]
    assert shown is not None and "not drafted" in shown
    assert "Daily report <https://blog.example.com/post-5>" in shown
    assert p.drafter.calls == 1 and len(runs(store)) == 1


def test_the_stale_skip_looks_again_with_the_run_locked(store: Store) -> None:
    """The poll read the run as never claimed; by the time it locks the run to skip it, a
    claim took it and the sweeper gave it back: the locked look sees it had its turn."""
    p, recipe = given_back_item_run(store, item_ttl='"2h"')

    result = p.poller._skip_stale(recipe, run_of(2))  # as read before the claim

    assert result.outcome == DraftOutcome.QUEUED
    assert state_of(store, run_of(2)) == (RunState.PENDING, PendingReason.CLAIM_EXPIRED)


def test_a_replacing_source_whose_ids_match_the_old_ones_backfills_and_skips_no_waiting_run(
    store: Store,
) -> None:
    """Another repository's `pull:3` is not the first's: told apart by its title, the new
    source's first poll backfills what it has, and the first source's item 3, waiting
    under the same run id, is left waiting (backfill skips only a run its poll opened)."""
    feed = FeedStub(feed_of(1))
    p = make_poller(store, feed)
    tight = items_recipe(pending_limit=1)
    p.poll(tight)
    feed.entries = feed_of(1, 2, 3)
    p.clock.advance(timedelta(minutes=5))
    p.poll(tight)  # item 2 drafted, item 3 waits for room
    same_id = replace(entry(3), source="other", title="Another project's third")
    fresh = replace(entry(8), source="other")
    feed.entries = [fresh, same_id]
    p.clock.advance(timedelta(minutes=5))

    p.poll(renamed(tight, "other"))

    assert state_of(store, run_of(3)) == (RunState.PENDING, PendingReason.ITEM_WAITS)
    assert state_of(store, run_of(8)) == (RunState.SKIPPED, SkipReason.BACKFILL)
    assert p.drafter.calls == 1
