"""Slots that wait on a Message Batch: which ones go to a batch, and the entries they
hand from their claim to the batch pass (docs/design.md §21).

A batch entry is an attempt row (`mode = batch`) written under the slot's claim before
anything is sent, so a batch is never created for a slot nobody has claimed. While the
entry waits, the claim's lease runs to the entry's `wait_until` plus takeover_after:
neither the sweeper nor a second request for the slot takes it over, and the batch pass
stores the answer under the very owner token that claimed it. Past `wait_until` the
pass takes the claim over and drafts synchronously (`core.drafting.batch_pass`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlmodel import Session, col, select

from core.drafting.attempts import add_attempt, begin_attempt, unfinished_batch_entry
from core.drafting.claims import Claim, DraftResult
from core.drafting_policies import Drafting, DraftOutcome
from core.errors import LostClaim
from core.identity import batch_custom_id
from core.models import AttemptRow, DraftRow, RunRow
from core.ports import Clock
from core.setup.config import Recipe
from core.slots.publish_time import batch_wait_until, drafting_fire
from core.slots.schedule import Slot
from core.states import DraftState
from core.store.engine import Store
from core.store.leases import lease_now
from core.store.rows import lock_draft
from core.store.transitions import note_draft

ENTRIES_PER_BATCH = 1000  # the API takes 100,000; a pass sends what it has, in slices


@dataclass(frozen=True)
class Entry:
    """One slot waiting in (or for) a batch: its attempt row and what its claim holds."""

    run_id: str
    draft_key: str
    number: int  # the attempt's
    recipe: str
    owner: str  # the claim's owner token, which the answer is stored under
    version: int
    slot_at: datetime
    started_at: datetime
    wait_until: datetime
    batch_ref: str | None

    @property
    def custom_id(self) -> str:
        return batch_custom_id(self.draft_key)

    def claim(self) -> Claim:
        return Claim(self.run_id, self.draft_key, self.version, self.owner, took_over=False)


def wait_until_for(recipe: Recipe, slot: Slot, *, manual: bool, now: datetime) -> datetime:
    """A scheduled slot waits from its drafting fire; a person's request from now."""
    since = now if manual else drafting_fire(recipe, slot.fire_at)
    return batch_wait_until(recipe, slot.fire_at, since)


class BatchQueue:
    """Hands claimed slots to the batch pass: the one place that says which do."""

    def __init__(self, store: Store, clock: Clock) -> None:
        self.store = store
        self.clock = clock

    def takes(self, recipe: Recipe, slot: Slot, *, manual: bool, ask: bool | None) -> bool:
        """Whether this claimed slot waits on a batch: a scheduled slot of a `drafting =
        "batch"` recipe, or a request with `--batch`, while there is still time to
        gather it (`batch_gather`) before its wait runs out."""
        if ask is False or (ask is None and (manual or recipe.drafting != Drafting.BATCH)):
            return False
        now = self.clock.now()
        return wait_until_for(recipe, slot, manual=manual, now=now) - now > recipe.batch_gather

    def enqueue(
        self, recipe: Recipe, slot: Slot, claim: Claim, *, manual: bool
    ) -> DraftResult | None:
        """The slot's entry, written under its claim; None when its attempts are spent
        (the synchronous path then fails the run with the reason)."""
        with self.store.transaction() as session:
            now = lease_now(session, self.clock)
            draft = lock_draft(session, claim.draft_key)
            if draft is None or not held_by(draft, claim.owner):
                return DraftResult(DraftOutcome.IN_PROGRESS, claim.run_id, claim.draft_key)
            wait_until = wait_until_for(recipe, slot, manual=manual, now=now)
            try:
                number = begin_entry(session, recipe, claim, wait_until, now)
            except LostClaim:  # its lease ran out meanwhile: the sweeper gives it back
                return DraftResult(DraftOutcome.IN_PROGRESS, claim.run_id, claim.draft_key)
            if number is None:
                return None
            detail = f"waiting in a batch until {wait_until:%Y-%m-%d %H:%M:%S}Z, then drafted"
            note_draft(
                session,
                draft,
                actor=claim.owner,
                at=now,
                reason=f"batch entry {batch_custom_id(claim.draft_key)}; {detail}",
            )
        return DraftResult(DraftOutcome.BATCHED, claim.run_id, claim.draft_key, None, detail)


def held_by(draft: DraftRow, owner: str) -> bool:
    """The draft row (read locked) is still the claim `owner` holds."""
    return draft.state == DraftState.CLAIMED and draft.claimed_by == owner


def add_entry(
    session: Session,
    recipe: Recipe,
    claim: Claim,
    number: int,
    wait_until: datetime,
    now: datetime,
) -> None:
    """The attempt row of a batch entry, not yet in any batch (`batch_ref` NULL)."""
    add_attempt(session, claim, recipe, number, now, **_entry_columns(wait_until))


def begin_entry(
    session: Session, recipe: Recipe, claim: Claim, wait_until: datetime, now: datetime
) -> int | None:
    """A slot's batch entry begins as every model call does (`begin_attempt`): its claim
    fenced, and held to `wait_until` plus takeover_after; its attempt row written, its
    number returned; None when its attempts are spent."""
    lease = wait_until + recipe.takeover_after - now
    return begin_attempt(
        session, claim.paid_under, recipe, now, now, lease=lease, **_entry_columns(wait_until)
    )


def _entry_columns(wait_until: datetime) -> dict[str, object]:
    """A batch entry's own columns of its attempt row (the others take their defaults)."""
    return {"mode": Drafting.BATCH.value, "wait_until": wait_until}


def _entries_query() -> Any:
    return (
        sa.select(AttemptRow, col(DraftRow.version), col(RunRow.slot_at))
        .join(DraftRow, col(DraftRow.key) == col(AttemptRow.draft_key))
        .join(RunRow, col(RunRow.id) == col(AttemptRow.run_id))
        .where(unfinished_batch_entry())
    )


# an entry's fields that are its attempt row's columns of the same name
_ENTRY_COLUMNS = (
    "run_id",
    "draft_key",
    "number",
    "recipe",
    "started_at",
    "wait_until",
    "batch_ref",
)


def _entry(row: AttemptRow, version: int, slot_at: datetime) -> Entry:
    assert row.wait_until is not None  # written with every batch entry
    columns = {name: getattr(row, name) for name in _ENTRY_COLUMNS}
    return Entry(owner=row.worker, version=version, slot_at=slot_at, **columns)


def unsent_entries(session: Session) -> list[Entry]:
    """Entries waiting for a batch to be gathered into, oldest first."""
    query = _entries_query().where(col(AttemptRow.batch_ref).is_(None))
    rows = session.execute(query.order_by(col(AttemptRow.started_at)).limit(ENTRIES_PER_BATCH))
    return [_entry(*row) for row in rows]


def entries_of(session: Session, batch_ref: str) -> list[Entry]:
    """The entries of one batch still waiting for their answer."""
    rows = session.execute(_entries_query().where(col(AttemptRow.batch_ref) == batch_ref))
    return [_entry(*row) for row in rows]


def late_entries(session: Session, now: datetime) -> list[Entry]:
    """Entries still waiting once their `wait_until` has passed: drafted synchronously."""
    rows = session.execute(_entries_query().where(col(AttemptRow.wait_until) < now))
    return [_entry(*row) for row in rows]


def waiting_by_recipe(session: Session) -> dict[str, int]:
    """Drafts waiting on a batch, by recipe (`galley status`, /metrics): the unfinished
    attempts only, through their partial index, never the ledger's history."""
    counts = session.exec(
        select(AttemptRow.recipe, sa.func.count())
        .where(unfinished_batch_entry())
        .group_by(col(AttemptRow.recipe))
    ).all()
    return {recipe: int(count) for recipe, count in counts}


def gathered_for(entries: list[Entry], recipes: dict[str, Recipe], now: datetime) -> bool:
    """Whether a batch should be sent now: some entry has waited its recipe's
    batch_gather (or its recipe left the config, and nothing will ever gather it)."""
    return any(
        e.recipe not in recipes or e.started_at + recipes[e.recipe].batch_gather <= now
        for e in entries
    )
