"""Unapprove (docs/design.md §23): an approved draft waiting for its publication time goes
back to review, until publishing starts, and never after.

Unapprove and the publish start both lock the run row and move it out of `approved` with
the state they leave in the WHERE clause, so exactly one of them wins: either the
publication goes ahead and the Unapprove is refused saying so, or nothing is published.
"""

from __future__ import annotations

from sqlmodel import Session, col, select

from core.drafting.revisions import renumber_revision
from core.failpoints import Failpoint, failpoint
from core.models import DraftRow, RunRow
from core.policies import DecisionKind, Refusal
from core.ports import Clock
from core.review.queue import ReviewAnswer, review_item
from core.setup.config import Config
from core.states import DraftState, RunState
from core.store.engine import Store
from core.store.leases import lease_now
from core.store.rows import lock_draft, lock_recipe, lock_run, required, run_holds
from core.store.transitions import Decided, move_draft, move_run

UNDER_WAY = (RunState.PUBLISHING, RunState.UNCERTAIN, RunState.SUCCEEDED)


def unapprove(
    store: Store,
    config: Config,
    clock: Clock,
    *,
    draft_key: str,
    revision: int,
    user: str,
    permitted: bool,
) -> ReviewAnswer:
    """Take back the approval of one revision: the draft is `ready` again as a new
    revision (so a button on the old message stops counting, and the message is rewritten
    each time it comes back), and the run `awaiting_review`, with no publication time."""
    if not permitted:
        return _refused(
            draft_key, Refusal.NOT_APPROVER, "You are not one of this Galley's approvers."
        )
    with store.transaction() as session:
        now = lease_now(session, clock)  # the database's clock judges stored times
        found = _locked(session, draft_key)
        if found is None:
            return _refused(draft_key, Refusal.GONE, "This draft no longer exists.")
        draft, run = found
        refusal = _why_not(draft, run, revision)
        if refusal is not None:
            reason, sentence = refusal
            return _refused(draft_key, reason, sentence, draft, run)
        failpoint(Failpoint.UNAPPROVE_READ)  # tests: the publish start racing this click
        why = f"unapproved by {user}"
        taken_back = Decided(DecisionKind.UNAPPROVE, draft.revision)  # the approved revision
        renumber_revision(session, draft, at=now)  # the same text, its author kept
        draft.decided_by = draft.decided_at = None
        draft.decision_reason = f"Back for review: approval taken back by {user}."
        draft.ready_at = now  # a full review window again, from now
        move_draft(
            session, draft, DraftState.READY, actor=user, at=now, reason=why, decision=taken_back
        )
        run.publish_at = None
        move_run(session, run, RunState.AWAITING_REVIEW, actor=user, at=now, detail=why)
        item = review_item(draft, run)
    return ReviewAnswer(True, "Unapproved: back for review.", draft_key, item)


def _locked(session: Session, key: str) -> tuple[DraftRow, RunRow] | None:
    """The recipe, run and draft rows locked in the one order (core/store/rows.py). Only their
    names are read first: a row loaded unlocked would not be read again by the lock."""
    names = session.exec(
        select(DraftRow.recipe, DraftRow.run_id).where(col(DraftRow.key) == key)
    ).one_or_none()
    if names is None:
        return None
    recipe, run_id = names
    lock_recipe(session, recipe)
    run = required(lock_run(session, run_id), "run")
    draft = required(lock_draft(session, key), "draft")
    return draft, run


def _why_not(draft: DraftRow, run: RunRow, revision: int) -> tuple[Refusal, str] | None:
    if draft.state == DraftState.PUBLISHED or (
        draft.state == DraftState.APPROVED and run.state in UNDER_WAY
    ):
        return (
            Refusal.PUBLISHING_STARTED,
            "Publishing has already started: it goes out as approved.",
        )
    if draft.state != DraftState.APPROVED or run.state != RunState.APPROVED:
        return (
            Refusal.NOT_APPROVED,
            f"This draft is {draft.state}: there is no approval to take back.",
        )
    if not run_holds(run, draft.key, RunState.APPROVED):
        return Refusal.NOT_APPROVED, "Its run has moved on to another draft."
    if draft.revision != revision:
        return Refusal.EDITED, f"The draft changed since (now revision {draft.revision})."
    return None


def _refused(
    key: str,
    refusal: Refusal,
    sentence: str,
    draft: DraftRow | None = None,
    run: RunRow | None = None,
) -> ReviewAnswer:
    item = review_item(draft, run) if draft is not None and run is not None else None
    return ReviewAnswer(False, sentence, key, item, refusal)
