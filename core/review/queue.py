"""The review queue seen from the domain: drafts waiting for people, and their expiry.

A draft is reviewable while it is `ready`; it leaves the queue when people decide or
when its review window passes (docs/design.md §11). Knows nothing of Slack.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import datetime

from sqlmodel import Session, col, select

from core.drafting.fit import FitRule
from core.drafting.revisions import keep_revisions
from core.failpoints import Failpoint, failpoint
from core.identity import post_id_of_run, text_hash
from core.models import DraftRow, RecipeRow, RunRow
from core.policies import DecisionKind, ExpiryReason, FollowUp, Refusal, Verdict
from core.ports import Clock, Directory, ReviewItem
from core.publishing.missed_slots import expire_missed, missed_slot_note
from core.publishing.targets import frozen_text, sends_begun
from core.review.approvals import approval_progress, count_approval, progress_sentence
from core.review.window import review_window_passed
from core.setup.config import Config
from core.slots.publish_time import missed_its_time, publish_at
from core.states import DRAFT_APPROVED_STATES, DraftState, RunState
from core.store.engine import Store
from core.store.leases import lease_now
from core.store.rows import (
    draft_row,
    lock_draft,
    lock_recipe,
    lock_run,
    required,
    run_holds,
    run_of_draft,
    run_row,
)
from core.store.transitions import Decided, move_draft, move_run, note_draft

EXPIRY_ACTOR = "expiry"
EXPIRY_BATCH = 1000  # ready drafts one pass reads, oldest first


@dataclass(frozen=True)
class ExpiredDraft:
    key: str
    run_id: str
    recipe: str


def expire_overdue_drafts(store: Store, config: Config, clock: Clock) -> list[ExpiredDraft]:
    """Ready drafts older than their recipe's review_window become `expired`."""
    expired: list[ExpiredDraft] = []
    with store.read() as session:  # ix_drafts_ready: the review queue, not the history
        now = lease_now(session, clock)  # the database's clock judges stored times
        waiting = session.exec(
            select(DraftRow.key, DraftRow.run_id, DraftRow.recipe, DraftRow.ready_at)
            .where(col(DraftRow.state) == DraftState.READY)
            .order_by(col(DraftRow.ready_at))
            .limit(EXPIRY_BATCH)
        ).all()
    overdue = sorted(  # draft-key order, run then draft each (core/store/rows.py)
        (key, run_id)
        for key, run_id, name, ready_at in waiting
        if review_window_passed(config.recipes.get(name), ready_at, now)
    )
    if not overdue:
        return expired  # nothing to expire: no write lock taken
    with store.transaction() as session:
        now = lease_now(session, clock)  # the database's clock judges stored times
        for key, run_id in overdue:
            run, draft = lock_run(session, run_id), lock_draft(session, key)
            if run is None or draft is None or draft.state != DraftState.READY:
                continue  # decided, bumped or expired since the read
            recipe = config.recipes.get(draft.recipe)
            if recipe is None or not review_window_passed(recipe, draft.ready_at, now):
                continue  # still in its window (a recipe removed from the file: kept)
            why = f"not reviewed within review_window ({recipe.review_window})"
            move_draft(session, draft, DraftState.EXPIRED, actor=EXPIRY_ACTOR, at=now, reason=why)
            if run_holds(run, draft.key, RunState.AWAITING_REVIEW):
                move_run(session, run, RunState.EXPIRED, actor=EXPIRY_ACTOR, at=now, detail=why)
            expired.append(ExpiredDraft(draft.key, draft.run_id, draft.recipe))
    return expired


@dataclass(frozen=True)
class ReviewAnswer:
    """What a click came to: whether it counted, why not (`refusal`, and a sentence for
    the person), and what happens next."""

    accepted: bool
    message: str
    draft_key: str
    item: ReviewItem | None = None
    refusal: Refusal | None = None
    follow_up: FollowUp = FollowUp.NONE


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
        publish_at=run.publish_at if run.draft_key == draft.key else None,
        missed_slot=run.draft_key == draft.key and run.reason == ExpiryReason.MISSED_SLOT,
    )


def load_item(store: Store, draft_key: str) -> ReviewItem | None:
    with store.transaction() as session:
        draft = draft_row(session, draft_key)
        if draft is None:
            return None
        return review_item(draft, required(run_row(session, draft.run_id), "run"))


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
    fits: FitRule | None = None,
    directory: Directory | None = None,
) -> ReviewAnswer:
    """Approve or reject one exact revision, fresh, once (docs/design.md §10).

    With `approval_stages`, an approval counts at the stage waiting only, and the draft is
    approved when the last stage is complete, at that moment (docs/design.md §22);
    `directory` tells who is in a stage's user groups. A rejection decides at any stage.

    Every check and the decision happen in one transaction with the draft row locked,
    so two people clicking at once produce one decision and the other is told who won.
    An approval of a recipe with a publish target answers `FollowUp.PUBLISH`. With
    `fits`, an approval of a text too long for one of its targets is refused, saying
    which and by how much (docs/design.md §24).
    """
    if not permitted:
        return _refused(draft_key, Refusal.NOT_APPROVER)
    approving = verdict == Verdict.APPROVED
    measured = fits.check_draft(store, config, draft_key) if fits and approving else None
    with store.transaction() as session:
        now = lease_now(session, clock)  # the database's clock judges stored times
        found = _open_for_review(session, draft_key, revision, config, now)
        if isinstance(found, ReviewAnswer):
            return found
        draft, run = found
        if measured is not None and measured.text_hash != draft.text_hash:
            return _refused(draft_key, Refusal.EDITED, review_item(draft, run))  # not measured
        if measured is not None and measured.reason is not None:
            item = review_item(draft, run)
            return ReviewAnswer(False, measured.reason, draft_key, item, Refusal.DOES_NOT_FIT)
        kind = DecisionKind.APPROVAL if approving else DecisionKind.REJECTION
        if verdict == Verdict.APPROVED:  # approvals_required people of this revision decide
            counted = count_approval(session, config, draft, user, now, directory)
            failpoint(Failpoint.AFTER_APPROVAL_COUNTED)  # tests: a second approver arrives here
            if counted == Refusal.STAGE_WAITING:  # the sentence names the stage waiting
                waits = approval_progress(session, config, draft)
                shown = dataclasses.replace(review_item(draft, run), approvals=waits)
                return _refused(draft_key, counted, shown)
            if isinstance(counted, Refusal):
                return _refused(draft_key, counted, review_item(draft, run))
            if not counted.decided:  # counted, not deciding: the log keeps it all the same
                said, approval = progress_sentence(counted), Decided(kind, draft.revision)
                note_draft(session, draft, actor=user, at=now, reason=said, decision=approval)
                waiting = dataclasses.replace(review_item(draft, run), approvals=counted)
                return ReviewAnswer(True, progress_sentence(counted), draft_key, waiting)
        draft.decided_by, draft.decided_at, draft.decision_reason = user, now, reason
        target = DraftState.APPROVED if verdict == Verdict.APPROVED else DraftState.REJECTED
        decided = Decided(kind, draft.revision)
        move_draft(session, draft, target, actor=user, at=now, reason=reason, decision=decided)
        follow_up = _close_run(session, run, verdict, config, user, now, reason)
        item = review_item(draft, run)
        return ReviewAnswer(True, f"{verdict.capitalize()}.", draft_key, item, None, follow_up)


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
        return _refused(draft_key, Refusal.NOT_APPROVER)
    if not text.strip():
        return _refused(draft_key, Refusal.EMPTY_EDIT)
    with store.transaction() as session:
        now = lease_now(session, clock)  # the database's clock judges stored times
        found = open_for_change(session, draft_key, revision, config, now)
        if isinstance(found, ReviewAnswer):
            return found
        draft, run = found
        return save_revision(session, draft, run, text=text, editor=user, at=now)


def save_revision(
    session: Session, draft: DraftRow, run: RunRow, *, text: str, editor: str, at: datetime
) -> ReviewAnswer:
    """`text` as the next revision of a draft `open_for_change` locked: a person's edit,
    or an alt text the model proposed (docs/design.md §32)."""
    keep_revisions(session, draft, new_text=text, editor=editor, at=at)
    draft.text, draft.text_hash, draft.revision = text, text_hash(text), draft.revision + 1
    draft.decision_reason = None  # a notice about the old revision no longer applies
    draft.updated_at = at
    session.add(draft)
    edited = Decided(DecisionKind.EDIT, draft.revision)
    why = f"edited: revision {draft.revision}"
    note_draft(session, draft, actor=editor, at=at, reason=why, decision=edited)
    saved = f"Saved as revision {draft.revision}."
    return ReviewAnswer(True, saved, draft.key, review_item(draft, run))


def _sentence(refusal: Refusal, item: ReviewItem | None, recipe_version: int | None) -> str:
    """A refusal in plain words; the bot renders its own mrkdwn from the refusal."""
    match refusal:
        case Refusal.NOT_APPROVER:
            return "You are not one of this Galley's approvers."
        case Refusal.EMPTY_EDIT:
            return "An empty draft cannot be saved; reject it instead."
        case Refusal.GONE:
            return "This draft no longer exists."
        case Refusal.WINDOW_PASSED:
            return "The review window for this draft has passed; it has expired."
        case Refusal.CANCELLED:
            return "This run was cancelled: nothing here will be published."
        case Refusal.EDITOR_MAY_NOT_APPROVE:
            return (
                "You edited this revision, and this recipe needs someone else to approve it "
                "(editor_may_approve = false)."
            )
        case Refusal.ALREADY_APPROVED:
            return "Your approval of this revision is counted already; it needs another approver."
    assert item is not None, f"{refusal} names the draft as it is now"
    match refusal:
        case Refusal.STAGE_WAITING if item.approvals is not None:
            waits = item.approvals
            return (
                f"Stage {waits.stage_number} of {waits.stages} ({waits.stage}) is waiting; "
                "you are not one of its approvers."
            )
        case Refusal.DECIDED:
            return f"Already {item.state} by {item.decided_by or 'someone'}."
        case Refusal.EDITED:
            return (
                f"The draft was edited since (now revision {item.revision}); review the new text."
            )
        case Refusal.BUMPED:
            return f"The recipe was bumped to v{recipe_version} since this draft was written."
    return f"This draft is {item.state}; there is nothing to decide."


def _refused(
    key: str, refusal: Refusal, item: ReviewItem | None = None, recipe_version: int | None = None
) -> ReviewAnswer:
    return ReviewAnswer(False, _sentence(refusal, item, recipe_version), key, item, refusal)


def _open_for_review(
    session: Session, key: str, revision: int, config: Config, now: datetime, expire: bool = True
) -> tuple[DraftRow, RunRow] | ReviewAnswer:
    """The draft and its run, locked, if a click on `revision` still counts; else the
    refusal (a draft found past its review window is expired on the way, for a decision)."""
    found = _locked_draft(session, key)
    if found is None:
        return _refused(key, Refusal.GONE)
    draft, run, recipe_row = found
    if run.state == RunState.CANCELLED or draft.state == DraftState.CANCELLED:
        return _refused(key, Refusal.CANCELLED, review_item(draft, run), recipe_row.version)
    recipe = config.recipes.get(draft.recipe)
    if (
        draft.state == DraftState.READY
        and recipe
        and missed_its_time(recipe, run.slot_at, now, run.id, run.slot_wall)
    ):
        # past its slot plus publish_late: an approval now could never publish (docs/design.md §23)
        if expire:
            expire_missed(session, recipe, draft, run, now)
        said = f"Too late: {missed_slot_note(recipe, run.slot_at)} It has expired."
        return ReviewAnswer(False, said, key, review_item(draft, run), Refusal.MISSED_SLOT)
    refusal = _stale(draft, recipe_row, revision, config, now)
    if refusal == Refusal.BUMPED and sends_begun(session, draft.key):
        # Partly published before the bump: its other targets still get this text.
        refusal = _stale(draft, recipe_row, revision, config, now, bumped=True)
    if refusal is None:
        return draft, run
    if refusal == Refusal.WINDOW_PASSED and expire:
        _expire(session, draft, run, now)
    return _refused(key, refusal, review_item(draft, run), recipe_row.version)


def open_for_change(
    session: Session, key: str, revision: int, config: Config, now: datetime
) -> tuple[DraftRow, RunRow] | ReviewAnswer:
    """For an edit or a redraft (docs/design.md §22): the draft and its run locked if
    `revision` is still open to change, else the refusal saying why. A draft whose send
    has begun on any target keeps its text (docs/design.md §24, partial publication)."""
    found = _open_for_review(session, key, revision, config, now, expire=False)
    if isinstance(found, ReviewAnswer):
        return found
    draft, run = found
    frozen = frozen_text(session, draft.key)
    if frozen is not None:
        return ReviewAnswer(False, frozen, key, review_item(draft, run), Refusal.TEXT_FROZEN)
    return found


def _locked_draft(session: Session, key: str) -> tuple[DraftRow, RunRow, RecipeRow] | None:
    """The draft, its run and its recipe row, all locked, recipe first (core/store/rows.py): a
    bump (which locks the recipe row too) happens wholly before or wholly after the
    decision, so an approval can never land on a draft the bump is superseding."""
    recipe = session.exec(select(DraftRow.recipe).where(col(DraftRow.key) == key)).one_or_none()
    run_id = run_of_draft(session, key)
    if recipe is None or run_id is None:
        return None
    recipe_row = required(lock_recipe(session, recipe), "recipe")
    run, draft = lock_run(session, run_id), lock_draft(session, key)
    assert run is not None and draft is not None  # drafts and runs are never deleted here
    return draft, run, recipe_row


def _stale(
    draft: DraftRow,
    recipe_row: RecipeRow,
    revision: int,
    config: Config,
    now: datetime,
    *,
    bumped: bool = False,
) -> Refusal | None:
    """Why a click on this revision no longer counts, or None if it still does (`bumped`:
    a bump since it was written does not count against it)."""
    if draft.state in DRAFT_APPROVED_STATES or draft.state == DraftState.REJECTED:
        return Refusal.DECIDED
    if draft.state != DraftState.READY:
        return Refusal.NOT_DECIDABLE
    if draft.revision != revision:
        return Refusal.EDITED
    if draft.version != recipe_row.version and not bumped and post_id_of_run(draft.run_id) is None:
        return Refusal.BUMPED
    if review_window_passed(config.recipes.get(draft.recipe), draft.ready_at, now):
        return Refusal.WINDOW_PASSED
    return None


def _expire(session: Session, draft: DraftRow, run: RunRow, now: datetime) -> None:
    move_draft(session, draft, DraftState.EXPIRED, actor=EXPIRY_ACTOR, at=now)
    if run_holds(run, draft.key, RunState.AWAITING_REVIEW):
        move_run(session, run, RunState.EXPIRED, actor=EXPIRY_ACTOR, at=now)


def _close_run(
    session: Session,
    run: RunRow,
    verdict: Verdict,
    config: Config,
    user: str,
    now: datetime,
    reason: str | None,
) -> FollowUp:
    """The run after a decision, and what happens next: an approval publishes, when
    its recipe has a publish target; otherwise the approval ends the run."""
    if verdict == Verdict.REJECTED:
        move_run(session, run, RunState.REJECTED, actor=user, at=now, detail=reason)
        return FollowUp.NONE
    recipe = config.recipes.get(run.recipe)
    run.publish_at = now if recipe is None else publish_at(recipe, run.slot_at, now, run.id)
    move_run(session, run, RunState.APPROVED, actor=user, at=now)
    if recipe is not None and recipe.publish is None:
        move_run(session, run, RunState.SUCCEEDED, actor=user, at=now, detail="no publish target")
        return FollowUp.NONE
    return FollowUp.PUBLISH
