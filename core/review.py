"""The review queue seen from the domain: drafts waiting for people, and their expiry.

A draft is reviewable while it is `ready`; it leaves the queue when people decide or
when its review window passes (DESIGN.md §4.7). Knows nothing of Slack.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlmodel import Session, col, select

from core.config import Config
from core.history import move_draft, move_run, note_draft
from core.identity import text_hash
from core.models import DraftRow, RecipeRow, RunRow
from core.policies import Verdict
from core.ports import Clock, ReviewItem
from core.revisions import keep_revisions
from core.rows import lock_draft, lock_run, run_of_draft
from core.states import DraftState, RunState
from core.store import Store

EXPIRY_ACTOR = "expiry"
EXPIRY_BATCH = 1000  # ready drafts one pass reads, oldest first


def _overdue(config: Config, recipe: str, ready_at: datetime | None, now: datetime) -> bool:
    found = config.recipes.get(recipe)
    return found is not None and ready_at is not None and now - ready_at >= found.review_window


@dataclass(frozen=True)
class ExpiredDraft:
    key: str
    run_id: str
    recipe: str


def expire_overdue_drafts(store: Store, config: Config, clock: Clock) -> list[ExpiredDraft]:
    """Ready drafts older than their recipe's review_window become `expired`."""
    expired: list[ExpiredDraft] = []
    with store.read() as session:  # ix_drafts_ready: the review queue, not the history
        now = clock.now()
        waiting = session.exec(
            select(DraftRow.key, DraftRow.run_id, DraftRow.recipe, DraftRow.ready_at)
            .where(col(DraftRow.state) == DraftState.READY)
            .order_by(col(DraftRow.ready_at))
            .limit(EXPIRY_BATCH)
        ).all()
    overdue = sorted(  # draft-key order, run then draft each (core/rows.py)
        (key, run_id)
        for key, run_id, name, ready_at in waiting
        if _overdue(config, name, ready_at, now)
    )
    if not overdue:
        return expired  # nothing to expire: no write lock taken
    with store.transaction() as session:
        now = clock.now()
        for key, run_id in overdue:
            run, draft = lock_run(session, run_id), lock_draft(session, key)
            if run is None or draft is None or draft.state != DraftState.READY:
                continue  # decided, bumped or expired since the read
            recipe = config.recipes.get(draft.recipe)
            if recipe is None or draft.ready_at is None:
                continue  # a recipe removed from the file keeps its drafts until it returns
            if now - draft.ready_at < recipe.review_window:
                continue
            why = f"not reviewed within review_window ({recipe.review_window})"
            move_draft(session, draft, DraftState.EXPIRED, actor=EXPIRY_ACTOR, at=now, reason=why)
            if run.state == RunState.AWAITING_REVIEW and run.draft_key == draft.key:
                move_run(session, run, RunState.EXPIRED, actor=EXPIRY_ACTOR, at=now, detail=why)
            expired.append(ExpiredDraft(draft.key, draft.run_id, draft.recipe))
    return expired


@dataclass(frozen=True)
class ReviewAnswer:
    """What a click came to: whether it counted, and a sentence for the person."""

    accepted: bool
    message: str
    item: ReviewItem | None = None


def review_item(draft: DraftRow, run: RunRow) -> ReviewItem:
    return ReviewItem(
        draft_key=draft.key,
        run_id=draft.run_id,
        state=draft.state,
        revision=draft.revision,
        text=draft.text or "",
        recipe=draft.recipe,
        platform=draft.platform,
        slot_at=run.slot_at,
        version=draft.version,
        model=draft.model,
        input_tokens=draft.input_tokens,
        output_tokens=draft.output_tokens,
        decided_by=draft.decided_by,
        decided_at=draft.decided_at,
        decision_reason=draft.decision_reason,
    )


def load_item(store: Store, draft_key: str) -> ReviewItem | None:
    with store.transaction() as session:
        draft = session.exec(select(DraftRow).where(col(DraftRow.key) == draft_key)).one_or_none()
        if draft is None:
            return None
        run = session.exec(select(RunRow).where(col(RunRow.id) == draft.run_id)).one()
        return review_item(draft, run)


def decide(
    store: Store,
    config: Config,
    clock: Clock,
    *,
    draft_key: str,
    revision: int,
    verdict: Verdict,
    user: str,
    permitted: bool,
    reason: str | None = None,
) -> ReviewAnswer:
    """Approve or reject one exact revision, fresh, once (DESIGN.md §4.6).

    Every check and the decision happen in one transaction with the draft row locked,
    so two people clicking at once produce one decision and the other is told who won.
    """
    if not permitted:
        return ReviewAnswer(False, "You are not one of this Galley's approvers.")
    with store.transaction() as session:
        now = clock.now()
        found = _locked_draft(session, draft_key)
        if found is None:
            return ReviewAnswer(False, "This draft no longer exists.")
        draft, run, recipe_row = found
        refusal = _stale(draft, recipe_row, revision, config, now)
        if refusal is not None:
            if refusal == _WINDOW_PASSED:
                _expire(session, draft, run, now)
            return ReviewAnswer(False, refusal, review_item(draft, run))
        draft.decided_by, draft.decided_at, draft.decision_reason = user, now, reason
        target = DraftState.APPROVED if verdict == Verdict.APPROVED else DraftState.REJECTED
        move_draft(session, draft, target, actor=user, at=now, reason=reason)
        _close_run(session, run, verdict, config, user, now, reason)
        return ReviewAnswer(True, f"{verdict.capitalize()}.", review_item(draft, run))


def edit(
    store: Store,
    config: Config,
    clock: Clock,
    *,
    draft_key: str,
    revision: int,
    text: str,
    user: str,
    permitted: bool,
) -> ReviewAnswer:
    """Save a person's edit as a new revision; approvals bind to revisions, so older
    buttons stop counting."""
    if not permitted:
        return ReviewAnswer(False, "You are not one of this Galley's approvers.")
    if not text.strip():
        return ReviewAnswer(False, "An empty draft cannot be saved; reject it instead.")
    with store.transaction() as session:
        now = clock.now()
        found = _locked_draft(session, draft_key)
        if found is None:
            return ReviewAnswer(False, "This draft no longer exists.")
        draft, run, recipe_row = found
        refusal = _stale(draft, recipe_row, revision, config, now)
        if refusal is not None:
            return ReviewAnswer(False, refusal, review_item(draft, run))
        keep_revisions(session, draft, new_text=text, editor=user, at=now)
        draft.text, draft.text_hash, draft.revision = text, text_hash(text), draft.revision + 1
        draft.decision_reason = None  # a notice about the old revision no longer applies
        draft.updated_at = now
        session.add(draft)
        note_draft(session, draft, actor=user, at=now, reason=f"edited: revision {draft.revision}")
        return ReviewAnswer(True, f"Saved as revision {draft.revision}.", review_item(draft, run))


_WINDOW_PASSED = "The review window for this draft has passed; it has expired."


def _locked_draft(session: Session, key: str) -> tuple[DraftRow, RunRow, RecipeRow] | None:
    """The draft, its run and its recipe row, all locked, recipe first (core/rows.py): a
    bump (which locks the recipe row too) happens wholly before or wholly after the
    decision, so an approval can never land on a draft the bump is superseding."""
    recipe = session.exec(select(DraftRow.recipe).where(col(DraftRow.key) == key)).one_or_none()
    run_id = run_of_draft(session, key)
    if recipe is None or run_id is None:
        return None
    recipe_row = session.exec(
        select(RecipeRow).where(col(RecipeRow.name) == recipe).with_for_update()
    ).one()
    run, draft = lock_run(session, run_id), lock_draft(session, key)
    assert run is not None and draft is not None  # drafts and runs are never deleted here
    return draft, run, recipe_row


def _stale(
    draft: DraftRow, recipe_row: RecipeRow, revision: int, config: Config, now: datetime
) -> str | None:
    """Why a click on this revision no longer counts, or None if it still does."""
    if draft.state in (DraftState.APPROVED, DraftState.REJECTED, DraftState.PUBLISHED):
        verb = "published" if draft.state == DraftState.PUBLISHED else draft.state
        who = f"<@{draft.decided_by}>" if draft.decided_by else "someone"
        return f"Already {verb} by {who}."
    if draft.state != DraftState.READY:
        return f"This draft is {draft.state}; there is nothing to decide."
    if draft.revision != revision:
        return f"The draft was edited since (now revision {draft.revision}); review the new text."
    if draft.version != recipe_row.version:
        return f"The recipe was bumped to v{recipe_row.version} since this draft was written."
    recipe = config.recipes.get(draft.recipe)
    if recipe is not None and draft.ready_at and now - draft.ready_at >= recipe.review_window:
        return _WINDOW_PASSED
    return None


def _expire(session: Session, draft: DraftRow, run: RunRow, now: datetime) -> None:
    move_draft(session, draft, DraftState.EXPIRED, actor=EXPIRY_ACTOR, at=now)
    if run.state == RunState.AWAITING_REVIEW and run.draft_key == draft.key:
        move_run(session, run, RunState.EXPIRED, actor=EXPIRY_ACTOR, at=now)


def _close_run(
    session: Session,
    run: RunRow,
    verdict: Verdict,
    config: Config,
    user: str,
    now: datetime,
    reason: str | None,
) -> None:
    if verdict == Verdict.REJECTED:
        move_run(session, run, RunState.REJECTED, actor=user, at=now, detail=reason)
        return
    move_run(session, run, RunState.APPROVED, actor=user, at=now)
    recipe = config.recipes.get(run.recipe)
    if recipe is not None and recipe.publish is None:  # nothing to publish: approval ends it
        move_run(session, run, RunState.SUCCEEDED, actor=user, at=now, detail="no publish target")
