"""One source and one window in, its items out (docs/design.md §26).

`read_source` picks the reader for a source's kind and applies what every kind shares:
only items dated in the window (an undated item is kept: the snapshot decides whether
it is new), newest first, at most `max_items`; `check_source` is one read for
`galley check --online`. Neither stores nor drafts.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import assert_never

from core.sources.feeds import read_feed
from core.sources.files import read_files
from core.sources.github import read_github
from core.sources.items import ReadContext, SourceItem, SourceReadError, Window
from core.sources.pages import read_page
from core.sources.slack_history import read_slack
from core.sources.specs import (
    FeedSource,
    FileSource,
    GithubSource,
    SlackSource,
    SourceSpec,
    UrlSource,
)


def read_source(spec: SourceSpec, window: Window, context: ReadContext) -> list[SourceItem]:
    """The source's items in `window`, newest first (undated ones last), at most
    `spec.max_items`. Raises SourceReadError when the source cannot be read."""
    items = _read_kind(spec, window, context)
    in_window = [
        item for item in items if item.published_at is None or window.holds(item.published_at)
    ]
    return newest_first(in_window)[: spec.max_items]


def newest_first(items: list[SourceItem]) -> list[SourceItem]:
    """Dated items newest first, then undated ones in the order the source gave them."""
    dated = [item for item in items if item.published_at is not None]
    undated = [item for item in items if item.published_at is None]
    dated.sort(key=_published, reverse=True)
    return dated + undated


def _published(item: SourceItem) -> datetime:
    assert item.published_at is not None
    return item.published_at


def _read_kind(spec: SourceSpec, window: Window, context: ReadContext) -> list[SourceItem]:
    match spec:
        case FileSource():
            return read_files(spec, context)
        case FeedSource():
            return read_feed(spec, context)
        case GithubSource():
            return read_github(spec, window, context)
        case SlackSource():
            return read_slack(spec, window, context)
        case UrlSource():
            return read_page(spec, context)
        case _:
            assert_never(spec)


@dataclass(frozen=True)
class SourceCheck:
    """One source read once for `galley check --online`: its item count, or why not."""

    recipe: str
    source: str
    required: bool
    items: int | None  # None: the read failed
    failure: str = ""

    @property
    def blocking(self) -> bool:
        """A required source that cannot be read fails its runs: the check fails too."""
        return self.items is None and self.required

    def __str__(self) -> str:
        where = f"source {self.recipe}/{self.source}"
        if self.items is not None:
            return f"{where}: ok: {self.items} item{'' if self.items == 1 else 's'}"
        optional = " (optional: left out of drafts)" if not self.required else ""
        return f"{where}: FAILED{optional}: {self.failure}"


def check_source(
    recipe: str, spec: SourceSpec, window: Window, context: ReadContext
) -> SourceCheck:
    """Read `spec` once; never raises for a source's failure."""
    try:
        items = read_source(spec, window, context)
    except SourceReadError as exc:
        retry = " (may pass later)" if exc.retryable else ""
        return SourceCheck(recipe, spec.label, spec.required, None, f"{exc.answer}{retry}")
    return SourceCheck(recipe, spec.label, spec.required, len(items))
