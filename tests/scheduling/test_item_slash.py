"""`/galley run RECIPE` on an items recipe polls now (docs/design.md §29): answered at once,
the poll's finding told after, the new item drafted; a bot's start polls too."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlmodel import col, select

from core.identity import item_run_id, item_token
from core.models import DraftRow, RunRow
from core.policies import SkipReason
from core.states import DraftState
from tests.fakes.web import RSS_TYPE, FakeWeb
from tests.harness.slack_harness import PEOPLE, RECIPE, StartBot, eventually
from tests.sources.feed_documents import Entry, rss2

PUBLISHED = datetime(2020, 6, 1, 12, 0, tzinfo=UTC)  # long past, whatever day it is


def feed(*numbers: int) -> str:
    return rss2(
        [
            Entry(
                f"https://blog.example.com/?p={n}",
                f"Post {n}",
                f"https://blog.example.com/post-{n}",
                PUBLISHED + timedelta(hours=n),
                f"<p>Post {n}.</p>",
            )
            for n in sorted(numbers, reverse=True)
        ]
    )


def test_slash_run_polls_an_items_recipe_now_and_drafts_its_new_item(
    start_bot: StartBot, sqlite_url: str
) -> None:
    with FakeWeb() as web:
        web.publish("/feed.xml", feed(1, 2), RSS_TYPE)
        items = f'trigger = "items"\nsource = {{ kind = "feed", url = "{web.url}/feed.xml" }}'
        h = start_bot(sqlite_url, slack=PEOPLE, publish=items)

        def runs() -> list[RunRow]:
            with h.store.read() as session:
                return list(session.exec(select(RunRow).order_by(col(RunRow.id))).all())

        eventually(lambda: len(runs()) == 2, "the start's poll", timeout=15)
        assert {run.reason for run in runs()} == {SkipReason.BACKFILL}
        web.publish("/feed.xml", feed(1, 2, 3), RSS_TYPE)

        assert h.command(f"run {RECIPE}", "U0ADMIN").status_code == 200

        replies = eventually(lambda: len(h.replies("U0ADMIN")) >= 2 and h.replies("U0ADMIN"), "")
        assert any("Polling" in reply for reply in replies)
        assert any("1 new item(s)" in reply for reply in replies)
        with h.store.read() as session:
            [draft] = session.exec(select(DraftRow)).all()
        assert draft.state == DraftState.READY
        assert draft.run_id == item_run_id(RECIPE, item_token("https://blog.example.com/?p=3"))
        assert len(h.anthropic.requests) == 1
