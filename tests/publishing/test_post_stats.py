"""How published posts did, as people read it (docs/design.md §28): `g.stats()` and
`galley stats` over posts published to the Bluesky and Mastodon fakes and read back with
counts. Both backends.
"""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
import sqlalchemy as sa
from sqlmodel import col
from typer.testing import CliRunner

from bot.app_home import Viewer, home_view
from bot.cli import app
from bot.digest_text import digest_text
from core.api.home import read_home
from core.models import DraftRevisionRow, DraftRow, PostCheckRow
from core.operations.digest import build_digest
from core.policies import PostCheck, PublishOutcome
from core.post_body import BODY_MARK, PostBody
from core.publishing.engagement import NOT_READ, score
from tests.harness.two_platforms import BLUESKY, Platforms
from tests.harness.worlds import RUN, MakeWorld, World
from tests.publishing.test_post_readings import mine, readings, world

__all__ = ["world"]  # the fixture, shared


def read_for_a_day(world: World, platforms: Platforms) -> None:
    world.clock.advance(timedelta(minutes=2))
    readings(world).read_due()
    platforms.bluesky.set_counts(mine, likes=4, reposts=1, replies=2, quotes=1)
    platforms.mastodon.set_counts(mine, likes=2)
    world.clock.advance(timedelta(hours=1))
    readings(world).read_due()
    platforms.bluesky.set_counts(mine, likes=10, reposts=3, replies=2, quotes=1)
    world.clock.advance(timedelta(hours=23))
    readings(world).read_due()


def test_the_score_counts_reposts_and_replies_twice() -> None:
    assert score(likes=10, reposts=3, replies=2, quotes=1) == 21


def test_stats_give_each_post_its_latest_reading_and_the_best_post_with_its_link(
    world: World, platforms: Platforms
) -> None:
    read_for_a_day(world, platforms)
    found = {post.target: post for post in world.galley.stats()}
    bluesky, mastodon = found[BLUESKY], found[platforms.mastodon_target]
    assert (bluesky.reading, bluesky.likes, bluesky.reposts, bluesky.score) == ("1d", 10, 3, 21)
    assert (mastodon.reading, mastodon.likes, mastodon.score) == ("1d", 2, 2)
    assert {bluesky.state, mastodon.state} == {PostCheck.VERIFIED}
    assert bluesky.run == RUN
    best = world.galley.stats().best()
    assert best is not None and best.target == BLUESKY
    assert best.url is not None and best.url.startswith("https://bsky.app/profile/")
    frame = world.galley.stats("weekly-update").to_frame()
    assert sorted(frame["score"]) == [2, 21]
    world.clock.advance(timedelta(days=2))
    assert len(world.galley.stats(days=1)) == 0  # published three days ago


def test_galley_stats_prints_each_post_and_the_best_as_json(
    world: World, platforms: Platforms, monkeypatch: pytest.MonkeyPatch
) -> None:
    read_for_a_day(world, platforms)
    monkeypatch.setattr("bot.cli_stats.open_galley", lambda: world.galley)
    result = CliRunner().invoke(app, ["stats", "weekly-update", "--json"])
    assert result.exit_code == 0, result.stdout
    document = json.loads(result.stdout)
    assert sorted(post["score"] for post in document["posts"]) == [2, 21]
    assert document["best"].startswith("https://bsky.app/profile/")
    table = CliRunner().invoke(app, ["stats", "--days", "7"])
    assert table.exit_code == 0 and "best: weekly-update on bluesky" in table.stdout


def test_the_digest_and_home_show_the_weeks_best_post_with_its_link_and_a_gone_post(
    world: World, platforms: Platforms
) -> None:
    read_for_a_day(world, platforms)
    platforms.mastodon.delete(mine)
    with world.store.transaction() as session:  # the Mastodon post is read back once more
        session.execute(
            sa.update(PostCheckRow)
            .where(col(PostCheckRow.target) == platforms.mastodon_target)
            .values(state=PostCheck.DUE, due_at=world.clock.now())
        )
    readings(world).read_due()
    digest = digest_text(build_digest(world.store, world.config, world.clock.now()))
    [best] = [line for line in digest.splitlines() if line.startswith("• Best post this week")]
    assert "<https://bsky.app/profile/" in best and "score 21" in best
    home = read_home(world.core)
    assert home.best_post is not None and home.best_post.target == BLUESKY
    [gone] = home.gone
    assert gone.target == platforms.mastodon_target and gone.gone is not None
    view = json.dumps(home_view(home, Viewer("U0EDITOR", True, True), now=world.clock.now()))
    assert "then gone (404 at" in view and "Best post this week" in view


def test_the_engagement_plot_draws_each_posts_score_per_recipe_and_target(
    world: World, platforms: Platforms
) -> None:
    empty = world.galley.plots.engagement()
    assert [t.get_text() for t in empty.axes[0].texts] == ["no published post read back yet"]
    readings(world).read_due()  # taken up, not read yet: no score to draw, not a 0
    unread = world.galley.plots.engagement()
    assert [t.get_text() for t in unread.axes[0].texts] == ["no published post read back yet"]
    read_for_a_day(world, platforms)
    [axes] = world.galley.plots.engagement().axes
    drawn = {line.get_label(): list(line.get_ydata()) for line in axes.get_lines()}
    assert drawn == {
        f"weekly-update → {BLUESKY}": [21],
        f"weekly-update → {platforms.mastodon_target}": [2],
    }


def test_a_post_just_published_is_in_stats_before_the_read_back_pass_and_says_not_read(
    world: World, platforms: Platforms, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No pass has taken the publications up yet: they are shown from their receipts,
    and their counts say "not read", not zero likes; once taken up, still not read."""
    found = world.galley.stats()
    assert sorted(post.target for post in found) == sorted([BLUESKY, platforms.mastodon_target])
    assert {(post.state, post.unread, post.reading) for post in found} == {
        (PostCheck.DUE, NOT_READ, None)
    }
    monkeypatch.setattr("bot.cli_stats.open_galley", lambda: world.galley)
    table = CliRunner().invoke(app, ["stats"])
    assert table.exit_code == 0 and table.stdout.count("not read") == 2

    readings(world).read_due()  # taken up, due for read-back: still nothing counted
    assert {post.unread for post in world.galley.stats()} == {NOT_READ}
    assert len(world.galley.stats()) == 2


def test_a_webhook_post_says_it_has_no_engagement_instead_of_zeros(
    db_url: str, worlds: MakeWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    hooked = worlds(db_url)  # a webhook with a status URL: read back, never counted
    hooked.approved()
    assert hooked.service().publish_run(RUN).outcome == PublishOutcome.PUBLISHED
    readings(hooked).read_due()
    hooked.clock.advance(timedelta(minutes=2))
    assert readings(hooked).read_due().verified == 1

    [post] = hooked.galley.stats()
    assert (post.state, post.unread) == (PostCheck.VERIFIED, "no engagement: webhook")
    monkeypatch.setattr("bot.cli_stats.open_galley", lambda: hooked.galley)
    table = CliRunner().invoke(app, ["stats", "--json"])
    assert json.loads(table.stdout)["posts"][0]["unread"] == "no engagement: webhook"


def test_galley_show_gives_each_publication_its_read_back_state_and_times_alike(
    world: World, platforms: Platforms
) -> None:
    """`galley show`: each publication verified, gone or not read yet (as `galley stats`
    knows it), and the decided time in the format of its other times."""

    def read_back() -> dict[str, str | None]:
        shown = world.galley.show(RUN).effects
        return {e.key.rpartition(":")[2]: e.read_back for e in shown if e.step == "publish"}

    assert set(read_back().values()) == {"not read yet"}
    world.clock.advance(timedelta(minutes=2))
    readings(world).read_due()
    assert set(read_back().values()) == {"verified"}
    platforms.mastodon.delete(mine)
    with world.store.transaction() as session:  # the Mastodon post is read back once more
        session.execute(
            sa.update(PostCheckRow)
            .where(col(PostCheckRow.target) == platforms.mastodon_target)
            .values(state=PostCheck.DUE, due_at=world.clock.now())
        )
    readings(world).read_due()
    assert sorted(read_back().values()) == ["gone", "verified"]

    detail = world.galley.show(RUN)
    assert detail.draft is not None and detail.draft.decided_at is not None
    printed = detail.rendered()
    assert f"U0EDITOR at {detail.draft.decided_at.isoformat(timespec='seconds')}" in printed
    assert "read_back" in printed and "gone" in printed


def test_galley_show_prints_a_revision_s_text_not_its_stored_form(world: World) -> None:
    body = PostBody({"*": ("First part.", "Second part.")})
    with world.store.transaction() as session:
        session.execute(sa.delete(DraftRevisionRow))  # the draft row's own text is shown
        session.execute(sa.update(DraftRow).values(text=body.to_text()))

    [revision] = world.galley.show(RUN).revisions
    assert revision.text == "--- * 1/2 ---\nFirst part.\n\n--- * 2/2 ---\nSecond part."
    assert BODY_MARK not in world.galley.show(RUN).rendered()
