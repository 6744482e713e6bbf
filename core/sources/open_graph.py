"""What a web page says of itself in its `<head>` (docs/design.md §32): its OpenGraph tags
(`og:title`, `og:image`, `og:image:alt`, …), `<meta name="description">` and `<title>`.
Read by the `url` reader (a page's image), an items recipe's snapshot (the linked page's
image) and a Bluesky link card. Parses text, by lxml (core/sources/html_tree.py), which
stays linear on hostile markup; reads nothing from the network.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urljoin

from core.sources.html_tree import parsed_html

PAGE_LIMIT = 1_000_000  # characters of a page parsed for its tags


@dataclass(frozen=True)
class PageTags:
    """A page's `<meta>` tags by lower-cased property or name (the first of each), and
    its `<title>`."""

    meta: dict[str, str]
    title: str

    def image_url(self, page_url: str) -> str | None:
        """The page's `og:image`, resolved against the page's own address."""
        src = (self.meta.get("og:image") or self.meta.get("og:image:url") or "").strip()
        return urljoin(page_url, src) if src else None

    def image_caption(self) -> str:
        """What the page says its image shows: `og:image:alt`, else its title."""
        for said in (self.meta.get("og:image:alt"), self.meta.get("og:title"), self.title):
            if said and said.strip():
                return " ".join(said.split())
        return ""


def page_tags(html: str) -> PageTags:
    """The page's tags, from at most PAGE_LIMIT characters of it (the `<head>` is at the
    top), parsed by lxml, which stays linear on malformed markup."""
    root = parsed_html(html[:PAGE_LIMIT])
    if root is None:
        return PageTags({}, "")
    meta: dict[str, str] = {}
    for tag in root.iter("meta"):
        key = (tag.get("property") or tag.get("name") or "").lower()
        if key and tag.get("content") is not None and key not in meta:
            meta[key] = tag.get("content") or ""
    title = next((t.text or "" for t in root.iter("title")), "")
    return PageTags(meta, title)
