"""The approval policy (docs/design.md §22): a revision is approved when, at each of its
recipe's `approval_stages` in order (one stage without them),
`approvals_required` distinct people allowed to approve have approved that exact
revision; with `editor_may_approve = false` whoever edited it does not count.

The one home of the rule: `core/review/queue.py` `decide` calls `count_approval` inside its
own transaction, with the recipe, run and draft rows locked, so the Slack buttons, the
CLI and the notebook all decide by it, and two approvers clicking at once are counted
one after the other. Never moves a state itself; knows nothing of Slack.
"""

from __future__ import annotations

from datetime import datetime

from sqlmodel import Session, col, select

from core.drafting.revisions import MODEL_AUTHOR, text_author
from core.models import SINGLE_STAGE, ApprovalRow, DraftRow, RunRow
from core.policies import Refusal
from core.ports import ApprovalProgress, Directory
from core.review.permissions import ListedOnly, asked_at, may_approve_at
from core.setup.approval_stages import ApprovalStage
from core.setup.config import Config
from core.states import DraftState
from core.store.engine import insert_ignore


def count_approval(
    session: Session,
    config: Config,
    draft: DraftRow,
    user: str,
    now: datetime,
    directory: Directory | None = None,
) -> ApprovalProgress | Refusal:
    """Record `user`'s approval of the draft's current revision at the stage waiting (the
    caller holds the draft's lock and checked the revision is the one clicked) and answer
    the progress, or why it does not count: the editor barred, this person counted
    already, or someone the stage waiting does not ask (`may_approve_at`, the rule the
    message's "asking" and the reminders read through `asked_at`)."""
    if _editor_barred(session, config, draft) == user:
        return Refusal.EDITOR_MAY_NOT_APPROVE
    before = approval_progress(session, config, draft)
    stages = stages_of(config, draft.recipe)
    waiting = stages[before.stage_number - 1]
    if not may_approve_at(config.slack, directory or ListedOnly(), user, waiting, stages):
        return Refusal.STAGE_WAITING
    counted = insert_ignore(
        session,
        ApprovalRow,
        draft_key=draft.key,
        revision=draft.revision,
        approver=user,
        approved_at=now,
        stage=waiting.name,
    )
    if not counted:
        return Refusal.ALREADY_APPROVED
    return approval_progress(session, config, draft)


def stages_of(config: Config, recipe: str) -> list[ApprovalStage]:
    """The recipe's approval stages in order; without `approval_stages`, one stage named
    "approval" of `[slack] approvers` needing `approvals_required`."""
    found = config.recipes.get(recipe)
    if found is not None and found.approval_stages:
        return found.approval_stages
    required = required_approvals(config, recipe)
    return [ApprovalStage(name=SINGLE_STAGE, approvers=[], required=required)]


def approval_progress(session: Session, config: Config, draft: DraftRow) -> ApprovalProgress:
    """The stage the draft's current revision waits at (the first not complete, or the
    last), who approved it there and before it, and who listed there may still."""
    given = _approvals_by_stage(session, draft.key, draft.revision)
    stages = stages_of(config, draft.recipe)
    earlier: tuple[tuple[str, tuple[str, ...]], ...] = ()
    for number, stage in enumerate(stages, start=1):
        done = given.get(stage.name, ())
        if len(done) < stage.required or number == len(stages):
            break
        earlier += ((stage.name, done),)
    listed_here = asked_at(config.slack, stage)
    barred = _editor_barred(session, config, draft)
    gave = {person for people in given.values() for person in people}
    return ApprovalProgress(
        approvers=done,
        required=stage.required,
        may_still=tuple(p for p in listed_here if p not in gave and p != barred),
        anyone=not listed_here,
        stage=stage.name,
        stage_number=number,
        stages=len(stages),
        earlier=earlier,
    )


def stage_waiting(session: Session, config: Config, recipe: str, key: str, revision: int) -> str:
    """The stage a revision waited at: where a rejection of it was given (its approvals
    stop growing once it is decided). One key look-up; none for a recipe of one stage."""
    stages = stages_of(config, recipe)
    if len(stages) == 1:
        return stages[0].name
    given = _approvals_by_stage(session, key, revision)
    waiting = [s for s in stages if len(given.get(s.name, ())) < s.required]
    return waiting[0].name if waiting else stages[-1].name


def required_approvals(config: Config, recipe: str) -> int:
    found = config.recipes.get(recipe)
    return found.approvals_required if found is not None else 1


def _approvals_by_stage(session: Session, key: str, revision: int) -> dict[str, tuple[str, ...]]:
    """Who approved this exact revision at each stage, first first."""
    rows = session.exec(
        select(ApprovalRow.stage, ApprovalRow.approver)
        .where(col(ApprovalRow.draft_key) == key, col(ApprovalRow.revision) == revision)
        .order_by(col(ApprovalRow.approved_at), col(ApprovalRow.approver))
    ).all()
    found: dict[str, tuple[str, ...]] = {}
    for stage, approver in rows:
        found[stage] = (*found.get(stage, ()), approver)
    return found


def approvers_of(session: Session, key: str, revision: int) -> tuple[str, ...]:
    """The people who approved this exact revision, first first."""
    rows = session.exec(
        select(ApprovalRow.approver)
        .where(col(ApprovalRow.draft_key) == key, col(ApprovalRow.revision) == revision)
        .order_by(col(ApprovalRow.approved_at), col(ApprovalRow.approver))
    ).all()
    return tuple(rows)


def waiting_with_approvals(
    session: Session, limit: int = 200
) -> list[tuple[DraftRow, RunRow, tuple[str, ...]]]:
    """Ready drafts whose current revision has approvals, with who gave them: read from
    the review queue (ix_drafts_ready), then the approvals of those drafts by key, so the
    approvals of the whole history are never read."""
    ready = session.exec(
        select(DraftRow, RunRow)
        .join(RunRow, col(RunRow.id) == col(DraftRow.run_id))
        .where(col(DraftRow.state) == DraftState.READY)
        .order_by(col(DraftRow.ready_at))
        .limit(limit)
    ).all()
    if not ready:
        return []
    given = session.exec(
        select(ApprovalRow)
        .where(col(ApprovalRow.draft_key).in_([draft.key for draft, _ in ready]))
        .order_by(col(ApprovalRow.approved_at), col(ApprovalRow.approver))
    ).all()
    found: list[tuple[DraftRow, RunRow, tuple[str, ...]]] = []
    for draft, run in ready:
        people = tuple(
            a.approver for a in given if (a.draft_key, a.revision) == (draft.key, draft.revision)
        )
        if people:
            found.append((draft, run, people))
    return found


def editor_of(session: Session, draft: DraftRow) -> str | None:
    """Whoever wrote the draft's current revision by Edit; None for the model's text (the
    first draft, or a reviewer's redraft, which the model wrote)."""
    if draft.revision <= 1:
        return None
    author = text_author(session, draft)  # kept whatever bumped the revision's number
    return None if author.startswith(MODEL_AUTHOR) else author


def _editor_barred(session: Session, config: Config, draft: DraftRow) -> str | None:
    found = config.recipes.get(draft.recipe)
    if found is None or found.editor_may_approve:
        return None
    return editor_of(session, draft)


def progress_sentence(progress: ApprovalProgress) -> str:
    """`Approval counted: 1 of 2 (U0ANA).`, in plain words, or with stages `Approval
    counted: stage 2 of 2 (legal), 0 of 1; approved by editor U0ED.`; the bot renders
    its own. Nobody is named in no parentheses: a stage just reached has no approver yet."""
    who = f" ({', '.join(progress.approvers)})" if progress.approvers else ""
    counted = f"{len(progress.approvers)} of {progress.required}{who}"
    if progress.stages == 1:
        return f"Approval counted: {counted}."
    where = f"stage {progress.stage_number} of {progress.stages} ({progress.stage})"
    passed = [f"{stage} {', '.join(people)}" for stage, people in progress.earlier]
    before = f"; approved by {'; '.join(passed)}" if passed else ""
    return f"Approval counted: {where}, {counted}{before}."
