"""A private feed read with its credential from the environment, whose entries link with a
`user:password@` and a `?token=`: the running bot sends the credential as a header, and
neither it nor the links' secrets reach the prompt the model is sent, the stored snapshot
and polled items, or the review message (docs/design.md §26). Real feed over the fake web
server, the fake Slack and the fake Anthropic API. Both backends.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from sqlmodel import col, select

from core.models import DraftRow, PolledItemRow, RunRow, SnapshotItemRow, SourceSnapshotRow
from core.states import DraftState
from tests.fakes.anthropic_api import FakeAnthropic, ok
from tests.fakes.web import RSS_TYPE, FakeWeb
from tests.harness.slack_harness import PEOPLE, RECIPE, StartBot, eventually
from tests.harness.slow_marks import starts_a_server
from tests.sources.feed_documents import posts_feed

PUBLISHED = datetime(2020, 6, 1, 12, 0, tzinfo=UTC)  # long past, whatever day it is
FEED_KEY, PASSWORD, TOKEN = "feed-key-9f3a", "hunter2-pw", "tok-5ecret"
LINK = f"https://reader:{PASSWORD}@blog.example.com/posts/2?token={TOKEN}&page=2"
KEPT = "https://blog.example.com/posts/2?page=2"


@pytest.fixture
@starts_a_server
def web() -> Iterator[FakeWeb]:
    with FakeWeb() as fake:
        yield fake


def test_no_secret_reaches_the_prompt_the_snapshot_or_the_review_message(
    db_url: str,
    start_bot: StartBot,
    web: FakeWeb,
    fake_anthropic: FakeAnthropic,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("BLOG_FEED_KEY", FEED_KEY)
    fake_anthropic.script(ok(text="Widget 2.0 is out."))
    web.publish("/feed.xml", posts_feed(web.url, [1], PUBLISHED), RSS_TYPE)
    source = (
        f'source = {{ kind = "feed", url = "{web.url}/feed.xml", name = "blog", '
        'secret_env = "BLOG_FEED_KEY" }'
    )
    h = start_bot(db_url, slack=PEOPLE, publish=f'trigger = "items"\n{source}')

    def runs() -> list[RunRow]:
        with h.store.read() as session:
            return list(session.exec(select(RunRow)).all())

    eventually(lambda: len(runs()) == 1, "the start's poll", timeout=15)
    with_secrets = posts_feed(web.url, [1, 2], PUBLISHED).replace(f"{web.url}/posts/2", LINK)
    web.publish("/feed.xml", with_secrets.replace(LINK, LINK.replace("&", "&amp;")), RSS_TYPE)
    assert h.command(f"run {RECIPE}", "U0ADMIN").status_code == 200

    def ready() -> DraftRow | None:
        with h.store.read() as session:
            return session.exec(
                select(DraftRow).where(col(DraftRow.state) == DraftState.READY)
            ).first()

    draft = eventually(ready, "the item's draft", timeout=15)
    h.bot.sync_slack()
    message = eventually(lambda: h.message_for(draft.key), "the review message")

    assert {r.headers.get("authorization") for r in web.requests} == {f"Bearer {FEED_KEY}"}
    secrets = (FEED_KEY, PASSWORD, TOKEN)
    [prompt] = [json.dumps(request.body) for request in fake_anthropic.requests]
    assert KEPT in prompt and not any(secret in prompt for secret in secrets)
    with h.store.read() as session:
        stored = [
            row.model_dump_json()
            for table in (SourceSnapshotRow, SnapshotItemRow, PolledItemRow, RunRow, DraftRow)
            for row in session.exec(select(table)).all()
        ]
    assert any(KEPT in row for row in stored)
    assert not any(secret in row for row in stored for secret in secrets)
    shown = json.dumps(message)
    assert KEPT in shown.replace("&amp;", "&")
    assert not any(secret in shown for secret in secrets)
