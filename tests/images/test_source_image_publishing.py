"""An items recipe's feed entry brings a 12 MB photo (docs/design.md §32), end to end over
real HTTP: the feed and the photo on the fake web server, the model on the fake
Anthropic API, Bluesky and Mastodon on their fakes. The photo is downloaded once when the
run's snapshot is taken, shaped under both limits and carried by the first revision
without alt text, so Approve is refused; the alt text is proposed with the entry's
caption in the model's request; once approved, the post goes out with the photo uploaded
once per target however often the publishing pass runs. Nothing new in publishing: the
uploads are keyed by the kept bytes' hash like a dropped image's. Both backends.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from sqlmodel import col, select

from core.models import DraftRow, ImageRow
from core.post_body import PostBody
from core.review.alt_text import ALT_TEXT_SYSTEM
from core.slots.schedule import latest_slot_at_or_before
from core.states import DraftState, RunState
from tests.fakes.anthropic_api import FakeAnthropic, ok
from tests.fakes.bluesky import HANDLE, FakeBluesky, did_of
from tests.fakes.mastodon import FakeMastodon
from tests.fakes.web import RSS_TYPE, FakeWeb
from tests.harness.slow_marks import starts_a_server
from tests.harness.two_platforms import ENV, Platforms
from tests.harness.worlds import MakeWorld, World
from tests.images.pictures import photo
from tests.sources.feed_documents import posts_feed, with_enclosure

PUBLISHED = datetime(2020, 6, 1, 12, 0, tzinfo=UTC)  # long past, whatever day it is
CAPTION = "The team on stage at the launch"
TEXT = "Widget 2.0 is out."
ALT = "Five people on a stage under a Widget 2.0 banner."


@pytest.fixture
@starts_a_server
def platforms() -> Iterator[Platforms]:
    with FakeBluesky() as bluesky, FakeMastodon() as mastodon:
        yield Platforms(bluesky, mastodon)


@pytest.fixture
@starts_a_server
def web() -> Iterator[FakeWeb]:
    with FakeWeb() as fake:
        yield fake


def feed(web: FakeWeb, *numbers: int) -> str:
    """Entries newest first; entry 2 brings the photo as an enclosure with a caption."""
    document = posts_feed(web.url, numbers, PUBLISHED)
    return with_enclosure(document, "post-2", "/img/launch.jpg", CAPTION)


def poll(world: World) -> None:
    recipe = world.recipe
    slot = latest_slot_at_or_before(recipe, world.clock.now())
    assert slot is not None
    world.core.items.poll(recipe, slot)


def the_draft(world: World) -> DraftRow:
    with world.store.read() as session:
        [draft] = session.exec(select(DraftRow).where(col(DraftRow.state) != "claimed")).all()
        return draft


def test_an_entrys_photo_is_kept_once_described_from_its_caption_and_uploaded_once_per_target(
    db_url: str,
    worlds: MakeWorld,
    platforms: Platforms,
    web: FakeWeb,
    fake_anthropic: FakeAnthropic,
) -> None:
    web.publish("/feed.xml", feed(web, 1), RSS_TYPE)
    data = photo(3700, 2800)
    assert len(data) > 11_000_000
    web.publish("/img/launch.jpg", data, "image/jpeg")
    source = f'source = {{ kind = "feed", url = "{web.url}/feed.xml", name = "blog" }}'
    items = f'trigger = "items"\n{source}'
    world = worlds(db_url, publish=f"{platforms.publish}\n{items}", environ=ENV)
    poll(world)  # the first poll: entry 1 is backfill, nothing is drafted
    web.publish("/feed.xml", feed(web, 1, 2), RSS_TYPE)
    fake_anthropic.script(ok(text=TEXT), ok(text=ALT))
    world.clock.advance(timedelta(days=7))
    poll(world)

    draft = the_draft(world)
    [image] = PostBody.parse(draft.text or "").images
    with world.store.read() as session:
        [kept] = session.exec(select(ImageRow)).all()
    assert (image.sha256, image.name, image.alt) == (kept.sha256, "launch.jpg", "")
    assert kept.size <= 1_000_000 and kept.width >= 640  # under Bluesky's limit, legible
    refused = world.galley.approve(draft.key, revision=1, user="U0EDITOR")
    assert not refused.accepted and "has no alt text" in refused.message

    alts = world.core.alt_texts
    assert alts is not None
    [proposal] = alts.propose_for_source_images(draft.key)
    assert proposal.answer is not None and proposal.answer.accepted
    [asked] = [r for r in fake_anthropic.requests if r.body.get("system") == ALT_TEXT_SYSTEM]
    assert CAPTION in json.dumps(asked.body)
    assert [i.alt for i in PostBody.parse(the_draft(world).text or "").images] == [ALT]
    assert world.galley.approve(draft.key, revision=2, user="U0EDITOR").accepted

    for _ in range(3):  # the pass runs again and again: nothing is uploaded twice
        world.service().publish_run(draft.run_id or "")
    assert the_draft(world).state == DraftState.PUBLISHED
    assert world.run_row(draft.run_id or "").state == RunState.SUCCEEDED
    assert platforms.bluesky.uploads() == 1 and platforms.mastodon.uploads() == 1
    [post] = platforms.bluesky.posts_of(did_of(HANDLE))
    assert [i["alt"] for i in post["record"]["embed"]["images"]] == [ALT]
    [status] = platforms.mastodon.statuses_of()
    assert [m["description"] for m in status["media_attachments"]] == [ALT]
    assert web.gets("/img/launch.jpg") == 1
