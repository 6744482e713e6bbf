"""`galley sources RECIPE` on an items recipe (docs/design.md §29): what its next poll would
find, read now: the items not yet seen, and what a first poll's backfill would make of
them. The source is asked once; nothing is recorded, drafted or stored.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from core.api.source_preview import SourceFailure
from core.api.views import SnapshotList, SourceItemView
from core.drafting.basis import Reader, SourceAccess
from core.policies import ItemFate
from core.render import Printable, html_block, html_table, jsonable
from core.setup.config import Recipe
from core.sources.items import SourceReadError, Window
from core.sources.polled import PollPlan, plan_poll, was_polled
from core.sources.reading import read_source
from core.store.engine import Store


@dataclass(frozen=True)
class ItemsPreview(Printable):
    """The next poll of an items recipe: its new items (drafted, oldest first), those a
    first poll backfills, and how many are known or re-issued under a new id."""

    recipe: str
    source: str
    first_poll: bool
    backfill: int
    new: SnapshotList = field(default_factory=SnapshotList)
    backfilled: SnapshotList = field(default_factory=SnapshotList)
    reissued: int = 0
    known: int = 0
    failures: tuple[SourceFailure, ...] = ()

    def _lines(self) -> list[str]:
        head = f"{self.recipe}: the next poll of {self.source}"
        if self.first_poll:
            head += " is its first: what is there is skipped (backfill)"
            head += f", but the newest {self.backfill}" if self.backfill else ""
        lines = [head, f"{len(self.new)} new item(s) would be drafted, oldest first"]
        if self.backfilled:
            lines.append(f"{len(self.backfilled)} already there: skipped (backfill)")
        lines.append(f"{self.known} known; {self.reissued} re-issued under a new id (no run)")
        return lines + [f"{f.source}: {f.answer}" for f in self.failures]

    def to_json(self) -> dict[str, Any]:
        return {
            "recipe": self.recipe,
            "source": self.source,
            "first_poll": self.first_poll,
            "backfill": self.backfill,
            "new": self.new.to_json(),
            "backfilled": self.backfilled.to_json(),
            "reissued": self.reissued,
            "known": self.known,
            "failures": [jsonable(f) for f in self.failures],
        }

    def __str__(self) -> str:
        tables = [str(self.new)] if self.new else []
        return "\n\n".join(["\n".join(self._lines()), *tables])

    def _repr_html_(self) -> str:
        rows = self.new.records(self.new.column_names())
        parts = [html_block("p", line) for line in self._lines()]
        return "".join([*parts, html_table("new items", self.new.column_names(), rows)])


def preview_items(
    store: Store,
    recipe: Recipe,
    access: SourceAccess,
    now: datetime,
    *,
    reader: Reader = read_source,
) -> ItemsPreview:
    """Read the items recipe's source once and say what a poll now would make of it."""
    spec = recipe.sources[0]
    preview = ItemsPreview(recipe.name, spec.label, first_poll=False, backfill=recipe.backfill)
    try:
        items = reader(spec, Window(start=None, end=now), access.context(recipe))
    except SourceReadError as failure:
        return replace(preview, failures=(SourceFailure(spec.label, True, failure.answer),))
    with store.read() as session:
        first_poll = not was_polled(session, recipe.name, spec.label)
        plan = plan_poll(
            session, recipe.name, spec.label, items, first_poll=first_poll, backfill=recipe.backfill
        )
    return _of_plan(preview, plan)


def _of_plan(preview: ItemsPreview, plan: PollPlan) -> ItemsPreview:
    def views(fate: ItemFate) -> SnapshotList:
        return SnapshotList(SourceItemView.of(p.item) for p in plan.unseen if p.fate == fate)

    reissued = sum(1 for planned in plan.unseen if planned.fate == ItemFate.REISSUE)
    return replace(
        preview,
        first_poll=plan.first_poll,
        new=views(ItemFate.NEW),
        backfilled=views(ItemFate.BACKFILL),
        reissued=reissued,
        known=plan.known,
    )
