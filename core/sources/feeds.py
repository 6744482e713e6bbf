"""The `feed` reader: RSS 0.9x/1.0/2.0 and Atom, by feedparser (docs/design.md §26).

One item per entry: its guid (else its link, else its title) is its id, its text the
entry's content or summary as plain text, relative links resolved against the feed's
own address. Its image (docs/design.md §32) is an enclosure of an image type, else a
`media:content` that is an image, else a `media:thumbnail`: its URL noted, never
downloaded here. A document that is no feed is a clear failure, never an empty window.
"""

from __future__ import annotations

import io
import time
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urljoin
from xml.sax import SAXException

from core.egress.client import Fetched
from core.sources.fetching import fetch, source_client
from core.sources.items import ItemImage, ReadContext, SourceItem, SourceReadError
from core.sources.plain_text import html_to_text
from core.sources.source_secrets import source_secret
from core.sources.specs import FeedSource

_HTML_TYPES = ("text/html", "application/xhtml+xml")


def read_feed(spec: FeedSource, context: ReadContext) -> list[SourceItem]:
    """Every entry of the feed at `spec.url`, in the feed's order."""
    with source_client(context, secret=source_secret(spec)) as client:
        answer = fetch(client, spec.label, spec.url, configured=True)
    return feed_items(spec.label, answer)


def feed_items(source: str, answer: Fetched) -> list[SourceItem]:
    """One item per entry of the feed `answer` holds, its links resolved against the
    address the feed came from."""
    parsed = parse_feed(source, answer)
    return [_entry_item(source, entry, answer.url) for entry in parsed.entries]


def parse_feed(source: str, answer: Fetched) -> Any:
    """feedparser's reading of `answer`; SourceReadError if it is no RSS or Atom feed, or
    XML too broken to give a single entry. A feed with small faults (an HTML entity, a
    wrong charset) is read as every feed reader reads it: what it says is kept."""
    headers = {
        "content-type": answer.headers.get("content-type", "application/xml"),
        "content-location": answer.url,
    }
    import feedparser  # 0.4 s to import: paid only by a recipe that reads a feed

    # A stream, never bytes: feedparser opens bytes that name a local file as that file.
    parsed = feedparser.parse(io.BytesIO(answer.body), response_headers=headers)
    fault = parsed.get("bozo_exception")
    if not parsed.get("version"):
        why = fault or "no <rss>, <rdf:RDF> or <feed> element"
        raise SourceReadError(
            source, f"{answer.where} is not an RSS or Atom feed: {why}", retryable=False
        )
    if isinstance(fault, SAXException) and not parsed.entries:
        raise SourceReadError(
            source, f"{answer.where} is not well-formed XML: {fault}", retryable=False
        )
    return parsed


def _entry_item(source: str, entry: Any, feed_url: str) -> SourceItem:
    link = entry.get("link") or None
    title = _plain(entry.get("title_detail")) or html_to_text(entry.get("title", ""))
    return SourceItem(
        source=source,
        item_id=entry.get("id") or link or title,
        title=title or (link or ""),
        link=link,
        published_at=_entry_date(entry),
        text=_entry_text(entry),
        image=entry_image(entry, feed_url, title),
    )


def entry_image(entry: Any, feed_url: str, title: str) -> ItemImage | None:
    """The entry's image: an `<enclosure>` of an image type, else a `media:content` with
    `medium="image"` or an image type, else a `media:thumbnail`; its URL resolved against
    the feed's. Its caption is the tag's own title, else the entry's title (feedparser
    folds `media:title` and `media:description` into the entry's own title and content,
    so they cannot be told from them)."""
    for found in _image_tags(entry):
        url = str(found.get("href") or found.get("url") or "").strip()
        if url:
            caption = " ".join(str(found.get("title") or "").split()) or title
            return ItemImage(urljoin(feed_url, url), caption)
    return None


def _image_tags(entry: Any) -> list[dict[str, Any]]:
    def is_image(tag: dict[str, Any]) -> bool:
        return str(tag.get("type", "")).lower().startswith("image/")

    enclosures = [e for e in entry.get("enclosures") or [] if is_image(e)]
    media = [
        m for m in entry.get("media_content") or [] if m.get("medium") == "image" or is_image(m)
    ]
    return [*enclosures, *media, *(entry.get("media_thumbnail") or [])]


def _entry_text(entry: Any) -> str:
    for detail in [*entry.get("content", []), entry.get("summary_detail")]:
        text = _plain(detail)
        if text:
            return text
    return html_to_text(entry.get("summary", ""))


def _plain(detail: Any) -> str:
    """A feedparser text construct (`{type, value}`) as plain text."""
    if not detail or not detail.get("value"):
        return ""
    value: str = detail["value"]
    if detail.get("type") in _HTML_TYPES:
        return html_to_text(value)
    return value.strip()


def _entry_date(entry: Any) -> datetime | None:
    """When the entry was published (else last updated), in UTC; None if it says not."""
    for key in ("published_parsed", "updated_parsed", "created_parsed"):
        parsed: time.struct_time | None = entry.get(key)
        if parsed is not None:
            return datetime(*parsed[:6], tzinfo=UTC)
    return None
