"""Row look-ups and locks by key, in the one order every transaction takes them.

Lock order: recipe → run → draft → effect. A transaction that locks more than one of
them takes them in this order; one that changes several drafts goes in draft-key order
(each draft's run just before it). Then two transactions never wait on each other in a
circle, which PostgreSQL would end by aborting one ("deadlock detected"). SQLite takes
its one write lock at BEGIN IMMEDIATE.

Each look-up answers None for a missing row; `required` is for a caller that knows the
row is there and must fail loudly if it is not. Queries over many rows stay with their
callers.
"""

from __future__ import annotations

from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.exc import NoResultFound
from sqlmodel import Session, SQLModel, col, select

from core.models import DraftRow, EffectRow, RecipeRow, RunRow
from core.states import RunState

Row = TypeVar("Row")
Table = TypeVar("Table", bound=SQLModel)


def required(row: Row | None, what: str) -> Row:
    """A row the caller knows exists; `NoResultFound` (what `.one()` raises) if it does not."""
    if row is None:
        raise NoResultFound(f"no {what} was found where one was required")
    return row


def recipe_row(session: Session, name: str) -> RecipeRow | None:
    """A recipe's row as it is now, unlocked."""
    return _by_key(session, RecipeRow, RecipeRow.name, name)


def lock_recipe(session: Session, name: str) -> RecipeRow | None:
    """A recipe's row, locked for this transaction (SQLite: BEGIN IMMEDIATE already is)."""
    return _by_key(session, RecipeRow, RecipeRow.name, name, locked=True)


def run_row(session: Session, run_id: str) -> RunRow | None:
    """A run as it is now, unlocked (a guarded write re-checks what it changes)."""
    return _by_key(session, RunRow, RunRow.id, run_id)


def lock_run(session: Session, run_id: str) -> RunRow | None:
    """A run, locked for this transaction (read fresh under READ COMMITTED)."""
    return _by_key(session, RunRow, RunRow.id, run_id, locked=True)


def draft_row(session: Session, key: str) -> DraftRow | None:
    """A draft as it is now, unlocked."""
    return _by_key(session, DraftRow, DraftRow.key, key)


def lock_draft(session: Session, key: str) -> DraftRow | None:
    """A draft, locked for this transaction; lock its run first when you need both."""
    return _by_key(session, DraftRow, DraftRow.key, key, locked=True)


def lock_draft_of(session: Session, run: RunRow) -> DraftRow | None:
    """The run's current draft, locked (lock the run first); None before it has one."""
    return None if run.draft_key is None else lock_draft(session, run.draft_key)


def run_holds(run: RunRow, draft_key: str, state: RunState) -> bool:
    """The run is still in `state` with `draft_key` as its current draft: the one condition
    under which a draft's move carries its run along (a run re-drafted, bumped or settled
    since has moved on, and a stale draft must not move it back)."""
    return run.state == state and run.draft_key == draft_key


def run_of_draft(session: Session, key: str) -> str | None:
    """The run a draft belongs to (a draft never moves to another run: no lock needed)."""
    return session.exec(select(DraftRow.run_id).where(col(DraftRow.key) == key)).one_or_none()


def effect_row(session: Session, key: str) -> EffectRow | None:
    """A receipt as it is now, unlocked."""
    return _by_key(session, EffectRow, EffectRow.key, key)


def lock_effect(session: Session, key: str) -> EffectRow | None:
    """A receipt, locked for this transaction: the last lock a transaction takes."""
    return _by_key(session, EffectRow, EffectRow.key, key, locked=True)


def _by_key(
    session: Session, table: type[Table], key: Any, value: str, *, locked: bool = False
) -> Table | None:
    """One row by its primary key; `locked` adds FOR UPDATE. The statement is built once
    per table and kind, and bound to `value` at each call: building it cost as much as
    sending it."""
    shape = (table, str(key), locked)
    query = _BY_KEY.get(shape)
    if query is None:
        query = select(table).where(col(key) == sa.bindparam(_KEY))
        query = _BY_KEY.setdefault(shape, query.with_for_update() if locked else query)
    result: Table | None = session.exec(query, params={_KEY: value}).one_or_none()
    return result


_KEY = "row_key"
_BY_KEY: dict[tuple[type[Any], str, bool], Any] = {}  # a dict's setdefault is thread-safe
