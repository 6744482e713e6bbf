"""`Status`, the operator API's answer to "how is each recipe doing", in its own module:
`galley status` builds it without loading every other read model (core/api/views.py
re-exports both; bench/cli_startup.py measures the start-up)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from core.render import Printable, html_block, html_table, jsonable, text_table


@dataclass(frozen=True)
class RecipeStatus:
    name: str
    version: int
    paused: bool
    pending: int
    pending_limit: int
    next_slot: str | None
    paused_reason: str | None = None
    in_batch: int = 0  # drafts waiting on a Message Batch (docs/design.md §21)


@dataclass(frozen=True)
class Status(Printable):
    recipes: list[RecipeStatus]
    uncertain: list[str]

    def to_json(self) -> dict[str, Any]:
        return {"recipes": [jsonable(r) for r in self.recipes], "uncertain": self.uncertain}

    def _rows(self) -> list[tuple[Any, ...]]:
        return [
            (
                r.name,
                f"v{r.version}",
                f"paused ({r.paused_reason or 'no reason'})" if r.paused else "",
                f"{r.pending}/{r.pending_limit}",
                str(r.in_batch) if r.in_batch else "",
                r.next_slot,
            )
            for r in self.recipes
        ]

    _COLUMNS = ("recipe", "version", "paused", "waiting/limit", "in a batch", "next slot")

    def _repr_html_(self) -> str:
        table = html_table("status", self._COLUMNS, self._rows())
        if not self.uncertain:
            return table
        return table + html_block("p", "Uncertain runs: " + ", ".join(self.uncertain))

    def __str__(self) -> str:
        text = text_table("status", self._COLUMNS, self._rows())
        return text + ("\nuncertain runs: " + ", ".join(self.uncertain) if self.uncertain else "")
