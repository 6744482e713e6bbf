"""The `url` reader against a fake site over real HTTP: a page's main text, one item
whose hash tells an edit (docs/design.md §26)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from core.sources.items import SourceReadError, Window
from core.sources.reading import read_source
from tests.fakes.web import HTML_TYPE, FakeWeb, status
from tests.harness.slow_marks import starts_a_server
from tests.sources.specs import SLOT, WEEK, context, source


def changelog(entry: str) -> str:
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>Changelog | Acme</title>
<meta property="og:title" content="Acme changelog"></head>
<body><nav><a href="/">Home</a> <a href="/blog">Blog</a> <a href="/pricing">Pricing</a></nav>
<main><article><h1>Changelog</h1>
<h2>2.0, March 8</h2>
<p>{entry}</p>
<ul><li>A new docs site with examples for every endpoint.</li>
<li>Dark mode in the dashboard.</li></ul>
<p>Thanks to everyone who reported bugs this month: we fixed forty-two of them.</p>
</article></main>
<footer>Copyright Acme 2026. Privacy. Terms. Cookie settings.</footer>
<script>track("pageview")</script></body></html>"""


@pytest.fixture
@starts_a_server
def web() -> Iterator[FakeWeb]:
    with FakeWeb() as fake:
        yield fake


def test_a_page_is_one_undated_item_of_its_main_text(web: FakeWeb) -> None:
    url = web.publish(
        "/changelog", changelog("Search is now three times faster for every workspace."), HTML_TYPE
    )

    [item] = read_source(source(kind="url", url=url, name="changelog"), WEEK, context())

    assert (item.item_id, item.link, item.title, item.published_at) == (
        url,
        url,
        "Acme changelog",
        None,
    )
    assert "Search is now three times faster for every workspace." in item.text
    assert "- Dark mode in the dashboard." in item.text
    assert (
        "Cookie settings" not in item.text
        and "Pricing" not in item.text
        and "track" not in item.text
    )


def test_an_edited_page_keeps_its_id_and_changes_its_hash(web: FakeWeb) -> None:
    url = web.publish(
        "/changelog", changelog("Search is now three times faster for every workspace."), HTML_TYPE
    )
    spec = source(kind="url", url=url)
    [before] = read_source(spec, WEEK, context())
    [same] = read_source(spec, Window(start=None, end=SLOT), context())
    web.publish(
        "/changelog", changelog("Search is now four times faster for every workspace."), HTML_TYPE
    )

    [after] = read_source(spec, WEEK, context())

    assert same.content_hash == before.content_hash
    assert after.item_id == before.item_id
    assert after.content_hash != before.content_hash


def test_a_plain_text_page_is_its_text(web: FakeWeb) -> None:
    url = web.publish("/NEWS.txt", "2.0: search is faster\n", "text/plain; charset=utf-8")

    [item] = read_source(source(kind="url", url=url), WEEK, context())

    assert (item.title, item.text) == (url, "2.0: search is faster")


def test_a_page_that_is_no_web_page_fails_clearly(web: FakeWeb) -> None:
    url = web.publish("/report.pdf", b"%PDF-1.7", "application/pdf")

    with pytest.raises(SourceReadError, match="is application/pdf, not a web page") as raised:
        read_source(source(kind="url", url=url), WEEK, context())

    assert raised.value.retryable is False


def test_a_missing_page_is_not_retryable_and_a_500_is(web: FakeWeb) -> None:
    url = web.publish("/changelog", changelog("x"), HTML_TYPE)
    web.script("/changelog", status(500, "oops"))

    with pytest.raises(SourceReadError) as failed:
        read_source(source(kind="url", url=url), WEEK, context())
    with pytest.raises(SourceReadError) as missing:
        read_source(source(kind="url", url=web.url + "/gone"), WEEK, context())

    assert (failed.value.retryable, missing.value.retryable) == (True, False)
