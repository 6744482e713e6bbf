"""State changes as guarded writes, each with its event row in the same transaction.

Every transition goes through here (docs/design.md §3). The state machine is checked
(illegal ones raise `IllegalTransition`), and the row is changed by one `UPDATE … WHERE
key = … AND state = <the state the caller read> [AND claimed_by = <owner>]`: if another
transaction moved the row in between (PostgreSQL runs at READ COMMITTED; a replica or a
thread gets in between a read and a write), nothing matches and `ConcurrentChange` is
raised, so the caller's whole transaction rolls back instead of writing over it.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session, SessionTransaction
from sqlalchemy.orm.attributes import set_committed_value
from sqlmodel import SQLModel

from core.errors import ConcurrentChange
from core.models import DraftRow, EffectRow, EventRow, RunRow
from core.policies import DecisionKind
from core.states import (
    DraftState,
    EffectState,
    EventSubject,
    RunState,
    check_draft,
    check_effect,
    check_run,
)
from core.store.leases import is_person
from core.telemetry import observe

RELEASED = "released"  # the event of a claim given back: its draft row is deleted
_INSERT_EVENT = sa.insert(EventRow.__table__)  # type: ignore[attr-defined]
_EVENTS = "galley_events"  # Session.info key: the events recorded, written at commit
_UNDECIDED = {"decision": None, "revision": None}  # every event carries both: one INSERT shape


@dataclass(frozen=True)
class Decided:
    """A person's act an event records: what it was, and which revision it was about."""

    kind: DecisionKind
    revision: int | None


def record_event(
    session: Session,
    *,
    subject: EventSubject,
    subject_id: str,
    to_state: str,
    actor: str,
    at: datetime,
    run_id: str | None = None,
    from_state: str | None = None,
    reason: str | None = None,
    step: str | None = None,
    decision: Decided | None = None,
) -> None:
    """The event row of one change; `step` (an effect's stored step) is told to
    core/telemetry/observe.py, not stored twice; `decision`, a person's act the decision
    log keeps (core/api/decisions.py), is stored with it when a person acted: a pass's or
    the model's change (an alt text it proposed) is history, never a decision."""
    fields: dict[str, Any] = {
        "subject": subject,
        "subject_id": subject_id,
        "run_id": run_id,
        "from_state": from_state,
        "to_state": to_state,
        "actor": actor,
        "reason": reason,
    }
    # Held until the transaction commits, then written by one prebuilt Core INSERT for
    # all of its events (`_write_events`): no unit of work, no RETURNING of an id nobody
    # reads, and one statement where a claim has three events.
    marked: dict[str, Any] = _UNDECIDED
    if decision is not None and is_person(actor):  # the decision log is people's acts only
        marked = {"decision": decision.kind, "revision": decision.revision}
    session.info.setdefault(_EVENTS, []).append({"at": at, **fields, **marked})
    observe.state_changed(session, **fields, step=step)


@sa.event.listens_for(Session, "before_commit")
def _write_events(session: Session) -> None:
    """A transaction's events, in the order they were recorded, as it commits: in the
    same transaction as the changes they tell of, so one is never kept without the other."""
    events = session.info.pop(_EVENTS, None)
    if events:
        session.execute(_INSERT_EVENT, events)


@sa.event.listens_for(Session, "after_transaction_end")
def _forget_events(session: Session, transaction: SessionTransaction) -> None:
    if transaction.parent is None:  # rolled back (a commit took them already)
        session.info.pop(_EVENTS, None)


def as_read(row: SQLModel, field: str) -> Any:
    """A column's value as it was loaded from the database, before any change in memory."""
    history = sa.inspect(row).attrs[field].history
    if history.deleted:
        return history.deleted[0]
    if history.unchanged:
        return history.unchanged[0]
    return getattr(row, field)


def guarded_update(session: Session, row: SQLModel, **guards: Any) -> None:
    """Write every changed column of `row` in one UPDATE that also requires the row to
    still hold `guards` (column=value as read); raise `ConcurrentChange` if it does not.

    The ORM would otherwise write by primary key alone, over whatever another
    transaction committed since this one read the row.
    """
    state = sa.inspect(row)
    table: Any = type(row)
    changes = {  # only attributes set since the load can differ (`committed_state`)
        key: added[0]
        for key in [a.key for a in state.mapper.column_attrs if a.key in state.committed_state]
        if (added := state.attrs[key].history.added)
    }
    null_guards = frozenset(name for name, value in guards.items() if value is None)
    statement = _guarded_update_statement(table, tuple(changes), tuple(guards), null_guards)
    params = {f"new_{name}": value for name, value in changes.items()}
    params |= {f"was_{name}": value for name, value in guards.items() if value is not None}
    params |= {f"pk_{i}": value for i, value in enumerate(state.identity)}
    with session.no_autoflush:
        result = session.connection().execute(statement, params)
    if result.rowcount != 1:
        expected = ", ".join(f"{name}={value}" for name, value in guards.items())
        raise ConcurrentChange(
            f"{table.__tablename__} {state.identity[0]} changed under us (expected {expected})"
        )
    for name, value in changes.items():
        set_committed_value(row, name, value)


@functools.cache
def _guarded_update_statement(
    table: Any, changed: tuple[str, ...], guarded: tuple[str, ...], null_guards: frozenset[str]
) -> Any:
    """The UPDATE of one shape (table, columns written, columns guarded), built once and
    bound per call: building it anew cost more CPU than sending it (bench/draft_overhead.py)."""
    columns = table.__table__.c
    keys = table.__table__.primary_key
    where = [column == sa.bindparam(f"pk_{i}") for i, column in enumerate(keys)]
    where += [
        columns[n].is_(None) if n in null_guards else columns[n] == sa.bindparam(f"was_{n}")
        for n in guarded
    ]
    return (
        sa.update(table.__table__)
        .where(*where)
        .values({columns[n]: sa.bindparam(f"new_{n}", type_=columns[n].type) for n in changed})
    )


def guarded_delete(session: Session, row: SQLModel, **guards: Any) -> bool:
    """Delete `row` only if it still holds `guards`; False (nothing deleted) otherwise."""
    state = sa.inspect(row)
    table: Any = type(row)
    where = [column == state.identity[i] for i, column in enumerate(state.mapper.primary_key)]
    with session.no_autoflush:
        result = session.execute(
            sa.delete(table)
            .where(*where, *_conditions(table, guards))
            .execution_options(synchronize_session=False)
        )
    if result.rowcount != 1:  # type: ignore[attr-defined]
        return False
    session.expunge(row)
    return True


def _conditions(table: Any, guards: dict[str, Any]) -> list[Any]:
    return [
        getattr(table, name).is_(None) if value is None else getattr(table, name) == value
        for name, value in guards.items()
    ]


def move_run(
    session: Session,
    run: RunRow,
    target: RunState,
    *,
    actor: str,
    at: datetime,
    reason: str | None = None,
    detail: str | None = None,
    decision: Decided | None = None,
) -> None:
    """`reason` is stored on the run (an enum value where there is one); `detail`, a
    sentence for people, goes to the event row instead when given."""
    current = RunState(as_read(run, "state"))
    check_run(current, target)
    run.state = target
    run.reason = reason
    run.updated_at = at
    guarded_update(session, run, state=current)
    why = detail or reason
    _row_event(session, run, current, target, actor=actor, at=at, reason=why, decision=decision)


def move_draft(
    session: Session,
    draft: DraftRow,
    target: DraftState,
    *,
    actor: str,
    at: datetime,
    reason: str | None = None,
    decision: Decided | None = None,
) -> None:
    """A claimed draft moves only while its claim is still held by the owner who read it."""
    current = DraftState(as_read(draft, "state"))
    check_draft(current, target)
    draft.state = target
    draft.updated_at = at
    guards: dict[str, Any] = {"state": current}
    if current == DraftState.CLAIMED:
        guards["claimed_by"] = as_read(draft, "claimed_by")
    guarded_update(session, draft, **guards)
    _row_event(
        session, draft, current, target, actor=actor, at=at, reason=reason, decision=decision
    )


def move_effect(
    session: Session,
    effect: EffectRow,
    target: EffectState,
    *,
    actor: str,
    at: datetime,
    run_id: str | None = None,
    reason: str | None = None,
) -> None:
    """A receipt moves only from the state and owner it was read with (fencing)."""
    current = EffectState(as_read(effect, "state"))
    check_effect(current, target)
    effect.state = target
    effect.detail = reason
    effect.updated_at = at
    guarded_update(session, effect, state=current, claimed_by=as_read(effect, "claimed_by"))
    record_event(
        session,
        subject=EventSubject.EFFECT,
        subject_id=effect.key,
        run_id=run_id,
        from_state=current,
        to_state=target,
        actor=actor,
        at=at,
        reason=reason,
        step=effect.step,
    )


def note_draft(
    session: Session,
    draft: DraftRow,
    *,
    actor: str,
    at: datetime,
    reason: str,
    decision: Decided | None = None,
) -> None:
    """History for a draft whose state stays as it is (an edit, a claim taken over)."""
    state = draft.state
    _row_event(session, draft, state, state, actor=actor, at=at, reason=reason, decision=decision)


def note_released(
    session: Session, draft: DraftRow, *, actor: str, at: datetime, reason: str
) -> None:
    """History for a claim given back: its draft row is deleted (a retry may claim the
    same key again), so the event names `released` rather than a draft state."""
    _row_event(session, draft, DraftState.CLAIMED, RELEASED, actor=actor, at=at, reason=reason)


def note_run(
    session: Session,
    run: RunRow,
    *,
    actor: str,
    at: datetime,
    reason: str,
    decision: Decided | None = None,
) -> None:
    """History for a run whose state stays as it is: queued, a refusal the state machine
    cannot show, a person's retry before its claim. Like every event, it leaves the run in
    the state it names, so the history replays to the stored state."""
    state = run.state
    _row_event(session, run, state, state, actor=actor, at=at, reason=reason, decision=decision)


def _row_event(
    session: Session,
    row: RunRow | DraftRow,
    from_state: str,
    to_state: str,
    *,
    actor: str,
    at: datetime,
    reason: str | None,
    decision: Decided | None = None,
) -> None:
    """A run's or a draft's event: whose it is and which run follow from the row."""
    if isinstance(row, RunRow):
        subject, subject_id, run_id = EventSubject.RUN, row.id, row.id
    else:
        subject, subject_id, run_id = EventSubject.DRAFT, row.key, row.run_id
    record_event(
        session,
        subject=subject,
        subject_id=subject_id,
        run_id=run_id,
        from_state=from_state,
        to_state=to_state,
        actor=actor,
        at=at,
        reason=reason,
        decision=decision,
    )
