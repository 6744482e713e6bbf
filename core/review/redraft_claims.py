"""Claim before you spend, for a reviewer's redraft (docs/design.md §22): one row per
draft key and revision (`redrafts`), inserted before the model is called, so one click
is one model call however often Slack delivers it or people click.

The row carries an owner token and a lease judged by the database's clock, renewed by
heartbeat while its holder works (docs/design.md §5): a holder that died mid-call is
taken over by the next request or the bot's pass, and a write by a holder whose lease
was taken over matches no row. Never calls the model; knows nothing of Slack.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime, timedelta

import sqlalchemy as sa
from sqlmodel import Session, col, select

from core.drafting.attempts import attempts_of
from core.drafting.gate import tokens_today
from core.drafting_policies import AttemptCause, AttemptOutcome, RedraftState
from core.errors import LostClaim
from core.identity import redraft_key
from core.models import AttemptRow, DraftRow, RedraftRow
from core.policies import DecisionKind, Refusal
from core.ports import Clock, RedraftNote
from core.setup.config import Recipe
from core.store import leases
from core.store.engine import Store
from core.store.leases import REDRAFT_CLAIMS, claim_new, lapsed_keys, lease_now, release, renew
from core.store.transitions import Decided, note_draft

SWEEP_BATCH = 50


@dataclass(frozen=True)
class RedraftClaim:
    """The right to pay for one redraft's model call, held by `owner`."""

    key: str
    draft_key: str
    run_id: str
    recipe: str
    from_revision: int
    note: str
    requested_by: str
    owner: str


def claim_redraft(
    session: Session,
    recipe: Recipe,
    draft: DraftRow,
    *,
    note: str,
    user: str,
    owner: str,
    clock: Clock,
) -> RedraftClaim | tuple[Refusal, str]:
    """Claim the redraft of the draft's current revision (the caller holds the draft's
    lock and checked it is the revision clicked), or say why not: asked for already, or a
    limit reached. A claim whose holder died is taken over here; one whose model call
    failed may be asked for again (its calls count against max_attempts)."""
    key = redraft_key(draft.key, draft.revision)
    now = lease_now(session, clock)
    existing = session.get(RedraftRow, key)
    if existing is not None and existing.state != RedraftState.FAILED:
        return take_over(session, existing, owner, recipe.takeover_after, now)
    limit = redraft_limit(session, recipe, draft, now)
    if limit is not None:
        return limit
    if existing is not None:
        again = _ask_again(session, existing, note, user, owner, recipe.takeover_after, now)
        return _logged(session, draft, again, now)
    claim = RedraftClaim(
        key, draft.key, draft.run_id, draft.recipe, draft.revision, note, user, owner
    )
    columns = {name: value for name, value in asdict(claim).items() if name != "owner"}
    lease = recipe.takeover_after
    if not claim_new(session, REDRAFT_CLAIMS, owner, lease, now, created_at=now, **columns):
        return Refusal.REDRAFTING, f"revision {draft.revision} is being redrafted already"
    return _logged(session, draft, claim, now)


def _logged(
    session: Session, draft: DraftRow, asked: RedraftClaim | tuple[Refusal, str], now: datetime
) -> RedraftClaim | tuple[Refusal, str]:
    """A redraft asked for (not a claim taken over) is a decision the log keeps."""
    if isinstance(asked, RedraftClaim):
        request = Decided(DecisionKind.REDRAFT, asked.from_revision)
        note = asked.note[:2000]
        note_draft(session, draft, actor=asked.requested_by, at=now, reason=note, decision=request)
    return asked


def _ask_again(
    session: Session,
    row: RedraftRow,
    note: str,
    user: str,
    owner: str,
    lease: timedelta,
    now: datetime,
) -> RedraftClaim | tuple[Refusal, str]:
    """A failed redraft of this revision, claimed afresh (fenced: still failed)."""
    claimed = leases.claim_again(
        session,
        REDRAFT_CLAIMS,
        row.key,
        owner,
        lease,
        now,
        RedraftState.FAILED,
        note=note,
        requested_by=user,
        detail=None,
        finished_at=None,
    )
    if not claimed:
        return Refusal.REDRAFTING, f"revision {row.from_revision} is being redrafted already"
    return RedraftClaim(
        row.key, row.draft_key, row.run_id, row.recipe, row.from_revision, note, user, owner
    )


def redraft_limit(
    session: Session, recipe: Recipe, draft: DraftRow, now: datetime
) -> tuple[Refusal, str] | None:
    """Which limit a new redraft of this draft would pass, in words; None when none."""
    made = session.exec(
        select(sa.func.count())
        .select_from(RedraftRow)
        .where(col(RedraftRow.draft_key) == draft.key, col(RedraftRow.state) != RedraftState.FAILED)
    ).one()
    if made >= recipe.max_redrafts:
        return Refusal.REDRAFT_LIMIT, f"{made} redrafts made (max_redrafts = {recipe.max_redrafts})"
    attempts = attempts_of(session, draft)
    if attempts.spent(recipe.max_attempts):
        return (
            Refusal.ATTEMPT_LIMIT,
            f"{attempts.made} model calls made (max_attempts = {recipe.max_attempts})",
        )
    if recipe.daily_token_budget:
        spent = tokens_today(session, recipe, now)
        if spent >= recipe.daily_token_budget:
            budget = recipe.daily_token_budget
            return Refusal.BUDGET, f"daily_token_budget spent: {spent} of {budget} tokens"
    return None


def take_over(
    session: Session, row: RedraftRow, owner: str, lease: timedelta, now: datetime
) -> RedraftClaim | tuple[Refusal, str]:
    if row.state == RedraftState.DONE:
        return Refusal.REDRAFTING, f"revision {row.from_revision} was redrafted already"
    if row.state == RedraftState.FAILED:
        return (
            Refusal.REDRAFTING,
            f"the redraft of revision {row.from_revision} failed: {row.detail}",
        )
    # fenced: only the lapsed claim of the holder we read
    if not leases.take_over(session, REDRAFT_CLAIMS, row.key, row.claimed_by, owner, lease, now):
        return Refusal.REDRAFTING, f"revision {row.from_revision} is being redrafted already"
    abandon_redraft_attempts(session, row.draft_key, now)
    return RedraftClaim(
        row.key,
        row.draft_key,
        row.run_id,
        row.recipe,
        row.from_revision,
        row.note,
        row.requested_by,
        owner,
    )


def abandon_redraft_attempts(session: Session, draft_key: str, now: datetime) -> None:
    """A dead holder's unfinished redraft call: on record as abandoned, its cost kept."""
    session.execute(
        sa.update(AttemptRow)
        .where(
            col(AttemptRow.draft_key) == draft_key,
            col(AttemptRow.cause) == AttemptCause.REDRAFT,
            col(AttemptRow.finished_at).is_(None),
        )
        .values(outcome=AttemptOutcome.ABANDONED, finished_at=now)
    )


def renew_redraft(store: Store, claim: RedraftClaim, lease: timedelta, clock: Clock) -> bool:
    """Extend our claim; False when it is no longer ours."""
    return renew(store, clock, REDRAFT_CLAIMS, claim.key, claim.owner, lease)


def finish_redraft(
    session: Session,
    claim: RedraftClaim,
    state: RedraftState,
    now: datetime,
    detail: str | None = None,
) -> None:
    """Close our claim as done or failed; LostClaim (nothing written) if it is no longer
    ours, so a holder that was taken over never stores a second revision."""
    closed = release(
        session,
        REDRAFT_CLAIMS,
        claim.key,
        claim.owner,
        now,
        state=state,
        detail=detail,
        finished_at=now,
    )
    if not closed:
        raise LostClaim(f"redraft {claim.key} is no longer held by {claim.owner}")


def expired_redrafts(store: Store, clock: Clock) -> list[str]:
    """Keys of redraft claims whose holder stopped renewing them (ix_redrafts_claimed)."""
    with store.read() as session:
        return lapsed_keys(session, REDRAFT_CLAIMS, lease_now(session, clock), SWEEP_BATCH)


def redraft_note(session: Session, draft_key: str, revision: int) -> RedraftNote | None:
    """The reviewer's redraft that wrote `revision`, if one did."""
    if revision <= 1:
        return None
    row = session.get(RedraftRow, redraft_key(draft_key, revision - 1))
    if row is None or row.state != RedraftState.DONE:
        return None
    return RedraftNote(revision, row.requested_by, row.note)
