"""A run or a draft as the database holds it now, read in a transaction of its own: for
tests that look at rows after acting. A missing row fails the test (`.one()`)."""

from __future__ import annotations

from sqlmodel import col, select

from core.models import DraftRow, RunRow
from core.store.engine import Store


def run_row(store: Store, run_id: str) -> RunRow:
    with store.transaction() as session:
        return session.exec(select(RunRow).where(col(RunRow.id) == run_id)).one()


def draft_row(store: Store, key: str) -> DraftRow:
    with store.transaction() as session:
        return session.exec(select(DraftRow).where(col(DraftRow.key) == key)).one()
