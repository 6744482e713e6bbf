"""HTML as the plain text a model is shown: paragraphs and list items on their own
lines, entities decoded, scripts and styles dropped. Never keeps a tag or an attribute,
so nothing in a source's markup reaches the prompt as markup.

Parsed by lxml (libxml2's HTML parser, linear in the page), never by the standard
library's `HTMLParser`, which is quadratic on malformed markup before Python 3.11.13
(CVE-2025-6069): a hostile page must not buy minutes of CPU with a few hundred KB.
"""

from __future__ import annotations

import re

from lxml import etree

from core.sources.html_tree import parsed_html

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


def html_to_text(html: str) -> str:
    """The text of an HTML fragment or page, one paragraph per line group."""
    root = parsed_html(html)
    if root is None:
        return ""
    lines = (_SPACES.sub(" ", line).strip() for line in "".join(_text_parts(root)).split("\n"))
    return _BLANK_LINES.sub("\n\n", "\n".join(lines)).strip()


def _text_parts(root: etree._Element) -> list[str]:
    """The page's text with the line breaks its blocks make, in document order (walked
    without recursion: a page's nesting is the page's to choose)."""
    parts: list[str] = []
    skipping = 0
    for event, element in etree.iterwalk(root, events=("start", "end")):
        tag = element.tag if isinstance(element.tag, str) else ""
        if event == "start":
            if tag in _SKIPPED:
                skipping += 1
            elif tag == "br":
                parts.append("\n")
            elif tag in _BLOCKS:
                parts.append("\n\n" if tag != "li" else "\n- ")
            if not skipping and tag and element.text:
                parts.append(element.text)
            continue
        if tag in _SKIPPED:
            skipping = max(0, skipping - 1)
        elif tag in _BLOCKS and tag != "li":
            parts.append("\n")
        if not skipping and element.tail and element is not root:
            parts.append(element.tail)
    return parts
