"""What a refusal at the gate (docs/design.md §11) leaves behind besides a skip: a
backpressure episode opened once, and an item's run left waiting (docs/design.md §29).

Called inside the claim's transaction, with the recipe and run rows locked; never skips.
"""

from __future__ import annotations

from datetime import datetime

from sqlmodel import Session

from core.models import RecipeRow, RunRow
from core.policies import PendingReason, SkipReason
from core.states import RunState
from core.store.transitions import guarded_update, move_run, note_run


def open_episode(
    session: Session, recipe_row: RecipeRow, reason: SkipReason, now: datetime
) -> None:
    """A backpressure refusal opens an episode, once: people are told it began and ended."""
    episode_open = (
        recipe_row.backpressure_since is not None and recipe_row.backpressure_resumed_at is None
    )
    if reason == SkipReason.BACKPRESSURE and not episode_open:
        recipe_row.backpressure_since, recipe_row.backpressure_resumed_at = now, None
        session.add(recipe_row)


def item_waits(
    session: Session,
    run: RunRow,
    recipe_row: RecipeRow,
    refusal: tuple[SkipReason, str],
    *,
    actor: str,
    now: datetime,
) -> None:
    """An item's run the gate refuses stays `pending` for the next poll, oldest first, until
    `item_ttl` (docs/design.md §29); its history says why once per reason. A failed one a
    person retried waits the same way: its polls draft it once there is room."""
    reason, detail = refusal
    open_episode(session, recipe_row, reason, now)
    if run.state == RunState.FAILED:
        why = f"waits: {detail}"
        waits = PendingReason.ITEM_WAITS
        move_run(session, run, RunState.PENDING, actor=actor, at=now, reason=waits, detail=why)
    elif run.state == RunState.PENDING and run.reason != PendingReason.ITEM_WAITS:
        run.reason, run.updated_at = PendingReason.ITEM_WAITS, now
        guarded_update(session, run, state=RunState.PENDING)
        note_run(session, run, actor=actor, at=now, reason=f"waits: {detail}")
