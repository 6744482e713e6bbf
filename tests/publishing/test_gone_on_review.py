"""A post found gone after publication is said on its draft's review message too
(docs/design.md §28), once, through the fake Slack: the message's blocks say "then
gone", and a second pass rewrites nothing. Both backends."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from core.identity import publish_effect_key
from core.models import PostCheckRow
from core.policies import PostCheck, PublishOutcome
from core.publishing.readings import PostReadings
from core.review.facts import AnnotatedReviewSurface
from core.review.outbox import ReviewOutbox
from core.store.effects import EffectLedger
from tests.harness.two_platforms import Platforms, world_of
from tests.harness.worlds import KEY, REVIEW, RUN, MakeWorld, World


def outbox(world: World) -> ReviewOutbox:
    from bot.slack_surface import SlackReviewSurface

    surface = AnnotatedReviewSurface(
        SlackReviewSurface(world.channels, REVIEW), world.store, world.config, world.clock
    )
    ledger = EffectLedger(world.store, world.clock, "outbox")
    return ReviewOutbox(world.store, ledger, surface, channel=REVIEW, call_lease=timedelta(1))


def review_text(world: World) -> str:
    [message] = [m for m in world.slack.messages(REVIEW) if m.get("metadata")]
    return " ".join(_texts(message["blocks"]))


def _texts(node: Any) -> list[str]:
    if isinstance(node, dict):
        found = [node["text"]] if isinstance(node.get("text"), str) else []
        return found + [t for value in node.values() for t in _texts(value)]
    if isinstance(node, list):
        return [t for value in node for t in _texts(value)]
    return []


def test_a_post_found_gone_is_said_on_its_review_message_once(
    db_url: str, worlds: MakeWorld, platforms: Platforms
) -> None:
    world = world_of(worlds, db_url, platforms)
    messages = outbox(world)
    world.draft()
    assert messages.post_ready_drafts() == 1
    assert world.approve(KEY).accepted
    assert world.service().publish_run(RUN).outcome == PublishOutcome.PUBLISHED
    assert messages.sync_messages() == 1  # the message says where it went out
    assert "then gone" not in review_text(world)
    platforms.mastodon.delete(lambda post: True)
    world.clock.advance(timedelta(minutes=5))
    PostReadings(
        world.store,
        world.config,
        world.clock,
        "w1",
        world.publishers.publishers_for,
        world.alerts().alert_post_gone,
    ).read_due()

    assert messages.sync_messages() == 1

    text = review_text(world)
    assert "Published to Mastodon, then gone (404 at" in text
    assert messages.sync_messages() == 0  # said once
    assert len(world.slack.calls("chat.update")) == 2
    with world.store.read() as session:
        gone = session.get(PostCheckRow, publish_effect_key(KEY, platforms.mastodon_target))
        assert gone is not None and gone.state == PostCheck.GONE and gone.shown_at is not None
