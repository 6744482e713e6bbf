"""`Status`, the operator API's answer to "how is each recipe doing", in its own module:
`galley status` builds it without loading every other read model (core/api/views.py
re-exports both; bench/cli_startup.py measures the start-up)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from core.policies import PollOutcome
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
    last_poll: str | None = (
        None  # an items recipe's latest poll: when, and how it went (docs/design.md §29)
    )


@dataclass(frozen=True)
class Status(Printable):
    recipes: list[RecipeStatus]
    uncertain: list[str]
    items: dict[str, str] = field(default_factory=dict)  # item run -> its title and link
    # docs/design.md §36: each known token expiry, "linkedin:…: token expires 2027-01-20 …"
    expiries: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "recipes": [jsonable(r) for r in self.recipes],
            "uncertain": self.uncertain,
            "items": self.items,
            "expiries": self.expiries,
        }

    def uncertain_labels(self) -> list[str]:
        """Uncertain runs as people read them: an item run with its item (docs/design.md §29)."""
        return [f"{run} {self.items[run]}" if run in self.items else run for run in self.uncertain]

    def _rows(self) -> list[tuple[Any, ...]]:
        return [
            (
                r.name,
                f"v{r.version}",
                f"paused ({r.paused_reason or 'no reason'})" if r.paused else "",
                f"{r.pending}/{r.pending_limit}",
                str(r.in_batch) if r.in_batch else "",
                r.next_slot,
                r.last_poll or "",
            )
            for r in self.recipes
        ]

    _COLUMNS = (
        "recipe",
        "version",
        "paused",
        "waiting/limit",
        "in a batch",
        "next slot",
        "last poll",
    )

    def _repr_html_(self) -> str:
        table = html_table("status", self._COLUMNS, self._rows())
        if not self.uncertain:
            return table
        return table + html_block("p", "Uncertain runs: " + ", ".join(self.uncertain_labels()))

    def __str__(self) -> str:
        text = text_table("status", self._COLUMNS, self._rows())
        uncertain = ", ".join(self.uncertain_labels())
        text += f"\nuncertain runs: {uncertain}" if self.uncertain else ""
        return text + "".join(f"\n{line}" for line in self.expiries)


def describe_poll(outcome: str, polled_at: datetime, detail: str | None) -> str:
    """An items recipe's latest poll as `galley status` and Home say it (docs/design.md §29)."""
    when = f"{polled_at:%Y-%m-%d %H:%M} UTC"
    return f"{when} read" if outcome == PollOutcome.READ else f"{when} failed: {detail}"


def describe_reissue(at: datetime, item: str) -> str:
    """The latest entry an items recipe's poll did not draft as a re-issue of a known item
    (docs/design.md §29), as `galley status` and Home say it."""
    return f"not drafted, a known link and title under a new id: {item} ({at:%Y-%m-%d %H:%M} UTC)"


def item_label(title: str, link: str | None) -> str:
    """An item as a run's label says it: its title, and its link."""
    return title + (f" <{link}>" if link else "")
