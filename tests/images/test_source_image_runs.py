"""The image an items recipe's item brings, kept when its run's snapshot is taken
(docs/design.md §32): downloaded once over HTTP from the fake web server, shaped under
the targets' limits, named by hash on the snapshot item and in the first revision; a
take-over reads the stored snapshot and never downloads again; `source_images = false`
downloads nothing; a window recipe carries none. In process, both backends; the feed is
a stub whose items name images on the fake server (feed parsing has its own tests)."""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from sqlmodel import select

from core.api.services import Services
from core.drafting.service import DraftingService
from core.drafting.sweeper import sweep_expired_claims
from core.drafting_policies import DraftOutcome
from core.failpoints import Failpoint, hook
from core.models import ImageRow, SnapshotItemRow
from core.policies import ImageSource
from core.post_body import PostBody
from core.review.redraft_claims import RedraftClaim
from core.review.redrafting import RedraftService
from core.scheduling.dispatch import SlotDispatcher
from core.setup.config import parse_config
from core.sources.items import ItemImage, SourceItem
from core.states import RunState
from core.store.engine import Store
from core.testing import FrozenClock, InstantDrafter
from tests.conftest import config_text
from tests.fakes.web import HTML_TYPE, FakeWeb, status
from tests.harness.slow_marks import starts_a_server
from tests.images.pictures import flat, photo
from tests.scheduling.test_items import (
    Crash,
    FeedStub,
    drafts,
    entry,
    items_config,
    items_recipe,
    make_poller,
    of_state,
)

IMAGE = "/img/launch.jpg"


@pytest.fixture
@starts_a_server
def web() -> Iterator[FakeWeb]:
    with FakeWeb() as fake:
        yield fake


def pictured(n: int, web: FakeWeb, path: str = IMAGE, *, link: str | None = None) -> SourceItem:
    """Entry `n` bringing the image at `path` on the fake server."""
    item = entry(n)
    if link is not None:
        return dataclasses.replace(item, link=link)
    return dataclasses.replace(item, image=ItemImage(web.url + path, "The team on stage"))


def images(store: Store) -> list[ImageRow]:
    with store.read() as session:
        return list(session.exec(select(ImageRow)).all())


def snapshot_items(store: Store) -> list[SnapshotItemRow]:
    with store.read() as session:
        return list(session.exec(select(SnapshotItemRow)).all())


def polled_twice(store: Store, web: FakeWeb, new: SourceItem, **keys: str) -> FeedStub:
    """A first poll of entry 1 (backfilled, nothing drafted), then a poll finding `new`."""
    feed = FeedStub([entry(1)])
    p = make_poller(store, feed)
    recipe = items_recipe(**keys)
    p.poll(recipe)
    feed.entries = [new, entry(1)]
    p.clock.advance(timedelta(minutes=5))
    p.poll(recipe)
    return feed


def body_images(store: Store) -> list[tuple[str, str, str]]:
    [draft] = drafts(store)
    return [(i.sha256, i.name, i.alt) for i in PostBody.parse(draft.text or "").images]


def test_a_new_items_image_is_kept_once_and_its_first_revision_carries_it_without_alt(
    store: Store, web: FakeWeb
) -> None:
    data = photo(800, 600)
    web.publish(IMAGE, data, "image/jpeg")
    polled_twice(store, web, pictured(2, web))

    [kept] = images(store)
    assert kept.sha256 == hashlib.sha256(data).hexdigest()  # it fitted: kept as it came
    assert kept.source == ImageSource.FEED_ENCLOSURE
    assert body_images(store) == [(kept.sha256, "launch.jpg", "")]
    [item] = snapshot_items(store)
    assert (item.image_sha256, item.image_caption, item.image_note) == (
        kept.sha256,
        "The team on stage",
        None,
    )
    assert web.gets(IMAGE) == 1


def test_a_12_mb_image_is_shaped_under_the_limit_before_it_is_kept(
    store: Store, web: FakeWeb
) -> None:
    data = photo(3700, 2800)
    assert len(data) > 11_000_000
    web.publish(IMAGE, data, "image/jpeg")
    polled_twice(store, web, pictured(2, web))

    [kept] = images(store)
    assert kept.size <= 1_000_000 and kept.width >= 640  # no recipe target: Bluesky's limit
    assert body_images(store) == [(kept.sha256, "launch.jpg", "")]


def test_an_image_over_the_download_cap_is_not_read_whole_and_the_run_says_why(
    store: Store, web: FakeWeb, monkeypatch: pytest.MonkeyPatch
) -> None:
    from core.images import source_images

    monkeypatch.setattr(source_images, "MAX_IMAGE_BYTES", 100_000)
    web.publish(IMAGE, photo(800, 600), "image/jpeg")
    polled_twice(store, web, pictured(2, web))

    assert images(store) == [] and body_images(store) == []
    [item] = snapshot_items(store)
    assert item.image_sha256 is None
    assert item.image_note is not None and "over 100,000 bytes" in item.image_note


def test_an_image_that_answers_404_drafts_without_it_and_notes_why(
    store: Store, web: FakeWeb
) -> None:
    polled_twice(store, web, pictured(2, web, "/img/gone.jpg"))

    assert images(store) == [] and body_images(store) == []
    [item] = snapshot_items(store)
    assert item.image_note == f"the image at {web.url}/img/gone.jpg answered 404"
    assert of_state(store, RunState.AWAITING_REVIEW)  # drafted all the same


def test_bytes_that_are_no_image_are_refused_and_noted(store: Store, web: FakeWeb) -> None:
    web.publish(IMAGE, b"<html>not a picture</html>", HTML_TYPE)
    polled_twice(store, web, pictured(2, web))

    [item] = snapshot_items(store)
    assert item.image_note is not None and item.image_note.startswith("refused: ")
    assert body_images(store) == []


def test_a_linked_pages_og_image_is_kept_for_an_item_without_one(
    store: Store, web: FakeWeb
) -> None:
    head = (
        '<meta property="og:image" content="/img/chart.png">'
        '<meta property="og:image:alt" content="A rising chart">'
    )
    web.publish("/posts/2", f"<html><head>{head}</head><body>Up.</body></html>", HTML_TYPE)
    web.publish("/img/chart.png", flat(1200, 630), "image/png")
    polled_twice(store, web, pictured(2, web, link=f"{web.url}/posts/2"))

    [kept] = images(store)
    assert kept.source == ImageSource.OG_IMAGE
    assert body_images(store) == [(kept.sha256, "chart.png", "")]
    [item] = snapshot_items(store)
    assert item.image_caption == "A rising chart"


def test_a_linked_page_without_og_image_gives_no_image_and_no_note(
    store: Store, web: FakeWeb
) -> None:
    web.publish("/posts/2", "<html><head><title>Up</title></head></html>", HTML_TYPE)
    polled_twice(store, web, pictured(2, web, link=f"{web.url}/posts/2"))

    [item] = snapshot_items(store)
    assert (item.image_url, item.image_sha256, item.image_note) == (None, None, None)
    assert body_images(store) == [] and web.gets("/posts/2") == 1


def test_source_images_false_downloads_nothing(store: Store, web: FakeWeb) -> None:
    web.publish(IMAGE, photo(800, 600), "image/jpeg")
    polled_twice(store, web, pictured(2, web), source_images="false")

    assert web.gets(IMAGE) == 0 and images(store) == [] and body_images(store) == []


def test_a_run_killed_after_its_snapshot_commit_is_taken_over_without_a_second_download(
    store: Store, web: FakeWeb
) -> None:
    web.publish(IMAGE, photo(800, 600), "image/jpeg")
    feed = FeedStub([entry(1)])
    p = make_poller(store, feed)
    recipe = items_recipe()
    p.poll(recipe)
    feed.entries = [pictured(2, web), entry(1)]
    p.clock.advance(timedelta(minutes=5))

    def crash() -> None:
        raise Crash

    with hook(Failpoint.AFTER_SNAPSHOT_COMMIT, crash), pytest.raises(Crash):
        p.poll(recipe)
    assert web.gets(IMAGE) == 1 and p.drafter.calls == 0
    [claimed] = of_state(store, RunState.RUNNING)
    p.clock.advance(timedelta(hours=3))
    sweep_expired_claims(store, p.clock)
    dispatcher = SlotDispatcher(store, p.poller.drafting, p.clock, recipes={recipe.name: recipe})
    result = dispatcher.resume(claimed.id)

    assert result is not None and result.outcome == DraftOutcome.DRAFTED
    [kept] = images(store)
    assert body_images(store) == [(kept.sha256, "launch.jpg", "")]
    assert web.gets(IMAGE) == 1  # the stored snapshot was read, not the network


def test_an_image_answering_503_is_noted_and_not_asked_again(store: Store, web: FakeWeb) -> None:
    web.script(IMAGE, status(503, "busy"))
    web.publish(IMAGE, photo(800, 600), "image/jpeg")
    polled_twice(store, web, pictured(2, web))

    [item] = snapshot_items(store)
    assert item.image_note == f"the image at {web.url}{IMAGE} answered 503"
    assert web.gets(IMAGE) == 1


def test_a_window_recipes_items_carry_no_image_and_nothing_is_downloaded(
    store: Store, web: FakeWeb, tmp_path: Path
) -> None:
    web.publish(IMAGE, photo(800, 600), "image/jpeg")
    feed = '\nsources = [{ kind = "feed", url = "https://blog.example.com/feed", name = "blog" }]\n'
    galley = Services(
        parse_config(config_text() + feed), store, drafter=InstantDrafter(), clock=FrozenClock()
    )
    recipe = galley.recipe("weekly-update")
    slot = galley.resolve_slot(recipe, "2026-11-23T09:00")
    service = DraftingService(store, InstantDrafter(), clock=FrozenClock(), worker="w1")
    in_window = dataclasses.replace(pictured(2, web), published_at=slot.fire_at - timedelta(days=1))
    service.basis.reader = lambda spec, window, context: [in_window]

    assert service.draft_slot(recipe, slot).outcome == DraftOutcome.DRAFTED
    assert web.gets(IMAGE) == 0 and images(store) == [] and body_images(store) == []
    [item] = snapshot_items(store)
    assert item.image_url == web.url + IMAGE and item.image_sha256 is None  # noted only


def test_a_reviewers_redraft_keeps_the_items_image_and_downloads_nothing(
    store: Store, web: FakeWeb
) -> None:
    web.publish(IMAGE, photo(800, 600), "image/jpeg")
    polled_twice(store, web, pictured(2, web))
    [draft] = drafts(store)
    service = RedraftService(
        store, items_config(), FrozenClock(), InstantDrafter("Shorter."), worker="w2"
    )
    claim = service.ask(
        draft_key=draft.key, revision=1, note="shorter", user="U0EDITOR", permitted=True
    )
    assert isinstance(claim, RedraftClaim), claim
    assert service.run(claim).accepted

    [kept] = images(store)
    [redrafted] = drafts(store)
    body = PostBody.parse(redrafted.text or "")
    assert redrafted.revision == 2 and body.parts_for("*") == ("Shorter.",)
    assert [(i.sha256, i.alt) for i in body.images] == [(kept.sha256, "")]
    assert web.gets(IMAGE) == 1
