"""The keys of an items recipe (docs/design.md §29): `trigger = "items"`, its one `source`,
`backfill` and `item_ttl`, parsed beside the config file's other keys.

`source` is read as the recipe's only entry of `sources`, so every reader, the snapshot and
the prompt take it as they take any source; a problem in it is named `source.…`, as written.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field

from core.drafting_policies import Drafting
from core.policies import Trigger
from core.setup.durations import Duration

SOURCE_KEY = "source"
SOURCES_KEY = "sources"
POLL_MAX_ITEMS = 500  # an items source's `max_items` unless it says: every entry a feed serves
BACKFILL_MAX = POLL_MAX_ITEMS  # a poll never sees more items than this


class ItemKeys(BaseModel):
    """What a recipe says about its trigger; a scheduled recipe leaves them all alone."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    trigger: Trigger = Trigger.SCHEDULE
    backfill: int = Field(default=0, ge=0, le=BACKFILL_MAX)  # newest items drafted at first poll
    item_ttl: Duration = timedelta(days=7)  # an item waiting on backpressure this long is skipped


class _ItemRecipe(Protocol):
    @property
    def trigger(self) -> Trigger: ...
    @property
    def sources(self) -> tuple[Any, ...]: ...
    @property
    def draft_ahead(self) -> timedelta: ...
    @property
    def drafting(self) -> Drafting: ...
    @property
    def model_fields_set(self) -> set[str]: ...


def lift_source(raw: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """`source = {…}` as `sources = [{…}]`, and whether it was written so. A recipe that
    writes both keeps both, so the model refuses the one it does not take."""
    if SOURCE_KEY not in raw or SOURCES_KEY in raw:
        return raw, False
    lifted = {key: value for key, value in raw.items() if key != SOURCE_KEY}
    source = raw[SOURCE_KEY]
    if isinstance(source, dict):  # a poll sees every entry a feed serves, not the newest 20
        source = {"max_items": POLL_MAX_ITEMS} | source
    return lifted | {SOURCES_KEY: [source]}, True


def name_source(problem: str, lifted: bool) -> str:
    """A problem in a lifted `source` named as the person wrote it (`source.url`)."""
    return problem.replace(f": {SOURCES_KEY}[1]", f": {SOURCE_KEY}", 1) if lifted else problem


def item_trigger_problems(recipe: _ItemRecipe, label: str, lifted: bool) -> list[str]:
    """One line per key that does not fit the recipe's trigger."""
    if recipe.trigger == Trigger.SCHEDULE:
        return [
            f'{label}: {key}: only with trigger = "items" (a scheduled recipe reads `sources`)'
            for key in (SOURCE_KEY, "backfill", "item_ttl")
            if key in recipe.model_fields_set or (key == SOURCE_KEY and lifted)
        ]
    problems = []
    if not lifted:
        problems.append(
            f'{label}: source: trigger = "items" reads one `source = {{ kind = … }}`'
            + (", not `sources`" if recipe.sources else "")
        )
    if recipe.draft_ahead > timedelta(0):
        problems.append(f"{label}: draft_ahead: an items recipe drafts each item as it comes")
    if recipe.drafting == Drafting.BATCH:  # a batch waits on a slot's time; an item has none
        problems.append(
            f'{label}: drafting: "batch" does not go with trigger = "items" (an item is '
            'drafted as it comes, not gathered for a slot\'s time); use drafting = "sync"'
        )
    return problems
