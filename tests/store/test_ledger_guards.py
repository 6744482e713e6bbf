"""The ledger's guards, each forced by the interleaving it exists for,
on SQLite and PostgreSQL: a repeatable effect whose holder died is done again; a holder
whose lease lapsed unnoticed sends nothing; a reconciler whose receipt a person settled,
or another reconciler took, while it looked sends nothing. Each test counts the calls
the effect made and reads the receipt.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
import sqlalchemy as sa
from sqlmodel import Session, col

from core.errors import LeaseLost
from core.models import EffectRow
from core.policies import EffectDecision, EffectOutcome
from core.states import EffectState
from core.store.effects import EffectLedger
from core.store.engine import Store
from core.store.leases import Heartbeat
from core.store.receipts import EffectSpec, EffectStart, MayAct, Proof
from core.testing import FrozenClock
from tests.harness.processes import wait_for
from tests.harness.races import a_backend_waits_on_a_lock, in_thread, skip_on_sqlite
from tests.harness.timing import scaled

KEY = "linkedin|weekly-update@2026-11-23T09:00|v1|review-update:approved:1"
DRAFT = "linkedin|weekly-update@2026-11-23T09:00|v1"
LEASE = timedelta(seconds=30)
NEVER = timedelta(hours=1)  # a heartbeat that does not beat within a test


def spec() -> EffectSpec:
    return EffectSpec(KEY, draft_key=DRAFT, step="review-update", payload={"v": 1}, lease=LEASE)


def receipt(store: Store) -> EffectRow:
    with store.transaction() as session:
        row = session.get(EffectRow, KEY)
        assert row is not None
        return row


class Calls:
    """The effect itself: counts how often it was made."""

    def __init__(self) -> None:
        self.made = 0

    def __call__(self) -> Proof:
        self.made += 1
        return Proof(f"ts-{self.made}")


def test_a_repeatable_effect_whose_holder_died_mid_call_is_done_again(store: Store) -> None:
    """A review-message or alert rewrite: its dead holder left it in flight; the next pass
    finds it uncertain and, since doing it twice is harmless, does it again."""
    clock = FrozenClock()
    died = EffectLedger(store, clock, "w1").begin(spec())
    assert died.decision == EffectDecision.ACT
    clock.advance(LEASE + timedelta(seconds=1))
    calls = Calls()

    done = EffectLedger(store, clock, "w2").perform(spec(), calls, repeatable=True)

    assert done.outcome == EffectOutcome.SENT
    assert calls.made == 1
    assert receipt(store).state == EffectState.SUCCEEDED
    again = EffectLedger(store, clock, "w3").perform(spec(), calls, repeatable=True)
    assert again.outcome == EffectOutcome.DONE and calls.made == 1


def test_a_holder_whose_lease_lapsed_while_it_looked_sends_nothing(store: Store) -> None:
    """Nobody took it over yet, but its lease ran out (its heartbeat stalled): the fence
    judges the lease by the clock, not only the owner."""
    clock = FrozenClock()
    ledger = EffectLedger(store, clock, "w1", heartbeat=NEVER)
    calls = Calls()

    def stalled_look() -> Proof | None:
        clock.advance(LEASE + timedelta(seconds=1))
        return None

    done = ledger.perform(spec(), calls, lookup=stalled_look, look_first=True)

    assert done.outcome == EffectOutcome.LEASE_LOST
    assert calls.made == 0
    assert receipt(store).state == EffectState.IN_FLIGHT  # for the next holder to reconcile


@pytest.mark.parametrize("meanwhile", ["settled_by_a_person", "taken_by_another_reconciler"])
def test_a_reconciler_whose_receipt_changed_hands_while_it_looked_sends_nothing(
    store: Store, meanwhile: str
) -> None:
    clock = FrozenClock()
    first = EffectLedger(store, clock, "w1")
    first.mark_uncertain(first.begin(spec()), "read timeout after send")
    calls = Calls()

    def look_while_it_changes() -> Proof | None:
        values = (
            {"state": EffectState.SUCCEEDED, "external_id": "manual:U0ADMIN"}
            if meanwhile == "settled_by_a_person"
            else {"claimed_by": "w3/another"}
        )
        with store.transaction() as session:
            session.execute(sa.update(EffectRow).where(col(EffectRow.key) == KEY).values(values))
        return None  # absent, as far as this reconciler can see

    done = EffectLedger(store, clock, "w2").perform(spec(), calls, lookup=look_while_it_changes)

    assert done.outcome == EffectOutcome.LEASE_LOST
    assert calls.made == 0
    row = receipt(store)  # left as the person or the other reconciler has it
    if meanwhile == "settled_by_a_person":
        assert (row.state, row.external_id) == (EffectState.SUCCEEDED, "manual:U0ADMIN")
    else:
        assert (row.state, row.claimed_by, row.tries) == (EffectState.UNCERTAIN, "w3/another", 1)


def test_the_fence_judges_the_lease_by_the_time_after_its_row_locks_are_held(
    store: Store, db_url: str
) -> None:
    """PostgreSQL: the fence's `may_act` waits for the run's row, held by another
    transaction, while the lease runs out; the lease is judged by the time after that
    wait, so the holder sends nothing."""
    skip_on_sqlite(db_url)
    clock = FrozenClock()
    ledger = EffectLedger(store, clock, "w1", heartbeat=NEVER)
    start = ledger.begin(spec())
    with store.transaction() as session:
        session.execute(sa.text("CREATE TABLE IF NOT EXISTS held_row (id int primary key)"))
        session.execute(sa.text("INSERT INTO held_row VALUES (1) ON CONFLICT DO NOTHING"))

    def wait_for_the_row(session: Session, now: datetime) -> str | None:
        session.execute(sa.text("SELECT id FROM held_row WHERE id = 1 FOR UPDATE"))
        return None

    with store.engine.connect() as other:
        holding = other.begin()
        other.execute(sa.text("SELECT id FROM held_row WHERE id = 1 FOR UPDATE"))
        with ledger.held(start) as beat:
            thread, results = in_thread(lambda: _fenced(ledger, start, beat, wait_for_the_row))
            wait_for(lambda: a_backend_waits_on_a_lock(store), 30, "the fence to wait")
            clock.advance(LEASE + timedelta(seconds=1))  # the lease runs out meanwhile
            holding.commit()
            thread.join(timeout=scaled(30))

    assert results == ["lease lost"]


def _fenced(ledger: EffectLedger, start: EffectStart, beat: Heartbeat, may_act: MayAct) -> str:
    try:
        return f"go ahead: {ledger.fence(start, beat, may_act)}"
    except LeaseLost:
        return "lease lost"
