"""Claim before you spend (docs/design.md §4): who may pay for a slot's model call.

The draft key is claimed with `INSERT … ON CONFLICT DO NOTHING` in one short
transaction; the loser never calls the model. A claim carries an owner token unique to
the attempt (`claimed_by`) and a short lease (`lease_until`) that the holder renews by
heartbeat while it works. A claim not renewed for `takeover_after` is taken over (by the
next request for the slot) or returned to the pool (by the sweeper); either way the
change names the owner and expiry it read, so a claim whose holder stored its draft in
the meantime is never touched.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlmodel import Session, col, select

from core.drafting.attempts import UnderClaim, abandon_unfinished_attempts, attempts_of_key
from core.drafting.gate import gate_reason, others_drafting
from core.drafting.waits import item_waits, open_episode
from core.drafting_policies import DraftOutcome
from core.identity import draft_key
from core.models import DraftRow, RecipeRow, RunRow
from core.policies import DecisionKind, Overlap, PendingReason, SkipReason, takeover_note
from core.ports import Clock
from core.setup.config import Recipe
from core.slots.schedule import Slot
from core.states import DraftState, EventSubject, RunState, run_may_move
from core.store.engine import Store, insert_ignore, insert_new
from core.store.leases import (
    DRAFT_CLAIMS,
    claim_new,
    is_person,
    lease_now,
    new_owner,
    renew,
    take_over,
)
from core.store.rows import draft_row, lock_recipe, lock_run, required
from core.store.transitions import (
    Decided,
    guarded_update,
    move_run,
    note_draft,
    note_run,
    record_event,
)


@dataclass(frozen=True)
class DraftResult:
    """What one request to draft a slot came to (the `galley draft` JSON shape)."""

    outcome: DraftOutcome
    run: str
    key: str | None
    reason: str | None = None
    detail: str | None = None

    def describe(self) -> str:
        """One line for a person: the run, what happened, and why when it was not drafted."""
        why = self.detail or self.reason
        return f"`{self.run}`: {self.outcome}" + (f" ({why})" if why else "")

    def to_json(self) -> dict[str, Any]:
        return {
            "outcome": self.outcome,
            "reason": self.reason,
            "run": self.run,
            "key": self.key,
            "detail": self.detail,
        }


@dataclass(frozen=True)
class Claim:
    """The right to pay for one draft key's model call, held by `owner` (a token unique
    to this attempt) while its heartbeat keeps `lease_until` ahead."""

    run_id: str
    draft_key: str
    version: int
    owner: str
    took_over: bool
    opened_run: bool = False  # the claim created its run: no older draft to supersede

    @property
    def paid_under(self) -> UnderClaim:
        """What this claim's model calls are paid under (`begin_attempt`)."""
        return UnderClaim(DRAFT_CLAIMS, self.draft_key, self.owner, self.draft_key, self.run_id)


def ensure_recipe_row(session: Session, name: str, now: datetime) -> None:
    """The recipe row exists (ON CONFLICT DO NOTHING), neither read nor locked: a skipped
    slot's run needs its recipe's row, not what the row holds."""
    insert_ignore(session, RecipeRow, name=name, version=1, paused=False, updated_at=now)


def lock_recipe_row(session: Session, name: str, now: datetime) -> RecipeRow:
    """The recipe row, locked for this transaction (SQLite: BEGIN IMMEDIATE already is).

    One statement once the row exists (every claim and store after a recipe's first):
    the lock is asked first, and only a missing row is inserted (ON CONFLICT DO NOTHING,
    so two first claims agree) and then locked."""
    row = lock_recipe(session, name)
    if row is not None:
        return row
    insert_ignore(session, RecipeRow, name=name, version=1, paused=False, updated_at=now)
    return required(lock_recipe(session, name), f"recipe {name}")


def open_run(
    session: Session, recipe: Recipe, slot: Slot, *, manual: bool, actor: str, now: datetime
) -> tuple[RunRow, bool]:
    """The run row for a slot, locked, and whether this call created it `pending` (the
    recipe row must exist)."""
    run_id = slot.run_id(recipe.name)
    opened = insert_new(
        session,
        RunRow,
        id=run_id,
        recipe=recipe.name,
        slot_wall=slot.wall_text,
        slot_at=slot.fire_at,
        state=RunState.PENDING,
        version=1,
        manual=manual,
        created_at=now,
        updated_at=now,
    )
    if opened is None:
        return required(lock_run(session, run_id), f"run {run_id}"), False  # recipe, run, …
    why = f"slot {slot.wall_text} fires at {slot.fire_at.isoformat()}"
    if slot.item is not None:  # docs/design.md §29
        why = f"new item seen by the poll of {slot.wall_text} ({slot.fire_at.isoformat()})"
    record_event(
        session,
        subject=EventSubject.RUN,
        subject_id=run_id,
        run_id=run_id,
        to_state=RunState.PENDING,
        actor=actor,
        at=now,
        reason=why,
    )
    return opened, True


def skip_slot(
    session: Session,
    recipe: Recipe,
    slot: Slot,
    reason: SkipReason,
    detail: str,
    *,
    actor: str,
    now: datetime,
) -> RunRow:
    """Record a slot nobody will draft: its run, opened if new, becomes `skipped`."""
    ensure_recipe_row(session, recipe.name, now)
    run, _ = open_run(session, recipe, slot, manual=False, actor=actor, now=now)
    skip_if_pending(session, run, reason, detail, actor=actor, now=now)
    return run


def skip_if_pending(
    session: Session, run: RunRow, reason: SkipReason, detail: str, *, actor: str, now: datetime
) -> None:
    """A run nobody has started becomes `skipped`; one that moved on is left as it is,
    and so is a person's request found late (manual runs have no misfire_grace: the
    pending-run pass drafts them)."""
    if run.manual and reason == SkipReason.MISFIRE:
        return
    if run.state == RunState.PENDING:
        move_run(session, run, RunState.SKIPPED, actor=actor, at=now, reason=reason, detail=detail)


def claim_slot(
    store: Store,
    recipe: Recipe,
    slot: Slot,
    *,
    worker: str,
    actor: str,
    manual: bool,
    clock: Clock,
    overlap: Overlap | None = None,
) -> Claim | DraftResult:
    """One transaction: open the run, answer from an existing draft, pass the gate, claim.

    `overlap` (scheduled runs only) refuses or queues the slot while another slot of
    the recipe is still being drafted, in this or any other process. `worker` names the
    process; the claim's owner token adds a part unique to this call.
    """
    owner = new_owner(worker)
    with store.transaction() as session:
        now = lease_now(session, clock)  # leases are judged by the database's clock
        recipe_row = lock_recipe_row(session, recipe.name, now)
        run, opened = open_run(session, recipe, slot, manual=manual, actor=actor, now=now)
        if manual and not run.manual:
            run.manual = True  # a person asked for this slot: it stays theirs through sweeps
            guarded_update(session, run, state=run.state)
        key = draft_key(recipe.platform, run.id, recipe_row.version)
        existing = None if opened else draft_row(session, key)  # a new run has no drafts
        if existing is not None:
            return _answer_existing(session, existing, run, owner, recipe.takeover_after, now)
        if run.state == RunState.RUNNING:
            # An older version's draft is being written (the recipe was bumped meanwhile).
            # It is stored as superseded and the run comes back `pending` for this version;
            # refusing or claiming now would strand the answer already paid for.
            detail = f"{run.draft_key} is being drafted; this version follows once it is stored"
            return DraftResult(DraftOutcome.IN_PROGRESS, run.id, key, None, detail)
        if run.state == RunState.FAILED and is_person(actor):  # a pass's is no retry
            note_retry(session, run, actor=actor, now=now)
        refusal = gate_reason(session, recipe, recipe_row, now)
        if refusal is not None and slot.item is not None:  # an item waits (docs/design.md §29)
            item_waits(session, run, recipe_row, refusal, actor=actor, now=now)
            waits = PendingReason.ITEM_WAITS
            return DraftResult(DraftOutcome.QUEUED, run.id, key, waits, refusal[1])
        if refusal is not None:
            _record_skip(session, run, recipe_row, refusal, actor=actor, now=now)
            return DraftResult(DraftOutcome.SKIPPED, run.id, key, refusal[0], refusal[1])
        if overlap is not None and others_drafting(session, recipe.name, key, now):
            return _overlap(session, run, key, overlap, actor=actor, now=now)
        if recipe_row.backpressure_since is not None and recipe_row.backpressure_resumed_at is None:
            recipe_row.backpressure_resumed_at = now  # the episode ends: people are told once
            session.add(recipe_row)
        if not claim_new(
            session,
            DRAFT_CLAIMS,
            owner,
            recipe.takeover_after,
            now,
            key=key,
            run_id=run.id,
            recipe=recipe.name,
            platform=recipe.platform,
            version=recipe_row.version,
            attempts_before=_ATTEMPTS_OF_KEY,  # counted by the INSERT itself
            created_at=now,
            binds={"attempts_of_key": key},
        ):
            return DraftResult(DraftOutcome.IN_PROGRESS, run.id, key)
        if manual and not opened and is_person(actor):  # who asked: a retry's settled alert
            note_run(session, run, actor=actor, at=now, reason=f"{actor} asked to draft it again")
        record_event(
            session,
            subject=EventSubject.DRAFT,
            subject_id=key,
            run_id=run.id,
            to_state=DraftState.CLAIMED,
            actor=owner,
            at=now,
        )
        run.version, run.draft_key = recipe_row.version, key
        move_run(session, run, RunState.RUNNING, actor=owner, at=now, detail=f"claimed {key}")
        return Claim(run.id, key, recipe_row.version, owner, took_over=False, opened_run=opened)


def note_retry(session: Session, run: RunRow, *, actor: str, now: datetime) -> None:
    """A failed run asked for again, before its claim or the gate's refusal: the decision
    log keeps the person who asked (a pass's request is history only)."""
    why = f"retried by {actor} after failing ({run.reason})"
    retried = Decided(DecisionKind.RESOLUTION, None)  # failed before it had a draft
    note_run(session, run, actor=actor, at=now, reason=why, decision=retried)


def _answer_existing(
    session: Session,
    draft: DraftRow,
    run: RunRow,
    owner: str,
    lease: timedelta,
    now: datetime,
) -> Claim | DraftResult:
    if draft.state != DraftState.CLAIMED:
        return DraftResult(DraftOutcome.EXISTS, run.id, draft.key)
    previous = draft.claimed_by  # the ORM update below may refresh the loaded row
    # fenced: only the lapsed claim of the owner we read
    if not take_over(session, DRAFT_CLAIMS, draft.key, previous, owner, lease, now):
        return DraftResult(DraftOutcome.IN_PROGRESS, run.id, draft.key)
    abandon_unfinished_attempts(session, draft.key, now)
    note_draft(
        session,
        draft,
        actor=owner,
        at=now,
        reason=takeover_note(previous),
    )
    if run.state != RunState.RUNNING:
        move_run(
            session,
            run,
            RunState.RUNNING,
            actor=owner,
            at=now,
            reason=PendingReason.CLAIM_TAKEN_OVER,
        )
    return Claim(run.id, draft.key, draft.version, owner, took_over=True)


def _overlap(
    session: Session, run: RunRow, key: str, policy: Overlap, *, actor: str, now: datetime
) -> DraftResult:
    """skip: record the slot as skipped. queue_one: hold one slot back, skip the rest."""
    may_queue = policy == Overlap.QUEUE_ONE and run.state == RunState.PENDING
    if may_queue and (run.reason == PendingReason.QUEUED or not _another_queued(session, run)):
        if run.reason != PendingReason.QUEUED:
            run.reason, run.updated_at = PendingReason.QUEUED, now
            session.add(run)
            note_run(
                session,
                run,
                actor=actor,
                at=now,
                reason="queued behind the recipe's running draft (overlap = queue_one)",
            )
        return DraftResult(DraftOutcome.QUEUED, run.id, key, PendingReason.QUEUED)
    detail = f"the previous run of {run.recipe} is still drafting (overlap = {policy})"
    if run_may_move(run.state, RunState.SKIPPED):
        _skip(session, run, SkipReason.OVERLAP, detail, actor=actor, now=now)
    return DraftResult(DraftOutcome.SKIPPED, run.id, key, SkipReason.OVERLAP, detail)


def _another_queued(session: Session, run: RunRow) -> bool:
    queued = session.exec(
        select(RunRow.id).where(
            col(RunRow.recipe) == run.recipe,
            col(RunRow.id) != run.id,
            col(RunRow.state) == RunState.PENDING,
            col(RunRow.reason) == PendingReason.QUEUED,
        )
    ).first()
    return queued is not None


def _record_skip(
    session: Session,
    run: RunRow,
    recipe_row: RecipeRow,
    refusal: tuple[SkipReason, str],
    *,
    actor: str,
    now: datetime,
) -> None:
    reason, detail = refusal
    open_episode(session, recipe_row, reason, now)
    if run.state != RunState.RUNNING and run_may_move(run.state, RunState.SKIPPED):
        _skip(session, run, reason, detail, actor=actor, now=now)
        return
    # the run holds an older version's draft: note the refusal only
    note_run(session, run, actor=actor, at=now, reason=f"not drafted again: {detail}")


def _skip(
    session: Session, run: RunRow, reason: SkipReason, detail: str, *, actor: str, now: datetime
) -> None:
    """Record the slot as skipped once per reason: another replica firing the same slot
    for the same reason changes nothing (a new reason is a new event)."""
    if run.state == RunState.SKIPPED and run.reason == reason:
        return
    move_run(session, run, RunState.SKIPPED, actor=actor, at=now, reason=reason, detail=detail)


# The attempts already made for a key (by claims given back), as a subquery the claim's
# INSERT evaluates: one statement, inside the same write lock. Built once and bound to
# the key at each claim through `insert_ignore`'s binds.
_ATTEMPTS_OF_KEY = attempts_of_key(sa.bindparam("attempts_of_key"))


def renew_lease(store: Store, claim: Claim, lease: timedelta, clock: Clock) -> bool:
    """Extend our claim; False when it is no longer ours (taken over or swept)."""
    return renew(store, clock, DRAFT_CLAIMS, claim.draft_key, claim.owner, lease)
