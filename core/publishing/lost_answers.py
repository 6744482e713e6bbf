"""A send whose answer was lost (docs/design.md §9, §12): the run is `uncertain`, and the
destination is looked up before anyone is paged. Where a post is found by its listing
(Mastodon, a LinkedIn organization) the look-up waits the destination's read delay, its
`lookup_grace`: before then, absent may only mean not shown yet. People are told only
when a look-up after the grace cannot tell. The one rule the publish pass and the alert
sweep both read; it never calls a destination.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from core.models import RunRow
from core.setup.config import Recipe

LOOK_UP_ALLOWANCE = timedelta(minutes=2)
"""How long the alert sweep leaves the publish pass (every few seconds) to look an
uncertain run up once its grace has passed: past that, nothing is looking, so people
are told anyway."""


def lookup_grace(recipe: Recipe | None) -> timedelta:
    """The longest read delay among the recipe's targets (none without a recipe)."""
    if recipe is None:
        return timedelta(0)
    return max((target.lookup_grace for target in recipe.targets), default=timedelta(0))


def look_up_due(run: RunRow, recipe: Recipe | None, now: datetime) -> bool:
    """An uncertain run may be looked up, and a look-up that cannot tell believed: its
    lost answer is at least the grace old (a run uncertain since `updated_at`)."""
    return now >= run.updated_at + lookup_grace(recipe)


def sweep_alert_due(run: RunRow, recipe: Recipe | None, now: datetime) -> bool:
    """The sweep tells people of an uncertain run nobody settled: at once where the
    look-up needs no grace (the pass that made it uncertain told them), else once the
    publish pass has had LOOK_UP_ALLOWANCE after the grace to look."""
    grace = lookup_grace(recipe)
    return grace == timedelta(0) or look_up_due(run, recipe, now - LOOK_UP_ALLOWANCE)
