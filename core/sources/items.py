"""What every reader returns and every later step reads (docs/design.md §26).

A reader turns one source and one window into `SourceItem`s, or raises `SourceReadError`
saying whether asking again may help. The items a run drafts from are its snapshot:
stored before the model is paid for, and read back by every later attempt. An item never
keeps a credential its links held.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from urllib.parse import urlsplit

from core.egress.way_out import Egress
from core.errors import GalleyError
from core.sources.url_credentials import without_credentials


@dataclass(frozen=True)
class Window:
    """Items dated in (start, end]: the previous slot to this slot, both from the
    schedule, so every process and every retry asks the same question. `start` is None
    for a recipe's first slot (nothing before it to compare with)."""

    start: datetime | None
    end: datetime

    def holds(self, moment: datetime) -> bool:
        return (self.start is None or moment > self.start) and moment <= self.end

    @classmethod
    def lasting(cls, length: timedelta, end: datetime) -> Window:
        """`window = "7d"`: the fixed length before this slot."""
        return cls(start=end - length, end=end)


@dataclass(frozen=True)
class ItemImage:
    """The image an item brings (docs/design.md §32): a feed's enclosure or media tag, or
    a page's `og:image`, with words that say what it shows (its caption, else the item's
    title). Once its run's snapshot is taken, `sha256` names the bytes kept for it in the
    image library, or `note` says in one line why none were kept."""

    url: str
    caption: str = ""
    sha256: str | None = None
    note: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "url", without_credentials(self.url))

    @property
    def name(self) -> str:
        """What people call it: the last part of its URL's path."""
        path = urlsplit(self.url).path.rstrip("/")
        return path.rsplit("/", 1)[-1] or "image"


@dataclass(frozen=True)
class SourceItem:
    """One thing that happened: a feed entry, a release, a merged pull request, a Slack
    message with its thread, a page's main text or a file. `published_at` is None where
    the source gives no date (such an item is new the first time a recipe sees it)."""

    source: str  # the source's label (its `name`)
    item_id: str  # stable within the source: a feed guid, a release id, a message ts, …
    title: str
    link: str | None
    published_at: datetime | None
    text: str
    image: ItemImage | None = None  # not in the content hash: a new image is no edit

    def __post_init__(self) -> None:
        """Made without a credential its links held (`user:password@`, `?token=`): an
        item is stored, shown, given to the model and may be posted. A title that was the
        link itself (a feed entry without one) is the link as kept."""
        link = without_credentials(self.link) if self.link else None
        if self.title == self.link:
            object.__setattr__(self, "title", link or "")
        object.__setattr__(self, "link", link or None)
        object.__setattr__(self, "item_id", without_credentials(self.item_id) or self.item_id)

    @property
    def content_hash(self) -> str:
        """sha256 over what the model is shown, so an edit upstream is seen as one."""
        digest = hashlib.sha256()
        for part in (self.title, self.link or "", self.text):
            digest.update(part.encode("utf-8"))
            digest.update(b"\x00")
        return digest.hexdigest()


@dataclass(frozen=True)
class ReadContext:
    """What a reader needs beside its spec and window."""

    config_dir: Path  # `file` sources are globbed here
    timeout: float  # seconds per read, redirects included (the recipe's `call_timeout`)
    github_token: str | None = None  # GALLEY_GITHUB_TOKEN, optional
    slack_token: str | None = None  # the bot's own token, for `slack` sources
    slack_api: str | None = None  # GALLEY_SLACK_API_URL (a local fake in tests)
    user_names: dict[str, str] = field(default_factory=dict)  # Slack user id -> name, cached
    egress: Egress = field(default_factory=Egress)  # `[egress] allow`, for found URLs


class SourceReadError(GalleyError):
    """A source could not be read. `answer` is one line (the status and what the server
    said); `retryable` is true where asking again may help (timeouts, 5xx, 429)."""

    def __init__(self, source: str, answer: str, *, retryable: bool) -> None:
        self.source = source
        self.answer = answer
        self.retryable = retryable
        super().__init__(f"source {source!r}: {answer}")
