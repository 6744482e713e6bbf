"""Every state change names the state (and owner) it leaves in its WHERE clause.

Each test reads a row, lets "another transaction" change it in between (PostgreSQL at
READ COMMITTED allows exactly this; on SQLite the write lock makes it impossible across
transactions, so the change is made on the same connection to stand in for it), then
moves the row as read: the guarded write must match nothing and raise, leaving the other
writer's state in place. Both backends.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
import sqlalchemy as sa

from core.api.galley import Galley
from core.errors import ConcurrentChange
from core.models import DraftRow, EffectRow, RunRow
from core.review.queue import expire_overdue_drafts
from core.states import DraftState, EffectState, RunState
from core.store.effects import EffectLedger
from core.store.engine import Store
from core.store.receipts import EffectSpec
from core.store.rows import draft_row, effect_row, run_row
from core.store.transitions import move_draft, move_effect, move_run
from core.testing import FrozenClock, InstantDrafter
from tests.conftest import make_config

SLOT = "2026-11-23T09:00"


def _drafted(store: Store) -> tuple[str, str]:
    galley = Galley(make_config(), store, drafter=InstantDrafter(), clock=FrozenClock())
    result = galley.draft("weekly-update", SLOT)
    assert result.key is not None
    return result.run, result.key


def _meanwhile(session: object, statement: sa.Update) -> None:
    """Another writer's change, which this session's loaded rows do not see."""
    session.execute(statement.execution_options(synchronize_session=False))  # type: ignore[attr-defined]


def test_move_run_refuses_a_run_that_moved_after_it_was_read(store: Store) -> None:
    run_id, _ = _drafted(store)
    clock = FrozenClock()
    with pytest.raises(ConcurrentChange), store.transaction() as session:
        run = run_row(session, run_id)
        assert run is not None and run.state == RunState.AWAITING_REVIEW
        _meanwhile(
            session,
            sa.update(RunRow).where(RunRow.id == run_id).values(state=RunState.CANCELLED),
        )
        move_run(session, run, RunState.APPROVED, actor="late", at=clock.now())
    with store.read() as session:
        assert (run_row(session, run_id) or RunRow()).state == RunState.AWAITING_REVIEW


def test_move_draft_refuses_a_claim_taken_over_after_it_was_read(store: Store) -> None:
    _, key = _drafted(store)
    with store.transaction() as session:  # back to a claim held by "old"
        session.execute(
            sa.update(DraftRow)
            .where(DraftRow.key == key)
            .values(state=DraftState.CLAIMED, claimed_by="old")
        )
    with pytest.raises(ConcurrentChange), store.transaction() as session:
        draft = draft_row(session, key)
        assert draft is not None
        _meanwhile(session, sa.update(DraftRow).where(DraftRow.key == key).values(claimed_by="new"))
        move_draft(session, draft, DraftState.READY, actor="old", at=FrozenClock().now())
    with store.read() as session:
        assert (draft_row(session, key) or DraftRow()).state == DraftState.CLAIMED


def test_move_effect_refuses_a_receipt_settled_after_it_was_read(store: Store) -> None:
    _, key = _drafted(store)
    clock = FrozenClock()
    spec = EffectSpec(f"{key}|review", key, "review", {"x": 1}, lease=timedelta(seconds=4))
    start = EffectLedger(store, clock, "w1").begin(spec)
    with pytest.raises(ConcurrentChange), store.transaction() as session:
        row = effect_row(session, spec.key)
        assert row is not None
        _meanwhile(
            session,
            sa.update(EffectRow)
            .where(EffectRow.key == spec.key)
            .values(state=EffectState.SUCCEEDED, claimed_by=None),
        )
        move_effect(session, row, EffectState.UNCERTAIN, actor=start.owner or "", at=clock.now())
    with store.read() as session:
        assert (effect_row(session, spec.key) or EffectRow()).state == EffectState.IN_FLIGHT


def test_a_stale_draft_that_expires_leaves_a_run_that_holds_another_draft(store: Store) -> None:
    """`run_holds`: a draft's move carries its run along only while the run still holds
    that draft. Here the run has moved on to another draft of the slot (a redraft, a
    bump) before the old one passes its review window: the old draft expires alone."""
    clock = FrozenClock()
    config = make_config()
    galley = Galley(config, store, drafter=InstantDrafter(), clock=clock)
    result = galley.draft("weekly-update", SLOT)
    assert result.key is not None
    with store.transaction() as session:  # the slot's current draft is another one now
        session.execute(
            sa.update(RunRow).where(RunRow.id == result.run).values(draft_key=f"{result.key}-next")
        )
    clock.advance(config.recipes["weekly-update"].review_window + timedelta(minutes=1))

    expired = expire_overdue_drafts(store, config, clock)

    assert [e.key for e in expired] == [result.key]
    with store.read() as session:
        assert (draft_row(session, result.key) or DraftRow()).state == DraftState.EXPIRED
        assert (run_row(session, result.run) or RunRow()).state == RunState.AWAITING_REVIEW
