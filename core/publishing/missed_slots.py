"""Slots that passed without a publication (docs/design.md §23): a draft nobody approved by
its slot plus publish_late expires (`missed_slot`), its message saying so; an approved one
found later than that is not published late but fails (`missed_slot`) and people are
told, with Retry / Cancel. Never publishes anything itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlmodel import Session, col, select

from core.failpoints import Failpoint, failpoint
from core.identity import POST_MARK, RUN_MARK, recipe_of_run
from core.models import DraftRow, RunRow
from core.policies import ExpiryReason, FailReason
from core.ports import Clock
from core.setup.config import Config, Recipe
from core.setup.durations import format_duration
from core.slots.publish_time import ahead, missed_its_time, publication_label, review_deadline
from core.states import DraftState, RunState
from core.store.engine import Store
from core.store.leases import lease_now
from core.store.rows import lock_draft, lock_run, run_holds
from core.store.transitions import move_draft, move_run

MISSED_ACTOR = "expiry"
MISSED_BATCH = 1000  # ready drafts one pass reads, oldest first (as review expiry)


@dataclass(frozen=True)
class MissedDraft:
    key: str
    run_id: str
    recipe: str


def missed_slot_note(recipe: Recipe, slot_at: datetime) -> str:
    """The sentence a missed slot is recorded and shown with."""
    label = publication_label(slot_at, recipe.zone)
    return (
        f"Not approved by its publication time, {label}, "
        f"plus publish_late ({format_duration(recipe.publish_late)})."
    )


def expire_missed_slots(store: Store, config: Config, clock: Clock) -> list[MissedDraft]:
    """Ready drafts of recipes drafting ahead whose slot plus publish_late has passed become
    `expired`, their runs `expired` with reason `missed_slot`. Reads the review queue only
    (ix_drafts_ready, joined to each draft's run by key)."""
    if not any(ahead(recipe) for recipe in config.recipes.values()) and not _any_post(store):
        return []  # no recipe drafts ahead and no person's post waits: nothing can miss
    with store.read() as session:
        now = lease_now(session, clock)  # the database's clock judges stored times
        waiting = session.exec(
            select(DraftRow.key, DraftRow.run_id, RunRow.slot_at, RunRow.slot_wall)
            .join(RunRow, col(RunRow.id) == col(DraftRow.run_id))
            .where(col(DraftRow.state) == DraftState.READY)
            .order_by(col(DraftRow.ready_at))
            .limit(MISSED_BATCH)
        ).all()
    due = sorted(  # draft-key order, run then draft each (core/store/rows.py)
        (key, run_id)
        for key, run_id, slot_at, wall in waiting
        if _past_deadline(config.recipes.get(recipe_of_run(run_id)), slot_at, now, run_id, wall)
    )
    missed: list[MissedDraft] = []
    if not due:
        return missed  # nothing missed: no write lock taken
    failpoint(Failpoint.MISSED_AFTER_READ)  # tests: a click between the read and the write
    with store.transaction() as session:
        now = lease_now(session, clock)  # the database's clock judges stored times
        for key, run_id in due:
            found = _expire_one(session, config, key, run_id, now)
            if found is not None:
                missed.append(found)
    return missed


def _any_post(store: Store) -> bool:
    """Whether a person's post with a time waits for review (docs/design.md §37): one
    probe of the review queue's index."""
    with store.read() as session:
        found = session.exec(
            select(DraftRow.key)
            .where(
                col(DraftRow.state) == DraftState.READY,
                col(DraftRow.run_id).contains(f"{RUN_MARK}{POST_MARK}", autoescape=True),
            )
            .limit(1)
        ).first()
    return found is not None


def _past_deadline(
    recipe: Recipe | None, slot_at: datetime, now: datetime, run: str = "", wall: str = ""
) -> bool:
    deadline = None if recipe is None else review_deadline(recipe, slot_at, run, wall)
    return deadline is not None and now > deadline


def _expire_one(
    session: Session, config: Config, key: str, run_id: str, now: datetime
) -> MissedDraft | None:
    """One draft, re-read under its locks: decided, edited away or expired since the read
    changes nothing (the moves name the states they leave)."""
    run, draft = lock_run(session, run_id), lock_draft(session, key)
    if run is None or draft is None or draft.state != DraftState.READY:
        return None
    recipe = config.recipes.get(draft.recipe)
    if recipe is None or not _past_deadline(recipe, run.slot_at, now, run.id, run.slot_wall):
        return None
    expire_missed(session, recipe, draft, run, now)
    return MissedDraft(draft.key, draft.run_id, draft.recipe)


def expire_missed(
    session: Session, recipe: Recipe, draft: DraftRow, run: RunRow, now: datetime
) -> None:
    """A ready draft past its slot plus publish_late expires (`missed_slot`), its run too
    while it still waits on this draft; the caller holds both rows' locks. The pass and a
    click that comes too late (`review/queue.py`) both end a missed draft here."""
    why = missed_slot_note(recipe, run.slot_at)
    draft.decision_reason = why
    move_draft(session, draft, DraftState.EXPIRED, actor=MISSED_ACTOR, at=now, reason=why)
    if run_holds(run, draft.key, RunState.AWAITING_REVIEW):
        move_run(
            session,
            run,
            RunState.EXPIRED,
            actor=MISSED_ACTOR,
            at=now,
            reason=ExpiryReason.MISSED_SLOT,
            detail=why,
        )


def miss_its_time(session: Session, recipe: Recipe, run: RunRow, now: datetime) -> bool:
    """An approved run found later than its slot plus publish_late (the bot was down at
    the slot): it fails with `missed_slot` instead of going out late, and its draft stays
    approved, so a person may still Retry (published once, at once) or Cancel it. True
    when it was failed; the caller holds the run's lock."""
    if not missed_its_time(recipe, run.slot_at, now, run.id, run.slot_wall):
        return False
    why = missed_slot_note(recipe, run.slot_at).replace("Not approved", "Approved, not published")
    move_run(
        session,
        run,
        RunState.FAILED,
        actor=MISSED_ACTOR,
        at=now,
        reason=FailReason.MISSED_SLOT,
        detail=why,
    )
    return True
