"""HTML from the open web is parsed in time linear in its size (docs/design.md §33): a
page crafted against the standard library's `HTMLParser` (quadratic on unclosed comments
and tags before Python 3.11.13, CVE-2025-6069) costs a fraction of a CPU second, both
for its text (a `url` source's fallback, a feed entry's HTML) and its OpenGraph tags."""

from __future__ import annotations

import time

import pytest

from core.sources.open_graph import page_tags
from core.sources.plain_text import html_to_text

HOSTILE = {
    "unclosed comments": "<!--" * 50_000,  # 200 KB: about 25 CPU seconds the old way
    "unclosed tags": "<a" * 100_000,
}


@pytest.mark.parametrize("page", HOSTILE.values(), ids=HOSTILE.keys())
def test_a_page_crafted_against_a_quadratic_parser_is_read_in_linear_time(page: str) -> None:
    started = time.process_time()
    html_to_text(page)
    page_tags(page)
    assert time.process_time() - started < 1.0  # CPU time: a busy machine does not count


def test_markup_marked_sections_and_stray_declarations_never_raise() -> None:
    assert html_to_text("<![" * 1000 + "<p>after</p>") == "after"
    assert page_tags("<![" * 1000 + '<meta property="og:title" content="T">').meta == {}


def test_the_text_and_tags_read_as_before() -> None:
    html = (
        "<html><head><title>Changelog</title>"
        '<meta property="og:image" content="/a.png"><meta property="og:image" content="/b.png">'
        '<meta name="Description" content="What changed"></head>'
        "<body><h1>4.2</h1><p>Faster &amp; <b>smarter</b>.</p><ul><li>one</li><li>two</li>"
        "</ul><script>alert(1)</script><p>end<br>line</p></body></html>"
    )

    text = "Changelog\n\n4.2\n\nFaster & smarter.\n\n- one\n- two\n\nend\nline"
    assert html_to_text(html) == text
    tags = page_tags(html)
    assert tags.title == "Changelog"
    assert tags.meta == {"og:image": "/a.png", "description": "What changed"}
