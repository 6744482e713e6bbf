"""HTML as the plain text a model is shown: paragraphs and list items on their own
lines, entities decoded, scripts and styles dropped. Never keeps a tag or an attribute,
so nothing in a source's markup reaches the prompt as markup.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

_BLOCKS = frozenset(
    (
        *("address", "article", "aside", "blockquote", "dd", "div", "dl", "dt", "figcaption"),
        *("figure", "footer", "h1", "h2", "h3", "h4", "h5", "h6", "header", "hr", "li"),
        *("main", "nav", "ol", "p", "pre", "section", "table", "tr", "ul"),
    )
)
_SKIPPED = frozenset(("script", "style", "template", "noscript"))
_SPACES = re.compile(r"[ \t\r\f\v\u00a0]+")
_BLANK_LINES = re.compile(r"\n{3,}")


class _TextCollector(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._skipping = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _SKIPPED:
            self._skipping += 1
        elif tag == "br":
            self.parts.append("\n")
        elif tag in _BLOCKS:
            self.parts.append("\n\n" if tag != "li" else "\n- ")

    def handle_endtag(self, tag: str) -> None:
        if tag in _SKIPPED:
            self._skipping = max(0, self._skipping - 1)
        elif tag in _BLOCKS and tag != "li":
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if not self._skipping:
            self.parts.append(data)


def html_to_text(html: str) -> str:
    """The text of an HTML fragment or page, one paragraph per line group."""
    collector = _TextCollector()
    collector.feed(html)
    collector.close()
    lines = (_SPACES.sub(" ", line).strip() for line in "".join(collector.parts).split("\n"))
    return _BLANK_LINES.sub("\n\n", "\n".join(lines)).strip()
