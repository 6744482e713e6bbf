"""Receipts with payload checks and fenced owners (docs/design.md §7 and §5), on SQLite
and PostgreSQL."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from sqlmodel import select

from core.errors import ConcurrentChange, EffectInProgress, KeyPayloadConflict
from core.models import EffectRow, EventRow
from core.policies import EffectDecision, EffectOutcome
from core.states import EffectState
from core.store.effects import EffectLedger
from core.store.engine import Store
from core.store.receipts import EffectSpec, EffectStart, Proof
from core.testing import FrozenClock

KEY = "linkedin|weekly-update@2026-11-23T09:00|v1|publish:slack:C0ANNOUNCE"
DRAFT = "linkedin|weekly-update@2026-11-23T09:00|v1"
PAYLOAD = {"channel": "C0ANNOUNCE", "text": "Hello"}
LEASE = timedelta(seconds=30)


def spec(payload: object = PAYLOAD) -> EffectSpec:
    return EffectSpec(KEY, draft_key=DRAFT, step="publish", payload=payload, lease=LEASE)


def begin(ledger: EffectLedger, payload: object = PAYLOAD) -> EffectStart:
    return ledger.begin(spec(payload))


def rows(store: Store) -> list[EffectRow]:
    with store.transaction() as session:
        return list(session.exec(select(EffectRow)).all())


def test_same_key_same_payload_returns_the_recorded_result(store: Store) -> None:
    ledger = EffectLedger(store, FrozenClock(), "w1")
    start = begin(ledger)
    assert start.decision == EffectDecision.ACT
    ledger.succeed(start, Proof("1700000000.000100", {"ts": "1700000000.000100"}))

    again = begin(ledger, payload={"text": "Hello", "channel": "C0ANNOUNCE"})

    assert again.decision == EffectDecision.DONE
    assert again.receipt.external_id == "1700000000.000100"
    assert again.receipt.result == {"ts": "1700000000.000100"}
    assert again.receipt.tries == 1


def test_same_key_different_payload_is_a_conflict_and_changes_nothing(store: Store) -> None:
    ledger = EffectLedger(store, FrozenClock(), "w1")
    ledger.succeed(begin(ledger), Proof("ts-1"))
    before = [r.model_dump() for r in rows(store)]
    with store.transaction() as session:
        events_before = len(session.exec(select(EventRow)).all())

    with pytest.raises(KeyPayloadConflict):
        begin(ledger, payload={"channel": "C0ANNOUNCE", "text": "Hello!"})

    assert [r.model_dump() for r in rows(store)] == before
    with store.transaction() as session:
        assert len(session.exec(select(EventRow)).all()) == events_before


def test_a_live_in_flight_effect_answers_in_progress(store: Store) -> None:
    clock = FrozenClock()
    first = begin(EffectLedger(store, clock, "w1"))

    with pytest.raises(EffectInProgress):
        begin(EffectLedger(store, clock, "w2"))
    [row] = rows(store)
    assert (row.state, row.claimed_by, row.tries) == (EffectState.IN_FLIGHT, first.owner, 1)
    assert first.owner is not None and first.owner.startswith("w1/")


def test_an_in_flight_effect_whose_holder_died_must_be_reconciled_by_one_owner(
    store: Store,
) -> None:
    clock = FrozenClock()
    begin(EffectLedger(store, clock, "w1"))
    clock.advance(LEASE + timedelta(seconds=1))

    reconciling = begin(EffectLedger(store, clock, "w2"))
    assert reconciling.decision == EffectDecision.RECONCILE
    [row] = rows(store)
    assert (row.state, row.claimed_by) == (EffectState.UNCERTAIN, reconciling.owner)
    with pytest.raises(EffectInProgress):  # one reconciler at a time
        begin(EffectLedger(store, clock, "w3"))

    clock.advance(LEASE + timedelta(seconds=1))  # the reconciler died too: next one
    assert begin(EffectLedger(store, clock, "w3")).decision == EffectDecision.RECONCILE


def test_a_holder_whose_lease_was_taken_over_changes_nothing(store: Store) -> None:
    clock = FrozenClock()
    slow = EffectLedger(store, clock, "slow")
    held = begin(slow)
    clock.advance(LEASE + timedelta(seconds=1))
    taker = EffectLedger(store, clock, "taker")
    taken = begin(taker)
    taker.succeed(taken, Proof("found-by-lookup"))
    before = [r.model_dump() for r in rows(store)]

    with pytest.raises(ConcurrentChange):
        slow.succeed(held, Proof("late-answer"))
    with pytest.raises(ConcurrentChange):
        slow.fail(held, "late failure")
    assert not slow.renew(held)
    assert [r.model_dump() for r in rows(store)] == before


def test_a_failed_effect_may_be_tried_again_under_the_same_key(store: Store) -> None:
    clock = FrozenClock()
    ledger = EffectLedger(store, clock, "w1")
    ledger.fail(begin(ledger), "HTTP 400 from the destination")

    again = begin(EffectLedger(store, clock, "w2"))
    assert again.decision == EffectDecision.ACT
    [row] = rows(store)
    assert (row.state, row.claimed_by, row.tries) == (EffectState.IN_FLIGHT, again.owner, 2)


def test_a_refusal_with_retry_after_waits_before_a_new_attempt(store: Store) -> None:
    clock = FrozenClock()
    ledger = EffectLedger(store, clock, "w1")
    ledger.fail(begin(ledger), "429", retry_after=timedelta(seconds=20))

    assert begin(ledger).decision == EffectDecision.WAIT
    clock.advance(timedelta(seconds=21))
    assert begin(ledger).decision == EffectDecision.ACT


def test_an_uncertain_effect_resolved_as_found_is_done(store: Store) -> None:
    clock = FrozenClock()
    ledger = EffectLedger(store, clock, "w1")
    ledger.mark_uncertain(begin(ledger), "read timeout after send")
    reconciling = begin(ledger)
    assert reconciling.decision == EffectDecision.RECONCILE
    ledger.succeed(reconciling, Proof("ts-found-by-lookup"))

    assert begin(ledger).decision == EffectDecision.DONE


def test_two_threads_of_one_process_reconciling_one_effect_act_once(store: Store) -> None:
    """Both threads share the process's worker name; the uncertain receipt is still
    reconciled by one of them, so a lookup that finds nothing leads to one send."""
    clock = FrozenClock()
    ledger = EffectLedger(store, clock, "host:1")  # one ledger, as in one process
    ledger.mark_uncertain(begin(ledger), "read timeout after send")
    in_lookup, release = threading.Event(), threading.Event()
    sends: list[str] = []

    def lookup() -> Proof | None:
        in_lookup.set()
        release.wait(10)
        return None  # clearly absent at the destination

    def send() -> Proof:
        sends.append(threading.current_thread().name)
        return Proof(f"sent-{len(sends)}")

    first = threading.Thread(target=lambda: ledger.perform(spec(), send, lookup=lookup))
    first.start()
    assert in_lookup.wait(10)
    second = ledger.perform(spec(), send, lookup=lambda: None)  # while the first looks
    release.set()
    first.join(10)

    assert second.outcome == EffectOutcome.IN_PROGRESS
    assert len(sends) == 1
    [row] = rows(store)
    assert (row.state, row.external_id) == (EffectState.SUCCEEDED, "sent-1")


def test_perform_looks_up_an_uncertain_effect_before_acting_again(store: Store) -> None:
    clock = FrozenClock()
    ledger = EffectLedger(store, clock, "w1")
    ledger.mark_uncertain(begin(ledger), "read timeout after send")
    sends: list[int] = []

    found = ledger.perform(spec(), lambda: Proof(str(sends.append(1))), lookup=lambda: Proof("x"))

    assert found.outcome == EffectOutcome.FOUND and found.external_id == "x"
    assert sends == []


def test_a_holder_whose_preparation_outlasted_its_lease_makes_no_call(store: Store) -> None:
    """A post's uploads (`prepare`) run after its fence; the fence is passed again before
    the call, so a lease lost while they ran sends nothing (docs/design.md §32)."""
    clock = FrozenClock()
    ledger = EffectLedger(store, clock, "w1", heartbeat=timedelta(minutes=5))  # no renewal
    prepared: list[str] = []
    calls: list[str] = []

    def uploads_that_take_too_long() -> None:
        prepared.append("uploaded")
        clock.advance(LEASE * 3)

    def post() -> Proof:
        calls.append("posted")
        return Proof("1")

    performed = ledger.perform(spec(), post, prepare=uploads_that_take_too_long)

    assert prepared == ["uploaded"]
    assert calls == []
    assert performed.outcome == EffectOutcome.LEASE_LOST


def test_a_preparation_in_time_is_followed_by_the_call(store: Store) -> None:
    ledger = EffectLedger(store, FrozenClock(), "w1")
    order: list[str] = []

    def post() -> Proof:
        order.append("posted")
        return Proof("1")

    performed = ledger.perform(spec(), post, prepare=lambda: order.append("uploaded"))

    assert order == ["uploaded", "posted"]
    assert performed.outcome == EffectOutcome.SENT
