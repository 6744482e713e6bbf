"""What a web page says of itself in its `<head>` (docs/design.md §32): its OpenGraph tags
(`og:title`, `og:image`, `og:image:alt`, …), `<meta name="description">` and `<title>`.
Read by the `url` reader (a page's image), an items recipe's snapshot (the linked page's
image) and a Bluesky link card. Parses text; reads nothing from the network.
"""

from __future__ import annotations

from dataclasses import dataclass
from html.parser import HTMLParser
from urllib.parse import urljoin

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
    parser = _OpenGraph()
    parser.feed(html[:PAGE_LIMIT])
    return PageTags(parser.meta, parser.title)


class _OpenGraph(HTMLParser):
    """`<meta property="og:…" content="…">`, `<meta name="description">` and `<title>`."""

    def __init__(self) -> None:
        super().__init__()
        self.meta: dict[str, str] = {}
        self.title = ""
        self._in_title = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = {name: value or "" for name, value in attrs}
        if tag == "meta":
            key = (found.get("property") or found.get("name") or "").lower()
            if key and "content" in found and key not in self.meta:
                self.meta[key] = found["content"]
        self._in_title = tag == "title"

    def handle_endtag(self, tag: str) -> None:
        self._in_title = False

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data
