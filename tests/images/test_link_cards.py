"""Link cards (docs/design.md §32): a Bluesky post with a link and no image gets an
`app.bsky.embed.external` with the page's OpenGraph title, description and thumbnail,
the thumbnail uploaded once per draft; a page that cannot be read posts without a card
and its receipt says why. The real `atproto` client, the fake PDS and a fake web
server, over real HTTP. Both backends.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from core.identity import publish_effect_key
from core.policies import PublishOutcome
from tests.fakes.anthropic_api import FakeAnthropic, ok
from tests.fakes.bluesky import HANDLE, PASSWORD, FakeBluesky, did_of
from tests.fakes.web import HTML_TYPE, FakeWeb
from tests.harness.slow_marks import starts_a_server
from tests.harness.worlds import KEY, RUN, MakeWorld, World
from tests.images.pictures import flat

PAGE = """<!doctype html><html><head><title>Fallback title</title>
<meta property="og:title" content="Release 4.2: faster search">
<meta property="og:description" content="Search is twice as fast &amp; smarter.">
<meta property="og:image" content="/img/card.png">
</head><body>…</body></html>"""


@pytest.fixture
@starts_a_server
def servers() -> Iterator[tuple[FakeBluesky, FakeWeb]]:
    with FakeBluesky() as pds, FakeWeb() as web:
        yield pds, web


def publish_with_link(
    worlds: MakeWorld, db_url: str, pds: FakeBluesky, link: str, fake_anthropic: FakeAnthropic
) -> World:
    publish = f'publish = {{ to = "bluesky", handle = "{HANDLE}", service = "{pds.url}" }}'
    world = worlds(db_url, publish=publish, environ={"GALLEY_BLUESKY_PASSWORD": PASSWORD})
    fake_anthropic.script(ok(text=f"Release 4.2 is out: {link}"))
    world.approved()
    assert world.service().publish_run(RUN).outcome == PublishOutcome.PUBLISHED
    return world


def receipt_result(world: World) -> dict[str, object]:
    receipt = world.effect(publish_effect_key(KEY, f"bluesky:{HANDLE}"))
    assert receipt is not None and receipt.result is not None
    return dict(json.loads(receipt.result))


def test_a_post_with_a_link_gets_the_pages_card_with_its_thumbnail_uploaded_once(
    db_url: str,
    worlds: MakeWorld,
    servers: tuple[FakeBluesky, FakeWeb],
    fake_anthropic: FakeAnthropic,
) -> None:
    pds, web = servers
    link = web.publish("/releases/4.2", PAGE, HTML_TYPE)
    web.publish("/img/card.png", flat(1200, 630), "image/png")
    world = publish_with_link(worlds, db_url, pds, link, fake_anthropic)
    [post] = pds.posts_of(did_of(HANDLE))
    external = post["record"]["embed"]["external"]
    assert external["uri"] == link
    assert external["title"] == "Release 4.2: faster search"
    assert external["description"] == "Search is twice as fast & smarter."
    assert external["thumb"]["ref"]["$link"] in pds.blobs
    assert pds.uploads() == 1
    assert receipt_result(world)["card"] == "external"


def test_a_page_that_cannot_be_read_posts_without_a_card_and_the_receipt_says_why(
    db_url: str,
    worlds: MakeWorld,
    servers: tuple[FakeBluesky, FakeWeb],
    fake_anthropic: FakeAnthropic,
) -> None:
    pds, web = servers
    world = publish_with_link(worlds, db_url, pds, web.url + "/gone", fake_anthropic)
    [post] = pds.posts_of(did_of(HANDLE))
    assert "embed" not in post["record"]
    assert receipt_result(world)["card"] == "none: the page answered 404"
    assert pds.uploads() == 0
