"""Claims, leases, takeover and the sweeper, on SQLite and PostgreSQL (docs/design.md §4, §5)."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import pytest
from sqlmodel import col, select

from core.api.services import Services
from core.drafting.claims import Claim, DraftResult, claim_slot, renew_lease
from core.drafting.service import DraftingService
from core.drafting.sweeper import sweep_expired_claims
from core.drafting_policies import AttemptOutcome, DraftOutcome
from core.failpoints import Failpoint, hook
from core.models import AttemptRow, DraftRow, EventRow, RunRow
from core.setup.config import Recipe
from core.slots.schedule import Slot
from core.states import DraftState, RunState
from core.store.engine import Store
from core.store.leases import Heartbeat
from core.testing import FrozenClock, InstantDrafter
from tests.conftest import make_config
from tests.harness.races import skip_on_sqlite

SLOT_WALL = "2026-11-23T09:00"


def recipe_and_slot(store: Store) -> tuple[Services, Recipe, Slot]:
    galley = Services(make_config(claim_lease="10m"), store)
    recipe = galley.recipe("weekly-update")
    return galley, recipe, galley.resolve_slot(recipe, SLOT_WALL)


def claim(store: Store, recipe: Recipe, slot: Slot, worker: str, clock: FrozenClock) -> Claim:
    claimed = claim_slot(store, recipe, slot, worker=worker, actor=worker, manual=True, clock=clock)
    assert isinstance(claimed, Claim), claimed
    return claimed


def draft_rows(store: Store) -> list[DraftRow]:
    with store.transaction() as session:
        return list(session.exec(select(DraftRow)).all())


def test_the_loser_of_a_claim_never_calls_the_model(store: Store) -> None:
    _, recipe, slot = recipe_and_slot(store)
    clock = FrozenClock()
    claim(store, recipe, slot, "worker-a", clock)
    drafter = InstantDrafter()
    loser = DraftingService(store, drafter, clock=clock, worker="worker-b")

    result = loser.draft_slot(recipe, slot)

    assert result.outcome == DraftOutcome.IN_PROGRESS
    assert drafter.calls == 0


def test_an_expired_claim_is_taken_over_and_the_dead_attempt_marked_abandoned(
    store: Store,
) -> None:
    _, recipe, slot = recipe_and_slot(store)
    clock = FrozenClock()
    dead = claim(store, recipe, slot, "worker-dead", clock)
    DraftingService(store, InstantDrafter(), clock=clock, worker="worker-dead")._begin_attempt(
        recipe, dead
    )
    clock.advance(recipe.takeover_after + timedelta(seconds=1))
    drafter = InstantDrafter()

    result = DraftingService(store, drafter, clock=clock, worker="worker-b").draft_slot(
        recipe, slot
    )

    assert result.outcome == DraftOutcome.DRAFTED
    assert drafter.calls == 1
    with store.transaction() as session:
        ledger = session.exec(select(AttemptRow).order_by(col(AttemptRow.number))).all()
        assert [(a.worker.split("/")[0], a.outcome) for a in ledger] == [
            ("worker-dead", AttemptOutcome.ABANDONED),
            ("worker-b", AttemptOutcome.OK),
        ]
    [draft] = draft_rows(store)
    assert draft.state == DraftState.READY


def test_a_worker_whose_claim_was_taken_over_between_attempts_makes_no_further_call(
    store: Store,
) -> None:
    """The holder's first call failed and it waited its backoff past the lease; another
    worker took the claim over meanwhile. Its next attempt is refused before the call."""
    _, recipe, slot = recipe_and_slot(store)
    clock = FrozenClock()
    slow = claim(store, recipe, slot, "worker-slow", clock)
    clock.advance(recipe.takeover_after + timedelta(seconds=1))
    taken = claim(store, recipe, slot, "worker-b", clock)
    assert taken.took_over
    drafter = InstantDrafter()

    result = DraftingService(store, drafter, clock=clock, worker="worker-slow").draft_claimed(
        recipe, slot, slow
    )

    assert result.outcome == DraftOutcome.IN_PROGRESS
    assert drafter.calls == 0
    with store.transaction() as session:
        assert session.exec(select(AttemptRow)).all() == []
    [draft] = draft_rows(store)
    assert (draft.state, draft.claimed_by) == (DraftState.CLAIMED, taken.owner)


def test_a_worker_whose_lease_lapsed_makes_no_call_even_before_a_take_over(
    store: Store,
) -> None:
    """The holder stalled past its lease and nobody has taken the claim yet: its next
    attempt is refused all the same (the one fence: owner and unexpired lease), so a
    taker arriving now never pays for a call the stalled holder is also paying for."""
    _, recipe, slot = recipe_and_slot(store)
    clock = FrozenClock()
    stalled = claim(store, recipe, slot, "worker-stalled", clock)
    clock.advance(recipe.takeover_after + timedelta(seconds=1))
    drafter = InstantDrafter()

    result = DraftingService(store, drafter, clock=clock, worker="worker-stalled").draft_claimed(
        recipe, slot, stalled
    )

    assert result.outcome == DraftOutcome.IN_PROGRESS
    assert drafter.calls == 0
    with store.transaction() as session:
        assert session.exec(select(AttemptRow)).all() == []
    [draft] = draft_rows(store)
    assert (draft.state, draft.claimed_by) == (DraftState.CLAIMED, stalled.owner)


def test_a_zombie_worker_cannot_store_after_its_claim_was_taken(store: Store) -> None:
    _, recipe, slot = recipe_and_slot(store)
    clock = FrozenClock()
    release = threading.Event()
    zombie = DraftingService(store, InstantDrafter(release=release), clock=clock, worker="zombie")
    results: list[DraftResult] = []
    thread = threading.Thread(target=lambda: results.append(zombie.draft_slot(recipe, slot)))
    thread.start()
    _wait_for(lambda: _attempt_count(store) == 1)
    clock.advance(recipe.takeover_after + timedelta(seconds=1))  # the zombie's lease runs out
    winner = DraftingService(store, InstantDrafter(), clock=clock, worker="winner")
    assert winner.draft_slot(recipe, slot).outcome == DraftOutcome.DRAFTED

    release.set()
    thread.join()

    assert results[0].outcome == DraftOutcome.IN_PROGRESS  # the zombie learnt it lost
    [draft] = draft_rows(store)
    assert (draft.state, draft.revision) == (DraftState.READY, 1)


def test_a_live_worker_keeps_its_claim_by_heartbeat(store: Store) -> None:
    _, recipe, slot = recipe_and_slot(store)
    lease = timedelta(seconds=0.6)
    recipe = recipe.model_copy(update={"takeover_after": lease})  # the claim itself is short
    real_clock = Services(make_config(), store).clock
    held = claim_slot(store, recipe, slot, worker="a", actor="a", manual=True, clock=real_clock)
    assert isinstance(held, Claim)

    def renew() -> bool:
        return renew_lease(store, held, lease, real_clock)

    with Heartbeat(renew, lease / 3, "test") as beat:
        time.sleep(1.5)  # two and a half leases: only the heartbeat keeps the claim alive
        rival = claim_slot(
            store, recipe, slot, worker="b", actor="b", manual=True, clock=real_clock
        )

    assert not beat.lost.is_set()
    assert isinstance(rival, DraftResult) and rival.outcome == DraftOutcome.IN_PROGRESS
    [draft] = draft_rows(store)
    assert draft.claimed_by == held.owner and held.owner.startswith("a/")


def test_two_claims_of_one_worker_name_have_different_owners(store: Store) -> None:
    """Threads of one process share a worker name; their claims must not pass for each
    other, so every claim gets an owner token of its own."""
    galley, recipe, _ = recipe_and_slot(store)
    clock = FrozenClock()
    first = claim(store, recipe, galley.resolve_slot(recipe, "2026-11-16T09:00"), "w", clock)
    second = claim(store, recipe, galley.resolve_slot(recipe, SLOT_WALL), "w", clock)

    assert first.owner != second.owner
    assert renew_lease(store, first, timedelta(minutes=1), clock)
    stolen = Claim(second.run_id, second.draft_key, second.version, first.owner, False)
    assert not renew_lease(store, stolen, timedelta(minutes=1), clock)


def test_the_sweeper_returns_expired_claims_to_the_pool(store: Store) -> None:
    _, recipe, slot = recipe_and_slot(store)
    clock = FrozenClock()
    claim(store, recipe, slot, "worker-dead", clock)
    assert sweep_expired_claims(store, clock) == []  # a live claim is left alone

    clock.advance(recipe.takeover_after + timedelta(seconds=1))
    swept = sweep_expired_claims(store, clock)

    assert swept == ["linkedin|weekly-update@2026-11-23T09:00|v1"]
    assert draft_rows(store) == []
    with store.transaction() as session:
        run = session.exec(select(RunRow)).one()
        assert run.state == RunState.PENDING
    drafter = InstantDrafter()
    again = DraftingService(store, drafter, clock=clock, worker="b").draft_slot(recipe, slot)
    assert again.outcome == DraftOutcome.DRAFTED and drafter.calls == 1


def test_the_sweeper_takes_only_the_lapsed_claim_of_two(store: Store) -> None:
    galley, recipe, slot = recipe_and_slot(store)
    clock = FrozenClock()
    lapsed = claim(store, recipe, slot, "worker-dead", clock)
    clock.advance(recipe.takeover_after + timedelta(seconds=1))
    live = claim(store, recipe, galley.resolve_slot(recipe, "2026-11-30T09:00"), "w-live", clock)

    swept = sweep_expired_claims(store, clock)

    assert swept == [lapsed.draft_key]
    [draft] = draft_rows(store)
    assert (draft.key, draft.state, draft.claimed_by) == (
        live.draft_key,
        DraftState.CLAIMED,
        live.owner,
    )


def test_the_sweeper_leaves_a_claim_renewed_after_it_read_the_claim_as_lapsed(
    store: Store, db_url: str
) -> None:
    """A late heartbeat lands between the sweeper's read and its delete: the delete names
    the expiry it read, so the renewed claim stays its holder's and its run keeps running."""
    skip_on_sqlite(db_url)
    _, recipe, slot = recipe_and_slot(store)
    clock = FrozenClock()
    held = claim(store, recipe, slot, "worker-slow", clock)
    clock.advance(recipe.takeover_after + timedelta(seconds=1))

    def heartbeat_meanwhile() -> None:
        assert renew_lease(store, held, recipe.takeover_after, clock)

    with hook(Failpoint.SWEEPER_AFTER_READ, heartbeat_meanwhile):
        swept = sweep_expired_claims(store, clock)

    assert swept == []
    [draft] = draft_rows(store)
    assert (draft.state, draft.claimed_by) == (DraftState.CLAIMED, held.owner)
    with store.read() as session:
        assert session.exec(select(RunRow)).one().state == RunState.RUNNING


def test_every_run_transition_writes_an_event(store: Store) -> None:
    _, recipe, slot = recipe_and_slot(store)
    DraftingService(store, InstantDrafter(), clock=FrozenClock(), worker="w").draft_slot(
        recipe, slot
    )

    with store.transaction() as session:
        events = session.exec(
            select(EventRow).where(col(EventRow.subject) == "run").order_by(col(EventRow.id))
        ).all()
    assert [(e.from_state, e.to_state) for e in events] == [
        (None, RunState.PENDING),
        (RunState.PENDING, RunState.RUNNING),
        (RunState.RUNNING, RunState.AWAITING_REVIEW),
    ]
    assert {e.actor.split("/")[0] for e in events} == {"w"}


def _attempt_count(store: Store) -> int:
    with store.transaction() as session:
        return len(session.exec(select(AttemptRow)).all())


def _wait_for(condition: object, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if callable(condition) and condition():
            return
        time.sleep(0.02)
    pytest.fail("condition not reached in time")
