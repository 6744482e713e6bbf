"""The `feed` reader against a fake blog over real HTTP: RSS and Atom as publishers
write them, and each way a feed server fails (docs/design.md §26)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from core.sources import fetching
from core.sources.items import SourceReadError
from core.sources.reading import read_source
from tests.fakes.server import closed_port
from tests.fakes.web import ATOM_TYPE, HTML_TYPE, RSS_TYPE, FakeWeb, slow, status
from tests.harness.slow_marks import starts_a_server
from tests.sources.feed_documents import Entry, atom, rss091, rss1, rss2
from tests.sources.specs import SLOT, WEEK, context, source

RELEASE = Entry(
    guid="post-41",
    title="Widget 2.0 is out",
    link="/posts/widget-2",
    published=SLOT - timedelta(days=1),
    html='<p>Faster <b>search</b> &amp; <a href="/docs">new docs</a>.</p><script>track()</script>',
)
OLDER = Entry(
    "post-40", "Roadmap", "/posts/roadmap", SLOT - timedelta(days=3), "<p>What is next.</p>"
)
LAST_MONTH = Entry("post-30", "Old news", "/posts/old", SLOT - timedelta(days=30), "<p>Old.</p>")


@pytest.fixture
@starts_a_server
def web() -> Iterator[FakeWeb]:
    with FakeWeb() as fake:
        yield fake


def read(url: str, **keys: object) -> list[tuple[str, str, str | None, str]]:
    items = read_source(source(kind="feed", url=url, name="blog", **keys), WEEK, context())
    return [(item.item_id, item.title, item.link, item.text) for item in items]


def test_rss2_entries_in_the_window_are_read_as_plain_text_with_absolute_links(
    web: FakeWeb,
) -> None:
    url = web.publish("/blog/feed.xml", rss2([RELEASE, OLDER, LAST_MONTH]), RSS_TYPE)

    items = read_source(source(kind="feed", url=url, name="blog"), WEEK, context())

    assert [(item.item_id, item.title, item.link) for item in items] == [
        ("post-41", "Widget 2.0 is out", f"{web.url}/posts/widget-2"),
        ("post-40", "Roadmap", f"{web.url}/posts/roadmap"),
    ]
    assert items[0].text == "Faster search & new docs."
    assert items[0].published_at == SLOT - timedelta(days=1)
    assert {item.source for item in items} == {"blog"}


def test_atom_entries_are_read_with_links_resolved_against_the_feed(web: FakeWeb) -> None:
    entry = Entry(
        "urn:uuid:1", "Widget &lt;2.0&gt;", "posts/2", SLOT - timedelta(hours=2), "<p>Out now.</p>"
    )
    url = web.publish("/blog/atom.xml", atom([entry, LAST_MONTH]), ATOM_TYPE)

    assert read(url) == [("urn:uuid:1", "Widget <2.0>", f"{web.url}/blog/posts/2", "Out now.")]


def test_rss1_dates_come_from_dublin_core(web: FakeWeb) -> None:
    url = web.publish("/rss", rss1([RELEASE, LAST_MONTH]), RSS_TYPE)

    [item] = read_source(source(kind="feed", url=url), WEEK, context())

    assert item.published_at == RELEASE.published
    assert item.source == "127.0.0.1"  # named after the host when the config names it not


def test_entries_without_dates_are_kept_undated_and_named_by_their_link(web: FakeWeb) -> None:
    url = web.publish("/rss091.xml", rss091([RELEASE, OLDER]), "text/xml")

    items = read_source(source(kind="feed", url=url), WEEK, context())

    assert [(item.item_id, item.published_at) for item in items] == [
        (f"{web.url}/posts/widget-2", None),
        (f"{web.url}/posts/roadmap", None),
    ]


def test_a_feed_with_a_wrong_charset_is_still_read(web: FakeWeb) -> None:
    entry = Entry("1", "Caf\xe9", "/c", SLOT - timedelta(days=1), "Caf\xe9 ouvert")
    url = web.publish("/latin.xml", rss2([entry]).encode("latin-1"), RSS_TYPE)  # says utf-8

    assert read(url) == [("1", "Caf\xe9", f"{web.url}/c", "Caf\xe9 ouvert")]


def test_an_edited_entry_keeps_its_id_and_changes_its_hash(web: FakeWeb) -> None:
    url = web.publish("/feed.xml", rss2([RELEASE]), RSS_TYPE)
    spec = source(kind="feed", url=url)
    [before] = read_source(spec, WEEK, context())
    edited = Entry(
        RELEASE.guid, RELEASE.title, RELEASE.link, RELEASE.published, "<p>Now with a fix.</p>"
    )
    web.publish("/feed.xml", rss2([edited, OLDER]), RSS_TYPE)

    after = read_source(spec, WEEK, context())

    assert [item.item_id for item in after] == ["post-41", "post-40"]
    assert after[0].content_hash != before.content_hash
    assert after[0].text == "Now with a fix."


def test_max_items_keeps_the_newest(web: FakeWeb) -> None:
    url = web.publish("/feed.xml", rss2([OLDER, RELEASE]), RSS_TYPE)

    assert [item[0] for item in read(url, max_items=1)] == ["post-41"]


@pytest.mark.parametrize(
    ("code", "retryable"), [(304, True), (500, True), (503, True), (429, True)]
)
def test_answers_that_may_pass_are_retryable(web: FakeWeb, code: int, retryable: bool) -> None:
    url = web.publish("/feed.xml", rss2([RELEASE]), RSS_TYPE)
    web.script("/feed.xml", status(code, "" if code == 304 else "upstream is down"))

    with pytest.raises(SourceReadError) as raised:
        read(url)

    assert (raised.value.source, raised.value.retryable) == ("blog", retryable)
    assert raised.value.answer.startswith(f"HTTP {code}")


@pytest.mark.parametrize("code", [401, 403, 404, 410])
def test_answers_that_never_pass_are_not_retryable(web: FakeWeb, code: int) -> None:
    url = web.publish("/feed.xml", rss2([RELEASE]), RSS_TYPE)
    web.script("/feed.xml", status(code, "go away"))

    with pytest.raises(SourceReadError) as raised:
        read(url)

    assert raised.value.retryable is False
    assert (
        raised.value.answer
        == f"HTTP {code} {_reason(code)} from 127.0.0.1:{web.port}/feed.xml: go away"
    )


def _reason(code: int) -> str:
    return {401: "Unauthorized", 403: "Forbidden", 404: "Not Found", 410: "Gone"}[code]


def test_a_slow_server_is_a_retryable_timeout(web: FakeWeb) -> None:
    url = web.publish("/feed.xml", rss2([RELEASE]), RSS_TYPE)
    web.script("/feed.xml", slow(5.0))

    with pytest.raises(SourceReadError) as raised:
        read_source(source(kind="feed", url=url), WEEK, context(timeout=0.3))

    assert raised.value.retryable is True
    assert "in time" in raised.value.answer


def test_a_server_that_is_not_there_is_retryable() -> None:
    with pytest.raises(SourceReadError) as raised:
        read(f"http://127.0.0.1:{closed_port()}/feed.xml")

    assert raised.value.retryable is True


@pytest.mark.parametrize(
    ("body", "content_type", "says"),
    [
        ("<html><body><h1>Blog</h1></body></html>", HTML_TYPE, "is not an RSS or Atom feed"),
        (
            '<?xml version="1.0"?><rss version="2.0"><channel><title>x</tit',
            RSS_TYPE,
            "not well-formed",
        ),
        ("", RSS_TYPE, "is not an RSS or Atom feed"),
    ],
)
def test_a_malformed_document_fails_clearly_naming_the_source(
    web: FakeWeb, body: str, content_type: str, says: str
) -> None:
    url = web.publish("/feed.xml", body, content_type)

    with pytest.raises(SourceReadError) as raised:
        read(url)

    assert raised.value.retryable is False
    assert says in raised.value.answer
    assert str(raised.value).startswith("source 'blog': ")


def test_an_answer_naming_a_local_file_is_not_read_as_that_file(
    web: FakeWeb, tmp_path: Path
) -> None:
    local = tmp_path / "local.xml"
    local.write_text(rss2([RELEASE]))
    url = web.publish("/feed.xml", str(local), "text/plain")

    with pytest.raises(SourceReadError, match="not an RSS or Atom feed"):
        read(url)


def test_an_answer_too_large_is_refused(web: FakeWeb, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fetching, "MAX_ANSWER_BYTES", 1000)
    url = web.publish("/feed.xml", rss2([RELEASE] * 20), RSS_TYPE)

    with pytest.raises(SourceReadError, match="over 1,000 bytes") as raised:
        read(url)

    assert raised.value.retryable is False


def test_a_failure_never_shows_the_urls_secrets(web: FakeWeb) -> None:
    """A configured URL holding one is refused (tests/sources/test_source_secrets.py); a
    redirect may still name one: its query is never shown, and a redirect to a
    `user:password@` is refused without showing them."""
    signed = f"http://127.0.0.1:{web.port}/private.xml?token=s3cret"
    web.script("/feed.xml", status(302, headers={"Location": signed}))
    web.script("/private.xml", status(500))
    with pytest.raises(SourceReadError) as raised:
        read(f"{web.url}/feed.xml")
    assert raised.value.answer == (
        f"HTTP 500 Internal Server Error from 127.0.0.1:{web.port}/private.xml"
    )

    with_password = f"http://reader:hunter2@127.0.0.1:{web.port}/private.xml?token=s3cret"
    web.script("/signed.xml", status(302, headers={"Location": with_password}))
    with pytest.raises(SourceReadError) as raised:
        read(f"{web.url}/signed.xml")
    assert raised.value.answer == (
        f"not fetched: 127.0.0.1:{web.port}/private.xml carries a user name or password"
    )
