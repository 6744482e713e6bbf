"""The review queue seen from the domain: drafts waiting for people, and their expiry.

A draft is reviewable while it is `ready`; it leaves the queue when people decide or
when its review window passes (DESIGN.md §4.7). Knows nothing of Slack.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlmodel import col, select

from core.config import Config
from core.history import move_draft, move_run
from core.models import DraftRow, RunRow
from core.ports import Clock
from core.states import DraftState, RunState
from core.store import Store

EXPIRY_ACTOR = "expiry"


@dataclass(frozen=True)
class ExpiredDraft:
    key: str
    run_id: str
    recipe: str


def expire_overdue_drafts(store: Store, config: Config, clock: Clock) -> list[ExpiredDraft]:
    """Ready drafts older than their recipe's review_window become `expired`."""
    expired: list[ExpiredDraft] = []
    with store.transaction() as session:
        now = clock.now()
        ready = session.exec(
            select(DraftRow).where(col(DraftRow.state) == DraftState.READY).with_for_update()
        ).all()
        for draft in ready:
            recipe = config.recipes.get(draft.recipe)
            if recipe is None or draft.ready_at is None:
                continue  # a recipe removed from the file keeps its drafts until it returns
            if now - draft.ready_at < recipe.review_window:
                continue
            why = f"not reviewed within review_window ({recipe.review_window})"
            move_draft(session, draft, DraftState.EXPIRED, actor=EXPIRY_ACTOR, at=now, reason=why)
            run = session.exec(select(RunRow).where(col(RunRow.id) == draft.run_id)).one()
            if run.state == RunState.AWAITING_REVIEW and run.draft_key == draft.key:
                move_run(session, run, RunState.EXPIRED, actor=EXPIRY_ACTOR, at=now, detail=why)
            expired.append(ExpiredDraft(draft.key, draft.run_id, draft.recipe))
    return expired
