"""No publication without the receipt in hand, and one clock for every lease.

Each test forces the interleaving that used to publish twice or lose a step: a holder
whose look-up outlasted its lease, replicas whose clocks drift, a renewal that waited
for SQLite's lock, a person's request found by the sweeper, a cancel during review or
during drafting, a refused publication retried once fixed. They count what the fakes
received and read rows, on both backends unless SQLite makes the case impossible.
"""

from __future__ import annotations

import sqlite3
import threading
from datetime import timedelta

import pytest
from sqlmodel import col, select

from core.api.services import Services
from core.drafting.claims import Claim, claim_slot, renew_lease
from core.drafting.gate import tokens_today
from core.drafting.service import DraftingService
from core.drafting.sweeper import sweep_expired_claims
from core.drafting_policies import DraftOutcome
from core.models import AttemptRow, DraftRow
from core.policies import EffectDecision, PublishOutcome, Refusal, Verdict
from core.ports import PostQuery, Publisher, SystemClock
from core.review.queue import decide
from core.scheduling.dispatch import SlotDispatcher
from core.states import DraftState, RunState
from core.store.effects import EffectLedger
from core.store.engine import Store
from core.store.leases import database_now
from core.store.receipts import EffectSpec
from core.testing import FrozenClock, InstantDrafter, SkewedClock
from tests.conftest import make_config
from tests.fakes.webhook import status
from tests.harness.worlds import KEY, RECIPE, RUN, HeldPublisher, MakeWorld, WrappedPublisher

OLD_SLOT = "2026-11-23T09:00"  # a week before the frozen clock: far past misfire_grace


class BlockingLookup(WrappedPublisher):
    """A destination whose first look-up blocks until released (a long history search)."""

    def __init__(self, inner: Publisher) -> None:
        super().__init__(inner)
        self.looking, self.release = threading.Event(), threading.Event()
        self._first = True

    def lookup(self, query: PostQuery) -> str | None:
        if self._first:
            self._first = False
            self.looking.set()
            self.release.wait(20)
        return self.inner.lookup(query)


# --- 1. the fenced send -------------------------------------------------------------------


def test_a_holder_whose_lookup_outlasted_its_lease_sends_nothing(
    worlds: MakeWorld, db_url: str
) -> None:
    """A's look-up stalls past its lease (its heartbeat stalled too); B takes the receipt
    over, finds nothing and sends. A's look-up then answers "absent" while B's run is
    still publishing: the fence finds the receipt is B's, and A sends nothing."""
    w = worlds(db_url)
    w.approved()
    slow = BlockingLookup(w.publisher(w.recipe))
    stalled = EffectLedger(w.store, w.clock, "w1", heartbeat=timedelta(minutes=5))
    a_result: list[PublishOutcome] = []
    a = threading.Thread(
        target=lambda: a_result.append(
            w.service("w1", publisher=slow, ledger=stalled).publish_run(RUN).outcome
        )
    )
    a.start()
    assert slow.looking.wait(10)

    w.clock.advance(w.recipe.call_timeout * 5 + timedelta(seconds=1))  # lease + on the wire
    b_sends = threading.Event()
    held = HeldPublisher(w.publisher(w.recipe), b_sends)
    b_result: list[PublishOutcome] = []
    b = threading.Thread(
        target=lambda: b_result.append(w.service("w2", publisher=held).publish_run(RUN).outcome)
    )
    b.start()
    _wait_for(lambda: w.effect() is not None and (w.effect() or _no()).tries == 2)  # B reopened
    slow.release.set()  # A's look-up answers "absent" while B is inside its send
    a.join(20)
    b_sends.set()
    b.join(20)

    assert a_result == [PublishOutcome.IN_PROGRESS]
    assert b_result == [PublishOutcome.PUBLISHED]
    assert w.posts() == 1
    assert w.run_row().state == RunState.SUCCEEDED


def test_a_lapsed_holder_is_not_taken_over_while_its_call_may_be_on_the_wire(
    worlds: MakeWorld, db_url: str
) -> None:
    """Lease expired but the holder's call may still land: the taker waits out the call's
    time limit before it may look and act."""
    w = worlds(db_url)
    w.approved()
    spec = EffectSpec(
        "k|publish:webhook",
        KEY,
        "publish",
        {"x": 1},
        lease=timedelta(seconds=4),
        on_wire=timedelta(seconds=30),
    )
    assert w.ledger("w1").begin(spec).decision == EffectDecision.ACT
    w.clock.advance(timedelta(seconds=5))
    assert w.ledger("w2").perform(spec, lambda: _no()).outcome == "in_progress"
    w.clock.advance(timedelta(seconds=30))
    assert w.ledger("w2").begin(spec).decision == EffectDecision.RECONCILE


def test_a_taken_over_holder_cannot_renew_the_new_owners_lease(store: Store) -> None:
    clock = FrozenClock()
    spec = EffectSpec("k|review", "k", "review", {"x": 1}, lease=timedelta(seconds=4))
    old = EffectLedger(store, clock, "w1").begin(spec)
    clock.advance(timedelta(seconds=5))
    new = EffectLedger(store, clock, "w2").begin(spec)
    assert new.decision == EffectDecision.RECONCILE

    assert EffectLedger(store, clock, "w1").renew(old) is False
    assert EffectLedger(store, clock, "w2").renew(new) is True


# --- 2. the database's clock --------------------------------------------------------------


def test_a_replica_whose_clock_runs_ahead_does_not_take_a_live_claim(store: Store) -> None:
    galley = Services(make_config(takeover_after="8s", heartbeat="4s"), store)
    recipe = galley.recipe(RECIPE)
    slot = galley.resolve_slot(recipe, OLD_SLOT)
    claimed = claim_slot(
        store, recipe, slot, worker="a", actor="a", manual=True, clock=SystemClock()
    )
    assert isinstance(claimed, Claim)
    drafter = InstantDrafter()
    ahead = DraftingService(store, drafter, clock=SkewedClock(timedelta(seconds=9)), worker="b")

    result = ahead.draft_slot(recipe, slot, manual=True)

    assert result.outcome == DraftOutcome.IN_PROGRESS
    assert drafter.calls == 0


def test_a_replica_whose_clock_runs_ahead_does_not_take_a_live_receipt(store: Store) -> None:
    spec = EffectSpec(
        "k|publish:webhook", "k", "publish", {"x": 1}, timedelta(seconds=4), None, False
    )
    EffectLedger(store, SystemClock(), "a").begin(spec)
    ahead = EffectLedger(store, SkewedClock(timedelta(minutes=10)), "b")

    assert ahead.perform(spec, lambda: _no()).outcome == "in_progress"


def test_a_renewal_that_waited_for_the_write_lock_writes_a_live_lease(sqlite_url: str) -> None:
    """SQLite only: PostgreSQL has no database-wide write lock to wait for (its row locks
    are held for one short statement by the guarded writes that contend here)."""
    store = Store(sqlite_url)
    galley = Services(make_config(), store)
    recipe = galley.recipe(RECIPE)
    slot = galley.resolve_slot(recipe, OLD_SLOT)
    claimed = claim_slot(
        store, recipe, slot, worker="a", actor="a", manual=True, clock=SystemClock()
    )
    assert isinstance(claimed, Claim)
    blocker = sqlite3.connect(
        sqlite_url.removeprefix("sqlite:///"), isolation_level=None, check_same_thread=False
    )
    blocker.execute("BEGIN IMMEDIATE")
    release = threading.Timer(1.5, lambda: blocker.execute("COMMIT"))
    release.start()

    assert renew_lease(store, claimed, timedelta(seconds=1), SystemClock())

    release.join()
    with store.read() as session:
        lease = session.exec(select(DraftRow.lease_until)).one()
        assert lease is not None and lease > database_now(session)
    blocker.close()
    store.dispose()


# --- 4. a person's request stays a person's -----------------------------------------------


def test_a_manual_draft_whose_worker_died_is_drafted_after_the_sweep(store: Store) -> None:
    clock = FrozenClock()
    galley = Services(make_config(), store, clock=clock)
    recipe = galley.recipe(RECIPE)
    slot = galley.resolve_slot(recipe, OLD_SLOT)
    claimed = claim_slot(store, recipe, slot, worker="dead", actor="U0ME", manual=True, clock=clock)
    assert isinstance(claimed, Claim)
    clock.advance(recipe.takeover_after + timedelta(seconds=1))
    assert sweep_expired_claims(store, clock) == [claimed.draft_key]
    drafter = InstantDrafter()
    drafting = DraftingService(store, drafter, clock=clock, worker="w2")
    dispatcher = SlotDispatcher(store, drafting, clock, recipes={RECIPE: recipe})

    result = dispatcher.resume(claimed.run_id)

    assert result is not None and result.outcome == DraftOutcome.DRAFTED, result
    assert drafter.calls == 1


# --- 5. cancel during review --------------------------------------------------------------


def test_cancelling_a_run_in_review_takes_its_draft_out_of_the_queue(
    worlds: MakeWorld, db_url: str
) -> None:
    w = worlds(db_url)
    key = w.draft()

    w.resolver().cancel(RUN, actor="U0ADMIN")
    answer = decide(
        w.store,
        w.config,
        w.clock,
        draft_key=key,
        revision=1,
        verdict=Verdict.APPROVED,
        user="U0EDITOR",
        permitted=True,
    )

    assert w.draft_row().state == DraftState.CANCELLED
    assert not answer.accepted and answer.refusal == Refusal.CANCELLED
    assert w.galley.status().recipes[0].pending == 0
    assert w.run_row().state == RunState.CANCELLED


# --- 7. a refused publication, retried once fixed -----------------------------------------


def test_a_publication_refused_for_auth_is_published_once_after_a_retry(
    worlds: MakeWorld, db_url: str
) -> None:
    w = worlds(db_url)
    w.approved()
    w.hook.script_post(status(401))
    assert w.service().publish_run(RUN).outcome == PublishOutcome.FAILED
    assert w.run_row().state == RunState.FAILED

    w.resolver().retry(RUN, actor="U0ADMIN")  # the token was fixed
    result = w.service().publish_run(RUN)

    assert result.outcome == PublishOutcome.PUBLISHED
    assert len(w.hook.publications) == 1
    assert w.run_row().state == RunState.SUCCEEDED


# --- 8. a cancel while a draft is written --------------------------------------------------


def test_a_cancel_while_drafting_keeps_the_paid_call_in_the_ledger(store: Store) -> None:
    clock = FrozenClock()
    galley = Services(make_config(), store, clock=clock)
    recipe = galley.recipe(RECIPE)
    slot = galley.resolve_slot(recipe, OLD_SLOT)
    release = threading.Event()
    drafter = InstantDrafter(release=release)
    drafting = DraftingService(store, drafter, clock=clock, worker="w1")
    results = []
    writer = threading.Thread(
        target=lambda: results.append(drafting.draft_slot(recipe, slot, manual=True))
    )
    writer.start()
    assert drafter.started.wait(10)
    galley.resolver.cancel(slot.run_id(RECIPE), actor="U0ADMIN")
    release.set()
    writer.join(20)

    with store.read() as session:
        attempt = session.exec(select(AttemptRow)).one()
        draft = session.exec(select(DraftRow).where(col(DraftRow.recipe) == RECIPE)).one()
        spent = tokens_today(session, recipe, clock.now())
    assert attempt.finished_at is not None and attempt.output_tokens == 20
    assert spent == 30
    assert draft.state == DraftState.CANCELLED
    assert draft.text == "draft 1"


def _no() -> object:
    raise AssertionError("must not be called")


def _wait_for(condition: object, timeout: float = 10.0) -> None:
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():  # type: ignore[operator]
            return
        time.sleep(0.02)
    pytest.fail("condition not met in time")
