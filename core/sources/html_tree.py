"""A page's HTML as a tree, by lxml: linear in the page whatever its markup (the standard
library's `HTMLParser` is quadratic on malformed markup before Python 3.11.13,
CVE-2025-6069). Never fetches anything a page names (no network, no entities loaded).
"""

from __future__ import annotations

from lxml import etree

_PARSER = etree.HTMLParser(
    encoding="utf-8", recover=True, no_network=True, remove_comments=True, remove_pis=True
)


def parsed_html(html: str) -> etree._Element | None:
    """The document's root element; None for text that holds no element at all."""
    if not html.strip():
        return None
    try:
        # bytes in the one encoding the parser is told: a page's own declaration of
        # another (already decoded by the reader) must not be believed a second time
        return etree.fromstring(html.encode("utf-8", "replace"), _PARSER)
    except (etree.ParserError, etree.XMLSyntaxError, ValueError):
        return None
