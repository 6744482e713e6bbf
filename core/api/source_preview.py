"""`galley sources RECIPE [--slot ISO]` (docs/design.md §27): what a run would read, read
now, without drafting and without storing anything. Each source is asked once (no
retries), so a network source answers or fails within its `call_timeout`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from core.api.views import SnapshotList, SourceItemView
from core.drafting.basis import SourceAccess
from core.render import Printable, html_block, html_table, jsonable
from core.setup.config import Recipe
from core.slots.schedule import Slot
from core.sources.items import SourceReadError
from core.sources.reading import read_source
from core.sources.window import window_for


@dataclass(frozen=True)
class SourceFailure:
    source: str
    required: bool
    answer: str  # one line: the status and what the server said


@dataclass(frozen=True)
class SourcesPreview(Printable):
    """What the run of `recipe` at `slot` would read: the window, the items, and the
    sources that failed (a required one would fail the run: `source_failed`)."""

    run: str
    window_start: datetime | None
    window_end: datetime
    items: SnapshotList = field(default_factory=SnapshotList)
    failures: tuple[SourceFailure, ...] = ()

    def _window(self) -> str:
        start = self.window_start.isoformat() if self.window_start else "the beginning"
        return f"{self.run}: items dated after {start}, up to {self.window_end.isoformat()}"

    def _failure_lines(self) -> list[str]:
        return [
            f"{f.source} ({'required: the run fails' if f.required else 'optional: left out'}): "
            f"{f.answer}"
            for f in self.failures
        ]

    def to_json(self) -> dict[str, Any]:
        return {
            "run": self.run,
            "window_start": jsonable(self.window_start),
            "window_end": jsonable(self.window_end),
            "items": self.items.to_json(),
            "failures": [jsonable(f) for f in self.failures],
        }

    def __str__(self) -> str:
        parts = [self._window(), str(self.items) if self.items else "no items in the window"]
        return "\n\n".join(parts + self._failure_lines())

    def _repr_html_(self) -> str:
        rows = self.items.records(self.items.column_names())
        parts = [
            html_block("p", self._window()),
            html_table("sources", self.items.column_names(), rows),
        ]
        parts += [html_block("p", line) for line in self._failure_lines()]
        return "".join(parts)


def preview_sources(recipe: Recipe, slot: Slot, access: SourceAccess) -> SourcesPreview:
    """Read every source of `recipe` over its window at `slot`, once each."""
    window = window_for(recipe, slot)
    context = access.context(recipe)
    items: list[SourceItemView] = []
    failures: list[SourceFailure] = []
    for spec in recipe.sources:
        try:
            found = read_source(spec, window, context)
        except SourceReadError as failure:
            failures.append(SourceFailure(spec.label, spec.required, failure.answer))
            continue
        items += (SourceItemView.of(item) for item in found)
    return SourcesPreview(
        slot.run_id(recipe.name), window.start, window.end, SnapshotList(items), tuple(failures)
    )
