"""Operator reads over a long history: pages by an indexed key and indexed counts.

Keyset paging (newest slot first): a page starts below the last run of the previous
one, so page 1,000 costs what page 1 costs. Read-only: callers pass a `Store.read()`
session.
"""

from __future__ import annotations

from collections.abc import Collection

import sqlalchemy as sa
from sqlmodel import Session, col, select

from core.errors import UnknownRun
from core.models import DraftRow, RunRow
from core.store.conditions import waiting_for_review


def after_run(session: Session, before: str) -> sa.ColumnElement[bool]:
    """Runs after `before` in newest-first order: (slot_at, id) below its own."""
    anchor = session.exec(select(RunRow.slot_at).where(col(RunRow.id) == before)).first()
    if anchor is None:
        raise UnknownRun(f"no run {before!r}: --before takes a run id from a previous page")
    return sa.tuple_(col(RunRow.slot_at), col(RunRow.id)) < sa.tuple_(anchor, before)


def ready_counts(session: Session, recipes: Collection[str] | None = None) -> dict[str, int]:
    """Drafts waiting for review (`ready`) per recipe, of `recipes` or of all, in one
    indexed count; a recipe with none is absent, and the total is the sum. The one count
    of the review queue: backpressure notices, the Home tab and the gauge read it (status
    counts the same through Core: core/api/status_read.py)."""
    query = select(DraftRow.recipe, sa.func.count()).where(waiting_for_review(col(DraftRow.state)))
    if recipes is not None:
        query = query.where(col(DraftRow.recipe).in_(recipes))
    rows = session.exec(query.group_by(col(DraftRow.recipe))).all()
    return {recipe: int(count) for recipe, count in rows}
