"""The review message of an items run whose entry brings an image (docs/design.md §32),
through the running bot: the image is shown like a dropped one (name, size, no alt text
yet, Remove), Approve is refused until its alt text exists, and the alt text the bot asks
the model for once the message is posted, when that call fails, is said in the message's
thread. An image that could not be downloaded is said in one line on the message. Real
feed over the fake web server, the fake Slack and the fake Anthropic API. Both backends.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from sqlmodel import col, select

from core.models import DraftRow, RunRow
from core.post_body import PostBody
from core.states import DraftState
from tests.fakes.anthropic_api import FakeAnthropic, ok, status
from tests.fakes.web import RSS_TYPE, FakeWeb
from tests.harness.slack_harness import APPROVE, PEOPLE, RECIPE, Harness, StartBot, eventually
from tests.harness.slow_marks import starts_a_server
from tests.images.pictures import photo
from tests.sources.feed_documents import posts_feed, with_enclosure

PUBLISHED = datetime(2020, 6, 1, 12, 0, tzinfo=UTC)  # long past, whatever day it is
CAPTION = "The team on stage at the launch"


@pytest.fixture
@starts_a_server
def web() -> Iterator[FakeWeb]:
    with FakeWeb() as fake:
        yield fake


def feed(web: FakeWeb, *numbers: int, image: str) -> str:
    """Entries newest first; entry 2 brings the image at `image` as an enclosure."""
    return with_enclosure(posts_feed(web.url, numbers, PUBLISHED), "post-2", image, CAPTION)


def drafted_item(h: Harness, web: FakeWeb, image: str) -> DraftRow:
    """The bot started on a feed of entry 1 (backfilled), then `/galley run` finding
    entry 2: its draft, ready, once its review message is posted."""

    def runs() -> list[RunRow]:
        with h.store.read() as session:
            return list(session.exec(select(RunRow)).all())

    eventually(lambda: len(runs()) == 1, "the start's poll", timeout=15)
    web.publish("/feed.xml", feed(web, 1, 2, image=image), RSS_TYPE)
    assert h.command(f"run {RECIPE}", "U0ADMIN").status_code == 200

    def ready() -> DraftRow | None:
        with h.store.read() as session:
            found = session.exec(
                select(DraftRow).where(col(DraftRow.state) == DraftState.READY)
            ).first()
            return found

    draft = eventually(ready, "the item's draft", timeout=15)
    h.bot.sync_slack()  # posted now, if the bot's own pass has not already
    eventually(lambda: h.review_messages(), "the review message")
    return draft


def start(h_start: StartBot, db_url: str, web: FakeWeb, image: str) -> Harness:
    web.publish("/feed.xml", feed(web, 1, image=image), RSS_TYPE)
    source = f'source = {{ kind = "feed", url = "{web.url}/feed.xml", name = "blog" }}'
    return h_start(db_url, slack=PEOPLE, publish=f'trigger = "items"\n{source}')


def test_the_entrys_image_is_shown_needs_alt_text_and_a_failed_proposal_is_told(
    db_url: str, start_bot: StartBot, web: FakeWeb, fake_anthropic: FakeAnthropic
) -> None:
    web.publish("/img/launch.jpg", photo(800, 600), "image/jpeg")
    fake_anthropic.script(ok(text="Widget 2.0 is out."), status(529))  # the alt call fails
    h = start(start_bot, db_url, web, "/img/launch.jpg")
    draft = drafted_item(h, web, "/img/launch.jpg")

    [image] = PostBody.parse(draft.text or "").images
    assert (image.name, image.alt) == ("launch.jpg", "")
    message = h.message_for(draft.key)
    shown = str(message["blocks"])
    assert "launch.jpg" in shown and "no alt text yet" in shown and "Remove" in shown
    told = eventually(
        lambda: [
            str(c.params.get("text"))
            for c in h.calls("chat.postMessage")
            if c.params.get("thread_ts") == message["ts"]
        ],
        "the failed proposal, told in the thread",
    )
    assert any("No alt text was proposed for launch.jpg" in line for line in told)
    assert CAPTION in str(fake_anthropic.requests[-1].body)  # the alt call read the caption
    assert h.click(APPROVE, "U0EDITOR", key=draft.key).status_code == 200
    [reply] = eventually(
        lambda: [r for r in h.replies("U0EDITOR") if "alt text" in r], "the refusal"
    )
    assert "Image launch.jpg has no alt text" in reply
    assert h.draft_row(draft.key).state == DraftState.READY
    assert web.gets("/img/launch.jpg") == 1


def test_an_image_that_answers_404_is_left_out_and_the_message_says_so(
    db_url: str, start_bot: StartBot, web: FakeWeb, fake_anthropic: FakeAnthropic
) -> None:
    fake_anthropic.script(ok(text="Widget 2.0 is out."))
    h = start(start_bot, db_url, web, "/img/gone.jpg")
    draft = drafted_item(h, web, "/img/gone.jpg")

    assert PostBody.parse(draft.text or "").images == ()
    shown = str(h.message_for(draft.key)["blocks"])
    assert "Drafted without the item's image" in shown
    assert f"the image at {web.url}/img/gone.jpg answered 404" in shown
    assert len(fake_anthropic.requests) == 1  # no alt text asked for: there is no image
