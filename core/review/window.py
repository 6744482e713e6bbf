"""A ready draft's review window (docs/design.md §11): when it closes. The one rule that
expiry, a click on the draft and the digest's warning read; it never moves a row.
"""

from __future__ import annotations

from datetime import datetime

from core.setup.config import Recipe


def review_closes_at(recipe: Recipe, ready_at: datetime) -> datetime:
    """The instant a draft ready at `ready_at` stops taking decisions and expires."""
    return ready_at + recipe.review_window


def review_window_passed(recipe: Recipe | None, ready_at: datetime | None, now: datetime) -> bool:
    """Whether the draft's window has closed by `now`. Never for a draft not yet ready, nor
    for one whose recipe left the file (it keeps its drafts until the recipe returns)."""
    if recipe is None or ready_at is None:
        return False
    return now >= review_closes_at(recipe, ready_at)
