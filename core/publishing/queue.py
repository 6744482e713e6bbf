"""Which publications need a pass: found through indexes on what is pending, never by
reading every run ever published. Each query reads one bounded batch inside
the caller's read-only transaction and writes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa
from sqlmodel import Session, col, select

from core.models import DraftRow, EffectRow, RunRow, unsettled_receipt
from core.policies import EffectStep
from core.states import RUN_PUBLISHABLE_STATES, RunState

PUBLISHABLE = RUN_PUBLISHABLE_STATES  # the name core/publishing/service.py imports
PUBLISH_BATCH = 100  # rows one reconciler pass takes on; the rest wait for the next, 2 s on


SENDING = sorted(PUBLISHABLE - {RunState.APPROVED})  # publishing or uncertain: under way


def publishable(session: Session, now: datetime) -> Sequence[tuple[str, str]]:
    """(run id, recipe) of runs a publish pass takes up: approved runs whose time has come,
    earliest first (ix_runs_publish_due: approved runs waiting for their slot cost
    nothing until it comes), then those under way, oldest slot first (ix_runs_state_slot)."""
    due = session.exec(
        select(RunRow.id, RunRow.recipe)
        .where(col(RunRow.state) == RunState.APPROVED, col(RunRow.publish_at) <= now)
        .order_by(col(RunRow.publish_at))
        .limit(PUBLISH_BATCH)
    ).all()
    under_way = session.exec(
        select(RunRow.id, RunRow.recipe)
        .where(col(RunRow.state).in_(SENDING))
        .order_by(col(RunRow.state), col(RunRow.slot_at))
        .limit(PUBLISH_BATCH)
    ).all()
    return [*due, *under_way]


@dataclass(frozen=True)
class OrphanedSend:
    """A send whose outcome is unknown and whose run no longer publishes it (cancelled,
    or moved on to another draft): looked up until known, never sent again."""

    effect_key: str
    draft_key: str
    text: str
    run_id: str
    recipe: str
    since: datetime  # when its receipt was first written: a look-up reads posts from here

    def __str__(self) -> str:
        return self.effect_key


def orphaned_sends(session: Session, now: datetime) -> list[OrphanedSend]:
    """Uncertain publish receipts, and in-flight ones whose holder stopped beating, that
    no publish pass will look at (ix_effects_unsettled)."""
    rows = session.execute(
        sa.select(
            col(EffectRow.key),
            col(DraftRow.key),
            col(DraftRow.text),
            col(RunRow.id),
            col(RunRow.recipe),
            col(EffectRow.created_at),
        )
        .join(DraftRow, col(DraftRow.key) == col(EffectRow.draft_key))
        .join(RunRow, col(RunRow.id) == col(DraftRow.run_id))
        .where(
            unsettled_receipt(EffectStep.PUBLISH),
            sa.or_(col(EffectRow.lease_until).is_(None), col(EffectRow.lease_until) <= now),
            sa.or_(
                col(RunRow.state).not_in(PUBLISHABLE),
                col(RunRow.draft_key) != col(EffectRow.draft_key),
            ),
        )
        .limit(PUBLISH_BATCH)
    ).all()
    return [
        OrphanedSend(key, draft, text or "", run, recipe, since)
        for key, draft, text, run, recipe, since in rows
    ]
