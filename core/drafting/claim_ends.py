"""How a claim on a slot's draft ends, in the rows: the claimed draft takes the model's
text and becomes ready (or is stored cancelled or superseded, the paid answer never
thrown away), the slot's older drafts leave the queue, or the claim is given back and
its run closed (in a transaction of its own). Each acts only under a claim still ours;
nothing here calls the model.
"""

from __future__ import annotations

import functools
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlmodel import Session, col, select

from core.drafting.claims import Claim, DraftResult
from core.drafting.similarity import Match, note_similarity
from core.drafting_policies import DraftOutcome
from core.errors import LostClaim
from core.identity import text_hash
from core.models import DraftRow, EffectRow, RecipeRow, RunRow
from core.policies import EffectStep, FailReason, SkipReason
from core.ports import Clock, ModelReply
from core.post_body import ImageRef
from core.sources.snapshot import Snapshot
from core.states import DraftState, EffectState, RunState
from core.store.engine import Store
from core.store.leases import DRAFT_CLAIMS, hold
from core.store.rows import lock_draft, lock_run, required, run_holds
from core.store.transitions import guarded_delete, move_draft, move_run, note_released, note_run

CANCELLED_WHILE_DRAFTED = "its run was cancelled while it was drafted"


def make_ready(
    session: Session,
    draft: DraftRow,
    run: RunRow,
    recipe_row: RecipeRow,
    claim: Claim,
    reply: ModelReply,
    seen: Match | None,
    now: datetime,
) -> str | None:
    """The claimed draft takes the model's text and becomes ready, and its run awaits
    review; or it is stored cancelled or superseded, with a detail saying why."""
    draft.text, draft.text_hash, draft.revision = reply.text, text_hash(reply.text), 1
    draft.model, draft.ready_at = reply.model, now
    draft.input_tokens, draft.output_tokens = reply.input_tokens, reply.output_tokens
    hold(draft, DRAFT_CLAIMS, None, None)
    cancelled = run.state == RunState.CANCELLED  # a person cancelled it meanwhile
    superseded = not cancelled and draft.version < recipe_row.version
    if not cancelled and not superseded:
        note_similarity(session, draft, seen)  # written by the same UPDATE as the state
    move_draft(
        session,
        draft,
        DraftState.CANCELLED if cancelled else DraftState.READY,
        actor=claim.owner,
        at=now,
        reason=CANCELLED_WHILE_DRAFTED if cancelled else None,
    )
    if cancelled:
        return f"stored as cancelled: {CANCELLED_WHILE_DRAFTED}"
    if superseded:
        return _store_superseded(session, draft, run, recipe_row, claim, now)
    if not claim.opened_run:  # a run opened by this claim has no other draft
        _supersede_older_drafts(session, claim, claim.owner, now)
    move_run(session, run, RunState.AWAITING_REVIEW, actor=claim.owner, at=now)
    return None


def _store_superseded(
    session: Session,
    draft: DraftRow,
    run: RunRow,
    recipe_row: RecipeRow,
    claim: Claim,
    now: datetime,
) -> str:
    """The recipe was bumped while this draft was written: keep the paid answer as
    superseded, and give the run back to the dispatcher for the new version."""
    why = f"recipe bumped to v{recipe_row.version} while this draft was written"
    move_draft(session, draft, DraftState.SUPERSEDED, actor=claim.owner, at=now, reason=why)
    if run_holds(run, claim.draft_key, RunState.RUNNING):
        run.manual = True  # a person bumped it: drafted again at the new version
        move_run(session, run, RunState.PENDING, actor=claim.owner, at=now, reason=why)
    else:
        note_run(session, run, actor=claim.owner, at=now, reason=f"{claim.draft_key}: {why}")
    return f"stored as superseded: {why}"


def kept_images(snapshot: Snapshot | None) -> tuple[ImageRef, ...]:
    """The images a drafted body goes with: those its run's snapshot kept, in the items'
    order, each once and without alt text (so Approve is refused until someone, or the
    model, describes it)."""
    found = (item.image for item in snapshot.items) if snapshot is not None else ()
    kept = {
        image.sha256: ImageRef(image.sha256, image.name)
        for image in found
        if image and image.sha256
    }
    return tuple(kept.values())


def own_claim(session: Session, claim: Claim) -> DraftRow:
    """The claimed draft row, locked, if it is still ours; else LostClaim."""
    return still_ours(lock_draft(session, claim.draft_key), claim)


def still_ours(draft: DraftRow | None, claim: Claim) -> DraftRow:
    """`draft` (as read, locked) if it is still claimed by `claim`'s owner; else LostClaim."""
    if draft is None or draft.state != DraftState.CLAIMED or draft.claimed_by != claim.owner:
        raise _lost(claim)
    return draft


def _lost(claim: Claim) -> LostClaim:
    return LostClaim(f"claim on {claim.draft_key} is no longer held by {claim.owner}")


def locked_run(session: Session, run_id: str) -> RunRow:
    return required(lock_run(session, run_id), f"run {run_id}")


def _supersede_older_drafts(session: Session, claim: Claim, actor: str, now: datetime) -> None:
    """The slot's earlier drafts leave the queue. One whose publication was already sent
    to a target (or may have been: in flight, uncertain) stays as it is, approved or sent
    back to review, so the send is recorded when its outcome comes and its other targets
    still get the same text: a send is never disowned."""
    params = {"run_id": claim.run_id, "draft_key": claim.draft_key}
    older = session.exec(_older_drafts_statement(), params=params).all()
    for draft in older:
        move_draft(
            session, draft, DraftState.SUPERSEDED, actor=actor, at=now, reason=claim.draft_key
        )


@functools.cache
def _older_drafts_statement() -> Any:
    """Built once, bound per call (every stored draft asks it: bench/draft_overhead.py)."""
    sent = sa.exists().where(
        col(EffectRow.draft_key) == col(DraftRow.key),
        col(EffectRow.step) == EffectStep.PUBLISH,
        col(EffectRow.state) != EffectState.FAILED,
    )
    return (
        select(DraftRow)
        .where(
            col(DraftRow.run_id) == sa.bindparam("run_id"),
            col(DraftRow.key) != sa.bindparam("draft_key"),
            col(DraftRow.state).in_([DraftState.READY, DraftState.APPROVED]),
            ~sent,  # a ready draft may have been sent already: sent back to review
        )
        .order_by(col(DraftRow.key))
    )


def give_back(
    store: Store,
    clock: Clock,
    claim: Claim,
    closed: RunState,
    reason: FailReason | SkipReason,
    detail: str,
    outcome: DraftOutcome,
) -> DraftResult:
    """Give the claim back and close its run as `closed` (failed, or skipped before
    any model call), with a readable reason."""
    with store.transaction() as session:
        run = locked_run(session, claim.run_id)  # run, then draft: core/store/rows.py
        draft = own_claim(session, claim)
        if not guarded_delete(session, draft, state=DraftState.CLAIMED, claimed_by=claim.owner):
            raise LostClaim(f"claim on {claim.draft_key} is no longer held by {claim.owner}")
        now = clock.now()
        note_released(session, draft, actor=claim.owner, at=now, reason=f"{closed}: {reason}")
        if run_holds(run, claim.draft_key, RunState.RUNNING):
            move_run(
                session,
                run,
                closed,
                actor=claim.owner,
                at=now,
                reason=reason,
                detail=detail,
            )
        else:
            note_run(session, run, actor=claim.owner, at=now, reason=f"{reason}: {detail}")
    return DraftResult(outcome, claim.run_id, claim.draft_key, reason, detail)
