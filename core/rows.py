"""Row look-ups and locks, in the one order every transaction takes them.

Lock order: recipe → run → draft → effect. A transaction that locks more than one of
them takes them in this order; one that changes several drafts goes in draft-key order
(each draft's run just before it). Then two transactions never wait on each other in a
circle, which PostgreSQL would end by aborting one ("deadlock detected"). SQLite takes
its one write lock at BEGIN IMMEDIATE.
"""

from __future__ import annotations

from sqlmodel import Session, col, select

from core.models import DraftRow, RunRow


def run_row(session: Session, run_id: str) -> RunRow | None:
    """A run as it is now, unlocked (a guarded write re-checks what it changes)."""
    return session.exec(select(RunRow).where(col(RunRow.id) == run_id)).one_or_none()


def lock_run(session: Session, run_id: str) -> RunRow | None:
    """A run, locked for this transaction (read fresh under READ COMMITTED)."""
    return session.exec(
        select(RunRow).where(col(RunRow.id) == run_id).with_for_update()
    ).one_or_none()


def lock_draft(session: Session, key: str) -> DraftRow | None:
    """A draft, locked for this transaction; lock its run first when you need both."""
    return session.exec(
        select(DraftRow).where(col(DraftRow.key) == key).with_for_update()
    ).one_or_none()


def run_of_draft(session: Session, key: str) -> str | None:
    """The run a draft belongs to (a draft never moves to another run: no lock needed)."""
    return session.exec(select(DraftRow.run_id).where(col(DraftRow.key) == key)).one_or_none()
