"""The gate consulted before a claim: pause, backpressure (docs/design.md §11) and budget.

Read inside the claim's transaction, with the recipe row locked, so two workers cannot
both pass the gate for the last free place in the review queue.
"""

from __future__ import annotations

import functools
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlmodel import Session, col, select

from core.drafting.attempts import waiting_in_batch
from core.models import AttemptRow, DraftRow, RecipeRow, UTCDateTime
from core.policies import SkipReason
from core.setup.config import Recipe
from core.states import DraftState
from core.store.history_pages import ready_counts


def queue_depth(session: Session, recipe: str | None, now: datetime) -> int:
    """Drafts people still have to review, plus drafts being written right now.

    Counting live claims keeps concurrent slots from overshooting `pending_limit`.
    """
    params: dict[str, object] = {"now": now} | ({} if recipe is None else {"recipe": recipe})
    return int(session.execute(_queue_depth_statement(recipe is not None), params).scalar_one())


@functools.cache
def _queue_depth_statement(of_one_recipe: bool) -> Any:
    """Built once, bound per call (every claim asks it: bench/draft_overhead.py)."""
    query = select(sa.func.count()).select_from(DraftRow)
    query = query.where(  # the IN lets SQLite seek ix_drafts_recipe_state, not scan
        col(DraftRow.state).in_([DraftState.READY, DraftState.CLAIMED]),
        sa.or_(
            col(DraftRow.state) == DraftState.READY,
            col(DraftRow.lease_until) > sa.bindparam("now", type_=UTCDateTime),
        ),
    )
    if of_one_recipe:
        query = query.where(col(DraftRow.recipe) == sa.bindparam("recipe"))
    return query


def ready_count(session: Session, recipe: str) -> int:
    return ready_counts(session, [recipe]).get(recipe, 0)


def tokens_today(session: Session, recipe: Recipe, now: datetime) -> int:
    """Input plus output tokens billed to the recipe since midnight in its own zone."""
    local = now.astimezone(recipe.zone)
    midnight = local.replace(hour=0, minute=0, second=0, microsecond=0)
    query = select(
        sa.func.coalesce(sa.func.sum(AttemptRow.input_tokens + AttemptRow.output_tokens), 0)
    ).where(col(AttemptRow.recipe) == recipe.name, col(AttemptRow.started_at) >= midnight)
    return int(session.exec(query).one())


def gate_reason(
    session: Session, recipe: Recipe, recipe_row: RecipeRow, now: datetime
) -> tuple[SkipReason, str] | None:
    """Why this recipe may not start a draft now, or None when it may."""
    if recipe_row.paused:
        return SkipReason.PAUSED, f"paused: {recipe_row.paused_reason or 'no reason given'}"
    depth = queue_depth(session, recipe.name, now)
    if depth >= recipe.pending_limit:
        return (
            SkipReason.BACKPRESSURE,
            f"drafting paused: {depth} draft{'' if depth == 1 else 's'} waiting "
            f"(limit {recipe.pending_limit})",
        )
    if recipe.daily_token_budget:
        spent = tokens_today(session, recipe, now)
        if spent >= recipe.daily_token_budget:
            return (
                SkipReason.BUDGET,
                f"daily token budget spent: {spent} of {recipe.daily_token_budget}",
            )
    return None


def others_drafting(session: Session, recipe: str, key: str, now: datetime) -> int:
    """Live claims of this recipe for other draft keys: a previous run still working. An
    entry waiting in a batch is not working (nothing runs or is paid for until its batch
    ends), so a batch recipe's next slot is not skipped for it."""
    query = (
        select(sa.func.count())
        .select_from(DraftRow)
        .where(
            col(DraftRow.recipe) == recipe,
            col(DraftRow.key) != key,
            col(DraftRow.state) == DraftState.CLAIMED,
            col(DraftRow.lease_until) > now,
            ~waiting_in_batch(col(DraftRow.key)),
        )
    )
    return int(session.exec(query).one())
