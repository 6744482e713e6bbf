"""`move_run_if_allowed`: a run moves where its state machine allows and is otherwise left
as it is, with no event, on SQLite and PostgreSQL."""

from __future__ import annotations

from sqlmodel import col, select

from core.claims import ensure_recipe_row, open_run
from core.history import move_run_if_allowed
from core.models import EventRow
from core.operator import Galley
from core.rows import run_row
from core.states import RunState
from core.store import Store
from core.testing import FrozenClock
from tests.conftest import make_config


def pending_run(store: Store, clock: FrozenClock) -> str:
    galley = Galley(make_config(), store)
    recipe = galley.recipe("weekly-update")
    slot = galley.resolve_slot(recipe, "2026-11-23T09:00")
    with store.transaction() as session:
        ensure_recipe_row(session, recipe.name, clock.now())
        run = open_run(session, recipe, slot, manual=True, actor="test", now=clock.now())
        return run.id


def run_events(store: Store, run_id: str) -> list[tuple[str | None, str]]:
    with store.read() as session:
        events = session.exec(
            select(EventRow)
            .where(col(EventRow.subject) == "run", col(EventRow.run_id) == run_id)
            .order_by(col(EventRow.id))
        ).all()
        return [(e.from_state, e.to_state) for e in events]


def test_a_move_the_state_machine_refuses_leaves_the_run_alone(store: Store) -> None:
    clock = FrozenClock()
    run_id = pending_run(store, clock)

    with store.transaction() as session:
        run = run_row(session, run_id)
        assert run is not None
        moved = move_run_if_allowed(
            session, run, RunState.UNCERTAIN, actor="test", at=clock.now(), detail="no"
        )

    assert moved is False
    with store.read() as session:
        stored = run_row(session, run_id)
        assert stored is not None and stored.state == RunState.PENDING
    assert run_events(store, run_id) == [(None, RunState.PENDING)]


def test_a_move_the_state_machine_allows_is_made_with_its_event(store: Store) -> None:
    clock = FrozenClock()
    run_id = pending_run(store, clock)

    with store.transaction() as session:
        run = run_row(session, run_id)
        assert run is not None
        moved = move_run_if_allowed(
            session, run, RunState.SKIPPED, actor="test", at=clock.now(), reason="misfire"
        )

    assert moved is True
    with store.read() as session:
        stored = run_row(session, run_id)
        assert stored is not None
        assert (stored.state, stored.reason) == (RunState.SKIPPED, "misfire")
    assert run_events(store, run_id) == [
        (None, RunState.PENDING),
        (RunState.PENDING, RunState.SKIPPED),
    ]
