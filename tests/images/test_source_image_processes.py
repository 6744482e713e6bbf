"""A real `galley run` posts the review message of an items run whose entry brings an
image, stores the message's receipt, and dies before asking the model for the image's
alt text (docs/design.md §32). The next `galley run` asks it at start: one alt-text call,
the draft's image described, nothing drafted, downloaded or posted twice. Final state on
SQLite and PostgreSQL: the fakes' recorded requests and the rows; never logs."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import col, select

from core.failpoints import FAILPOINT_EXIT_CODE, Failpoint
from core.models import DraftRow
from core.post_body import PostBody
from core.review.alt_text import ALT_TEXT_SYSTEM
from core.states import DraftState
from core.store.engine import Store
from tests.conftest import config_text
from tests.fakes.anthropic_api import read_requests
from tests.fakes.slack_api import read_calls
from tests.fakes.web import RSS_TYPE, FakeWeb
from tests.harness.deployments import Processes
from tests.harness.processes import fake_server, galley_run_env, stop, wait_for
from tests.harness.slow_marks import starts_a_server
from tests.harness.timing import scaled
from tests.images.pictures import photo
from tests.sources.feed_documents import posts_feed, with_enclosure

pytestmark = pytest.mark.slow

PUBLISHED = datetime(2020, 6, 1, 12, 0, tzinfo=UTC)  # long past, whatever day it is
CAPTION = "The team on stage at the launch"
IMAGE = "/img/launch.jpg"


@dataclass(frozen=True)
class Deployment:
    processes: Processes
    web: FakeWeb
    anthropic_state: Path
    slack_state: Path

    @property
    def store(self) -> Store:
        return self.processes.store

    def model_requests(self) -> list[dict[str, Any]]:
        return read_requests(self.anthropic_state)

    def alt_requests(self) -> list[dict[str, Any]]:
        return [r for r in self.model_requests() if ALT_TEXT_SYSTEM in str(r["body"])]

    def review_posts(self) -> list[dict[str, Any]]:
        return [
            c
            for c in read_calls(self.slack_state)
            if c["method"] == "chat.postMessage" and not c["params"].get("thread_ts")
        ]


@pytest.fixture
@starts_a_server
def deployment(tmp_path: Path, db_url: str) -> Iterator[Deployment]:
    anthropic_state, slack_state = tmp_path / "anthropic.json", tmp_path / "slack.json"
    with (
        FakeWeb() as web,
        fake_server("tests.fakes.anthropic_api", anthropic_state) as anthropic_url,
        fake_server("tests.fakes.slack_api", slack_state) as slack_url,
    ):
        web.publish(IMAGE, photo(800, 600), "image/jpeg")
        feed = with_enclosure(posts_feed(web.url, (1, 2), PUBLISHED), "post-2", IMAGE, CAPTION)
        web.publish("/feed.xml", feed, RSS_TYPE)
        config = tmp_path / "galley.toml"
        items = (
            f'trigger = "items"\nbackfill = 1\n'
            f'source = {{ kind = "feed", url = "{web.url}/feed.xml", name = "blog" }}\n'
        )
        text = config_text(pending_limit=10).replace('"0 9 * * mon"', '"*/5 * * * *"')
        config.write_text(text + items)
        env = galley_run_env(config, db_url, anthropic_url=anthropic_url, slack_url=slack_url)
        processes = Processes(env, Store(db_url), tmp_path)
        yield Deployment(processes, web, anthropic_state, slack_state)
        processes.close()


def the_draft(store: Store) -> DraftRow | None:
    with store.read() as session:
        return session.exec(select(DraftRow).where(col(DraftRow.state) == DraftState.READY)).first()


def alt_of(store: Store) -> str:
    draft = the_draft(store)
    assert draft is not None and draft.text is not None
    [image] = PostBody.parse(draft.text).images
    return image.alt


def test_a_bot_killed_before_asking_for_alt_text_has_it_asked_by_the_next_start(
    deployment: Deployment,
) -> None:
    d = deployment
    dead = d.processes.start(failpoint=Failpoint.AFTER_REVIEW_RECORDED)
    assert dead.wait(timeout=scaled(90)) == FAILPOINT_EXIT_CODE, d.processes.log_of(1)
    assert alt_of(d.store) == ""  # the message is posted; its image has no alt text yet
    assert len(d.review_posts()) == 1
    assert len(d.model_requests()) == 1 and d.alt_requests() == []  # the draft alone

    replica = d.processes.start()
    try:
        wait_for(lambda: alt_of(d.store) != "", 60, "the alt text asked for by the next start")
    finally:
        stop(replica)

    [asked] = d.alt_requests()
    assert CAPTION in str(asked["body"])  # asked with the entry's caption
    assert len(d.model_requests()) == 2  # nothing drafted again
    assert len(d.review_posts()) == 1  # the message updated, never posted again
    assert d.web.gets(IMAGE) == 1  # the image downloaded once, by the first process
