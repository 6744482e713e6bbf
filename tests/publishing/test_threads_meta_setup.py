"""Threads (Meta) before and after the send (docs/design.md §24): the config's keys, the
secret `galley check` and `galley run` refuse without, `galley check --online` proving
the token once, the 500-character fit and the image refused at review, no mention from
model text, the post's link, and its engagement read from insights (docs/design.md §28).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from bot.cli import app
from core.errors import EffectNotSent, EffectOutcomeUnknown
from core.images.limits import ImageFacts
from core.images.review_fit import image_problems
from core.ports import PostCounts, PostFound, PostGone, PostQuery, Publication
from core.post_body import ImageRef
from core.publishing.platforms.threads_meta import ThreadsPublisher
from core.setup.config import parse_config
from core.setup.publish_targets import ThreadsTarget
from core.setup.serving import unserved
from tests.conftest import config_text
from tests.fakes.anthropic_api import FakeAnthropic
from tests.fakes.slack_api import FakeSlack
from tests.fakes.threads_meta import TOKEN, USER, FakeThreads
from tests.harness.slow_marks import starts_a_server

KEY = f"linkedin|weekly-update@2026-11-23T09:00|v1|publish:threads:{USER}"
ENV = {"GALLEY_THREADS_TOKEN": TOKEN}
THREADS_RECIPE = """
[[recipes]]
name = "threads"
platform = "social"
schedule = "0 9 * * mon"
prompt = "Write."
publish = {{ to = "threads", user = "{user}", api = "{api}" }}
"""


@pytest.fixture
@starts_a_server
def threads() -> Iterator[FakeThreads]:
    with FakeThreads() as server:
        yield server


def publisher(
    api: str = "http://127.0.0.1:9/v1.0", environ: dict[str, str] = ENV
) -> ThreadsPublisher:
    target = ThreadsTarget(to="threads", user=USER, api=api)
    return ThreadsPublisher(target, timedelta(seconds=5), environ)


def posted(pub: ThreadsPublisher, text: str) -> str:
    now = datetime.now(UTC)
    sent = Publication(KEY, KEY.rsplit("|", 1)[0], "threads", "social", now, text, "U0EDITOR", now)
    return pub.publish(replace(sent, container=pub.create_container(sent)))


def test_a_threads_target_names_its_user_and_reads_its_own_variable() -> None:
    target = ThreadsTarget(to="threads", user=USER)
    assert target.target == f"threads:{USER}" and target.api == "https://graph.threads.net/v1.0"
    assert target.secret_env == "GALLEY_THREADS_TOKEN"
    with pytest.raises(ValidationError, match="user id"):
        ThreadsTarget(to="threads", user="@galley")


def test_galley_check_and_run_refuse_a_threads_target_whose_token_is_unset() -> None:
    config = parse_config(config_text() + THREADS_RECIPE.format(user=USER, api="http://x"))
    assert unserved(config, {}) == [
        f"recipe 'threads': publish: GALLEY_THREADS_TOKEN is not set: threads:{USER} "
        "needs it to publish"
    ]
    assert unserved(config, ENV) == []


def test_five_hundred_characters_fit_an_emoji_counted_as_its_utf8_bytes() -> None:
    pub = publisher()
    assert pub.fit("a" * 500).fits and not pub.fit("a" * 501).fits
    assert pub.fit("🎉" * 125).count == 500 and not pub.fit("🎉" * 125 + "a").fits
    assert pub.fit("é" * 500).fits  # a letter is one character, whatever its bytes


def test_an_image_is_refused_at_review_for_threads_saying_why() -> None:
    image = ImageRef("a" * 64, "chart.png", "A chart of the week")
    facts = {image.sha256: ImageFacts("image/png", 800, 600, 40_000)}
    [problem] = image_problems([image], [f"threads:{USER}"], facts)
    assert "Threads takes an image only from a public URL" in problem
    assert image_problems([image], ["mastodon:mastodon.social"], facts) == []


def test_a_publication_with_an_image_is_never_sent_without_it() -> None:
    now = datetime.now(UTC)
    sent = Publication(KEY, "d", "threads", "social", now, "Text.", "U0EDITOR", now)
    with_image = replace(sent, images=(ImageRef("a" * 64, "chart.png", "A chart"),))
    with pytest.raises(EffectNotSent, match="public URL") as refused:
        publisher().create_container(with_image)
    assert refused.value.permanent


def test_model_text_mentions_nobody_and_the_receipt_gets_the_permalink(
    threads: FakeThreads,
) -> None:
    pub = publisher(threads.api)
    post_id = posted(pub, "Thanks @alice and @bob.smith for the fix!")
    [post] = threads.published()
    assert post["mentions"] == []  # the fake tags every @username Threads would
    assert pub.link(post_id) == post["permalink"]
    [sent] = threads.requests_to(f"/{USER}/threads", "POST")
    assert sent.headers["authorization"] == f"Bearer {TOKEN}"
    assert TOKEN not in sent.path  # the token rides in the header, never the URL


def test_engagement_is_read_from_insights_and_a_deleted_post_is_gone(
    threads: FakeThreads,
) -> None:
    pub = publisher(threads.api)
    post_id = posted(pub, "How it did.")
    threads.set_counts(lambda p: p["id"] == post_id, views=120, likes=7, replies=2, reposts=1)
    assert pub.read_counts([post_id]) == {
        post_id: PostCounts(likes=7, reposts=1, replies=2, quotes=0, impressions=120)
    }
    assert isinstance(pub.read_post(post_id, KEY), PostFound)
    threads.insights_denied = True  # a token without threads_manage_insights
    [(_, refused)] = pub.read_counts([post_id]).items()
    assert refused.note is not None and "threads_manage_insights" in refused.note
    threads.delete(lambda p: p["id"] == post_id)
    assert isinstance(pub.read_post(post_id, KEY), PostGone)
    assert pub.read_counts([post_id]) == {}


def test_galley_check_online_proves_the_token_once_and_posts_nothing(
    tmp_path: Path, threads: FakeThreads, fake_anthropic: FakeAnthropic
) -> None:
    slack = FakeSlack().start()
    try:
        config = tmp_path / "galley.toml"
        config.write_text(config_text() + THREADS_RECIPE.format(user=USER, api=threads.api))
        env = {
            "GALLEY_CONFIG": str(config),
            "GALLEY_DATABASE_URL": f"sqlite:///{tmp_path / 'g.db'}",
            "SLACK_BOT_TOKEN": "xoxb-test",
            "GALLEY_SLACK_API_URL": slack.url + "/api/",
            "ANTHROPIC_API_KEY": "sk-ant-test",
            "ANTHROPIC_BASE_URL": fake_anthropic.url,
        }
        assert CliRunner().invoke(app, ["db", "upgrade"], env=env).exit_code == 0
        good = CliRunner().invoke(app, ["check", "--online"], env=env | ENV)
        bad = CliRunner().invoke(
            app, ["check", "--online"], env=env | {"GALLEY_THREADS_TOKEN": "x"}
        )
    finally:
        slack.stop()
    assert good.exit_code == 0, good.output
    assert f"threads:{USER}: ok: token accepted for @galley" in good.output
    assert bad.exit_code == 2 and "GALLEY_THREADS_TOKEN" in bad.output and "190" in bad.output
    assert len(threads.requests_to("/me")) == 2 and threads.posts == []


def test_a_publish_refused_because_its_container_is_already_out_is_unknown_not_refused(
    threads: FakeThreads,
) -> None:
    """An earlier send whose answer was lost may land after the look-up: Threads refuses
    the second publish of the container, and that refusal must not fail a post that is
    out; the look-up then finds it."""
    pub = publisher(threads.api)
    now = datetime.now(UTC)
    sent = Publication(KEY, "d", "threads", "social", now, "Once.", "U0EDITOR", now)
    sent = replace(sent, container=pub.create_container(sent))
    post_id = pub.publish(sent)
    with pytest.raises(EffectOutcomeUnknown, match="is published"):
        pub.publish(sent)
    assert [p["id"] for p in threads.published()] == [post_id]
    query = PostQuery(KEY, "Once.", now - timedelta(minutes=5), containers=(sent.container,))
    assert pub.lookup(query) == post_id
