"""Found URLs go through the guard where they are fetched (docs/design.md §33): an item's
image, its link's page and that page's og:image, a `url` source's redirect, a link card's
page, redirect and thumbnail. A URL naming an inside server (127.0.0.2, never allowed) is
not fetched, the inside server receives nothing, and the note, error or receipt says why.
Local fakes on 127.0.0.1 are reached through `[egress] allow` only. Both backends where
the database is touched."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from core.egress.way_out import Egress
from core.publishing.link_cards import PageCard, read_card
from core.sources.items import SourceReadError
from core.sources.reading import read_source
from core.store.engine import Store
from tests.fakes.anthropic_api import FakeAnthropic
from tests.fakes.bluesky import HANDLE, FakeBluesky, did_of
from tests.fakes.web import HTML_TYPE, FakeWeb, drip, status
from tests.harness.slow_marks import starts_a_server
from tests.harness.timing import scaled
from tests.harness.worlds import MakeWorld
from tests.images.pictures import flat
from tests.images.test_link_cards import publish_with_link, receipt_result
from tests.images.test_source_image_runs import images, pictured, polled_twice, snapshot_items
from tests.sources.specs import LOCAL_FAKES, WEEK, context, source

LOOPBACK = "not fetched: the address is loopback"
SECRETS = '{"AccessKeyId": "ASIA-INSIDE", "SecretAccessKey": "inside-secret"}'
CARD_PAGE = """<html><head><title>Public page</title>
<meta property="og:title" content="Public title">
<meta property="og:image" content="{image}"></head></html>"""


@pytest.fixture
@starts_a_server
def web() -> Iterator[FakeWeb]:
    with FakeWeb() as fake:
        yield fake


@pytest.fixture
@starts_a_server
def inside() -> Iterator[FakeWeb]:
    """A server inside the machine's network: 127.0.0.2 is in no test's `allow`."""
    with FakeWeb(host="127.0.0.2") as fake:
        fake.publish("/img/x.png", flat(1200, 630), "image/png")
        fake.publish("/latest/meta-data/", SECRETS, HTML_TYPE)
        fake.publish("/page", '<meta property="og:image" content="/img/x.png">', HTML_TYPE)
        yield fake


def test_an_items_image_naming_an_inside_address_is_not_fetched_and_the_note_says_why(
    store: Store, web: FakeWeb, inside: FakeWeb
) -> None:
    item = pictured(2, inside, "/img/x.png")
    polled_twice(store, web, item)

    [row] = snapshot_items(store)
    assert row.image_sha256 is None
    assert row.image_note == f"the image at {inside.url}/img/x.png could not be read: {LOOPBACK}"
    assert images(store) == [] and inside.requests == []


def test_an_items_link_to_an_inside_page_is_not_fetched_and_the_note_says_why(
    store: Store, web: FakeWeb, inside: FakeWeb
) -> None:
    polled_twice(store, web, pictured(2, web, link=f"{inside.url}/page"))

    [row] = snapshot_items(store)
    assert row.image_note == f"the page at {inside.url}/page could not be read: {LOOPBACK}"
    assert images(store) == [] and inside.requests == []


def test_a_linked_pages_og_image_naming_an_inside_address_is_not_fetched(
    store: Store, web: FakeWeb, inside: FakeWeb
) -> None:
    page = f'<html><head><meta property="og:image" content="{inside.url}/img/x.png"></head></html>'
    web.publish("/posts/2", page, HTML_TYPE)
    polled_twice(store, web, pictured(2, web, link=f"{web.url}/posts/2"))

    [row] = snapshot_items(store)
    assert row.image_note == f"the image at {inside.url}/img/x.png could not be read: {LOOPBACK}"
    assert images(store) == [] and inside.requests == [] and web.gets("/posts/2") == 1


def test_a_url_source_redirected_inside_is_refused_and_the_inside_page_never_read(
    web: FakeWeb, inside: FakeWeb
) -> None:
    web.script("/changelog", status(302, headers={"Location": f"{inside.url}/latest/meta-data/"}))

    with pytest.raises(SourceReadError) as raised:
        read_source(source(kind="url", url=f"{web.url}/changelog"), WEEK, context())

    assert raised.value.answer == LOOPBACK and raised.value.retryable is False
    assert inside.requests == []


def test_a_link_card_page_inside_is_not_read(inside: FakeWeb) -> None:
    assert read_card(f"{inside.url}/latest/meta-data/", Egress(LOCAL_FAKES)) == LOOPBACK
    assert inside.requests == []


def test_a_link_card_redirected_to_the_metadata_service_never_holds_its_answer(
    web: FakeWeb, inside: FakeWeb
) -> None:
    web.script("/go", status(301, headers={"Location": f"{inside.url}/latest/meta-data/"}))

    card = read_card(f"{web.url}/go", Egress(LOCAL_FAKES))

    assert card == LOOPBACK
    assert inside.requests == [] and web.gets("/go") == 1


def test_a_link_card_thumbnail_inside_is_not_fetched_and_the_card_goes_without(
    web: FakeWeb, inside: FakeWeb
) -> None:
    link = web.publish("/post", CARD_PAGE.format(image=f"{inside.url}/img/x.png"), HTML_TYPE)

    card = read_card(link, Egress(LOCAL_FAKES))

    assert card == PageCard(link, "Public title", "", None, "")
    assert inside.requests == []


def test_a_link_card_page_over_the_cap_is_refused(web: FakeWeb) -> None:
    huge = "<html><head><title>Big</title></head>" + "x" * 5_000_001
    link = web.publish("/huge", huge, HTML_TYPE)

    card = read_card(link, Egress(LOCAL_FAKES))

    assert card == f"not fetched: the answer from {link[7:]} is over 5,000,000 bytes"


def test_a_link_card_page_dripping_bytes_is_cut_at_the_cards_deadline(web: FakeWeb) -> None:
    link = web.publish("/slow", "<html><title>Slow</title>" + "x" * 200 + "</html>", HTML_TYPE)
    web.script("/slow", drip(0.1))  # 22 s for the whole page

    started = time.monotonic()
    card = read_card(link, Egress(LOCAL_FAKES), deadline=1.0)

    assert card == f"not fetched: no whole answer from {link[7:]} in time (the deadline is 1s)"
    assert time.monotonic() - started < 1.0 + scaled(0.5)


@pytest.fixture
@starts_a_server
def pds() -> Iterator[FakeBluesky]:
    with FakeBluesky() as fake:
        yield fake


def test_a_post_linking_inside_goes_without_a_card_and_its_receipt_says_why(
    db_url: str,
    worlds: MakeWorld,
    pds: FakeBluesky,
    web: FakeWeb,
    inside: FakeWeb,
    fake_anthropic: FakeAnthropic,
) -> None:
    web.script("/news", status(302, headers={"Location": f"{inside.url}/latest/meta-data/"}))
    world = publish_with_link(worlds, db_url, pds, f"{web.url}/news", fake_anthropic)

    [post] = pds.posts_of(did_of(HANDLE))
    assert "embed" not in post["record"] and "inside-secret" not in str(post)
    assert receipt_result(world)["card"] == f"none: {LOOPBACK}"
    assert inside.requests == []
