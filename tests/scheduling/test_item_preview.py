"""`galley sources` on an items recipe (docs/design.md §29) shows what the next poll would
find new, and what a first poll's backfill would make of it, and records nothing: on
SQLite and PostgreSQL, asserting on the preview and on the rows left unchanged."""

from __future__ import annotations

from pathlib import Path

from sqlmodel import select

from core.api.item_preview import preview_items
from core.drafting.basis import SourceAccess
from core.models import PolledItemRow, PolledSourceRow, RunRow
from core.store.engine import Store
from tests.scheduling.test_items import T0, FeedStub, entry, feed_of, items_recipe, make_poller
from tests.scheduling.test_poll_alerts import REFUSED, FlakyFeed

ACCESS = SourceAccess(config_dir=Path())


def counts(store: Store) -> tuple[int, int, int]:
    with store.read() as session:
        return (
            len(session.exec(select(RunRow)).all()),
            len(session.exec(select(PolledItemRow)).all()),
            len(session.exec(select(PolledSourceRow)).all()),
        )


def test_a_first_poll_preview_shows_the_backfill_and_records_nothing(store: Store) -> None:
    recipe = items_recipe(backfill="1")
    feed = FeedStub(feed_of(1, 2, 3))

    preview = preview_items(store, recipe, ACCESS, T0, reader=feed.read)

    assert preview.first_poll
    assert [item.title for item in preview.new] == ["Post 3"]
    assert [item.title for item in preview.backfilled] == ["Post 1", "Post 2"]  # oldest first
    assert "is its first" in str(preview) and "Post 3" in str(preview)
    assert counts(store) == (0, 0, 0)


def test_a_preview_after_polls_shows_only_unseen_items_and_reissues(store: Store) -> None:
    recipe = items_recipe()
    feed = FeedStub(feed_of(1, 2))
    p = make_poller(store, feed)
    p.poll(recipe)
    before = counts(store)
    reissue = entry(2, guid="urn:new-guid-of-2")
    feed.entries = [entry(4), entry(3), reissue, *feed_of(1, 2)]

    preview = preview_items(store, recipe, ACCESS, T0, reader=feed.read)

    assert not preview.first_poll and not preview.backfilled
    assert [item.title for item in preview.new] == ["Post 3", "Post 4"]
    assert (preview.known, preview.reissued) == (2, 1)
    assert preview.to_json()["new"][0]["title"] == "Post 3"
    assert counts(store) == before


def test_a_preview_of_a_source_that_fails_names_its_answer(store: Store) -> None:
    feed = FlakyFeed(failure=REFUSED)

    preview = preview_items(store, items_recipe(), ACCESS, T0, reader=feed.read)

    assert [f.answer for f in preview.failures] == [REFUSED.answer]
    assert not preview.new and counts(store) == (0, 0, 0)
