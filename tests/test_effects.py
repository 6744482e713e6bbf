"""Receipts with payload checks (DESIGN.md §4.3), on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlmodel import select

from core.effects import EffectDecision, EffectLedger
from core.errors import EffectInProgress, KeyPayloadConflict
from core.models import EffectRow, EventRow
from core.states import EffectState
from core.store import Store
from tests.conftest import FakeClock

KEY = "linkedin|weekly-update@2026-11-23T09:00|v1|publish:slack:C0ANNOUNCE"
DRAFT = "linkedin|weekly-update@2026-11-23T09:00|v1"
PAYLOAD = {"channel": "C0ANNOUNCE", "text": "Hello"}
LEASE = timedelta(seconds=30)


def begin(ledger: EffectLedger, payload: object = PAYLOAD) -> EffectDecision:
    return ledger.begin(KEY, draft_key=DRAFT, step="publish", payload=payload, lease=LEASE).decision


def rows(store: Store) -> list[EffectRow]:
    with store.transaction() as session:
        return list(session.exec(select(EffectRow)).all())


def test_same_key_same_payload_returns_the_recorded_result(store: Store) -> None:
    ledger = EffectLedger(store, FakeClock(), "w1")
    assert begin(ledger) == EffectDecision.ACT
    ledger.succeed(KEY, "1700000000.000100", {"ts": "1700000000.000100"})

    again = ledger.begin(
        KEY,
        draft_key=DRAFT,
        step="publish",
        payload={"text": "Hello", "channel": "C0ANNOUNCE"},
        lease=LEASE,
    )

    assert again.decision == EffectDecision.DONE
    assert again.receipt.external_id == "1700000000.000100"
    assert again.receipt.result == {"ts": "1700000000.000100"}
    assert again.receipt.tries == 1


def test_same_key_different_payload_is_a_conflict_and_changes_nothing(store: Store) -> None:
    ledger = EffectLedger(store, FakeClock(), "w1")
    begin(ledger)
    ledger.succeed(KEY, "ts-1")
    before = [r.model_dump() for r in rows(store)]
    with store.transaction() as session:
        events_before = len(session.exec(select(EventRow)).all())

    with pytest.raises(KeyPayloadConflict):
        begin(ledger, payload={"channel": "C0ANNOUNCE", "text": "Hello!"})

    assert [r.model_dump() for r in rows(store)] == before
    with store.transaction() as session:
        assert len(session.exec(select(EventRow)).all()) == events_before


def test_a_live_in_flight_effect_answers_in_progress(store: Store) -> None:
    clock = FakeClock()
    begin(EffectLedger(store, clock, "w1"))

    with pytest.raises(EffectInProgress):
        begin(EffectLedger(store, clock, "w2"))
    [row] = rows(store)
    assert (row.state, row.claimed_by, row.tries) == (EffectState.IN_FLIGHT, "w1", 1)


def test_an_in_flight_effect_whose_holder_died_must_be_reconciled(store: Store) -> None:
    clock = FakeClock()
    begin(EffectLedger(store, clock, "w1"))
    clock.advance(LEASE + timedelta(seconds=1))

    assert begin(EffectLedger(store, clock, "w2")) == EffectDecision.RECONCILE
    [row] = rows(store)
    assert row.state == EffectState.UNCERTAIN
    assert begin(EffectLedger(store, clock, "w3")) == EffectDecision.RECONCILE


def test_a_failed_effect_may_be_tried_again_under_the_same_key(store: Store) -> None:
    clock = FakeClock()
    ledger = EffectLedger(store, clock, "w1")
    begin(ledger)
    ledger.fail(KEY, "HTTP 400 from the destination")

    assert begin(EffectLedger(store, clock, "w2")) == EffectDecision.ACT
    [row] = rows(store)
    assert (row.state, row.claimed_by, row.tries) == (EffectState.IN_FLIGHT, "w2", 2)


def test_an_uncertain_effect_resolved_as_found_is_done(store: Store) -> None:
    ledger = EffectLedger(store, FakeClock(), "w1")
    begin(ledger)
    ledger.mark_uncertain(KEY, "read timeout after send")
    ledger.succeed(KEY, "ts-found-by-lookup")

    assert begin(ledger) == EffectDecision.DONE
    assert ledger.get(KEY) is not None
