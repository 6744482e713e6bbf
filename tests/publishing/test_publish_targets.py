"""A recipe that publishes to several targets (docs/design.md §24): one effect per target,
the run succeeds when every target has, a failing target is alerted by name and retried
alone, and a target that already succeeded is never sent again.

In process, over real HTTP: the real `atproto` and `Mastodon.py` clients against the
Bluesky and Mastodon fakes. Tests count posts on the fakes and read receipts and states
from the database. Both backends.
"""

from __future__ import annotations

import json
from datetime import timedelta

from bot.app_home import Viewer, home_view
from bot.slack_surface import render
from core.api.home import read_home
from core.identity import publish_effect_key
from core.models import EffectRow
from core.policies import PublishOutcome
from core.review.facts import AnnotatedReviewSurface, annotate
from core.review.outbox import ReviewOutbox
from core.review.queue import load_item
from core.states import DraftState, EffectState, RunState
from tests.fakes import social
from tests.fakes.bluesky import HANDLE
from tests.harness.two_platforms import BLUESKY, ENV, Platforms, receipt_state, world_of
from tests.harness.worlds import KEY, REVIEW, RUN, MakeWorld, World
from tests.review.test_review_messages import RecordingSurface


def test_one_platform_failing_twice_then_recovering_makes_one_post_on_each(
    db_url: str, worlds: MakeWorld, platforms: Platforms
) -> None:
    world = world_of(worlds, db_url, platforms)
    world.approved()
    platforms.mastodon.script("create", social.status(503), social.status(503))
    outcomes = []
    for _ in range(3):
        outcomes.append(world.service().publish_run(RUN).outcome)
        world.clock.advance(timedelta(minutes=1))  # past the refusal's backoff
    assert outcomes == [PublishOutcome.WAITING, PublishOutcome.WAITING, PublishOutcome.PUBLISHED]
    assert platforms.posts() == (1, 1)
    assert platforms.creates() == (1, 3)  # Bluesky was sent once: its receipt answered after
    assert world.run_row().state == RunState.SUCCEEDED
    assert {receipt_state(world, t) for t in (BLUESKY, platforms.mastodon_target)} == {
        EffectState.SUCCEEDED
    }


def test_a_waiting_target_is_named_and_the_run_waits_for_it(
    db_url: str, worlds: MakeWorld, platforms: Platforms
) -> None:
    world = world_of(worlds, db_url, platforms)
    world.approved()
    platforms.mastodon.script("create", social.status(503))
    result = world.service().publish_run(RUN)
    assert result.outcome == PublishOutcome.WAITING
    assert result.detail is not None and platforms.mastodon_target in result.detail
    assert BLUESKY not in result.detail  # the one that went out is not what waits
    assert world.run_row().state == RunState.PUBLISHING


def test_a_refused_target_is_alerted_by_name_and_retried_alone(
    db_url: str, worlds: MakeWorld, platforms: Platforms
) -> None:
    world = world_of(worlds, db_url, platforms)
    world.approved()
    platforms.mastodon.script("create", social.status(422, {"error": "Validation failed"}))
    assert world.service().publish_run(RUN).outcome == PublishOutcome.FAILED
    assert world.run_row().state == RunState.FAILED
    assert world.alerts().sweep() == 1
    [alert] = world.alert_messages()
    headline = alert["blocks"][0]["text"]["text"]  # the first line, before the facts
    assert f"Not published to: {platforms.mastodon_target}." in headline
    assert f"Published to: {BLUESKY} (https://" in headline  # it went out, and where

    world.resolver().retry(RUN, actor="U0ADMIN")  # the cause is fixed: a person retries
    assert world.service().publish_run(RUN).outcome == PublishOutcome.PUBLISHED
    assert platforms.posts() == (1, 1)
    assert platforms.creates() == (1, 2)  # Bluesky, which had succeeded, was not sent again
    assert world.run_row().state == RunState.SUCCEEDED


def test_a_lost_answer_on_one_target_is_looked_up_and_the_other_not_resent(
    db_url: str, worlds: MakeWorld, platforms: Platforms
) -> None:
    world = world_of(worlds, db_url, platforms)
    world.approved()
    platforms.bluesky.script("create", social.accept_then_drop())
    result = world.service().publish_run(RUN)
    assert result.outcome == PublishOutcome.UNCERTAIN
    assert result.detail is not None and BLUESKY in result.detail
    assert world.run_row().state == RunState.UNCERTAIN
    world.clock.advance(timedelta(minutes=1))
    assert world.service().publish_run(RUN).outcome == PublishOutcome.PUBLISHED
    assert platforms.posts() == (1, 1)  # the record was found by its key, not re-created
    assert platforms.creates() == (1, 1)


def test_each_receipt_holds_its_posts_public_url(
    db_url: str, worlds: MakeWorld, platforms: Platforms
) -> None:
    world = world_of(worlds, db_url, platforms)
    world.approved()
    assert world.service().publish_run(RUN).outcome == PublishOutcome.PUBLISHED
    urls = []
    for target in (BLUESKY, platforms.mastodon_target):
        effect = world.effect(publish_effect_key(KEY, target))
        assert effect is not None and effect.result is not None
        urls.append(json.loads(effect.result)["url"])
    [post] = platforms.bluesky.posts
    [status] = platforms.mastodon.statuses_of()
    assert urls[0] == f"https://bsky.app/profile/{HANDLE}/post/{post['rkey']}"
    assert urls[1] == f"{platforms.mastodon.url}/@galley/{status['id']}"


# --- the public URL, read from the receipt on every surface ----------------------------------

FROM_RECEIPT = "https://example.test/from-the-receipt/"


def published_with_urls_in_receipts(world: World, platforms: Platforms) -> list[str]:
    """Publish to both, then give each receipt a URL no publisher would make: a surface
    that shows it read the receipt, not the destination or the publisher."""
    world.approved()
    assert world.service().publish_run(RUN).outcome == PublishOutcome.PUBLISHED
    urls = []
    with world.store.transaction() as session:
        for n, target in enumerate((BLUESKY, platforms.mastodon_target)):
            effect = session.get(EffectRow, publish_effect_key(KEY, target))
            assert effect is not None and effect.result is not None
            urls.append(f"{FROM_RECEIPT}{n}")
            effect.result = json.dumps({**json.loads(effect.result), "url": urls[-1]})
    return urls


def test_galley_show_and_the_notebook_link_each_publication_from_its_receipt(
    db_url: str, worlds: MakeWorld, platforms: Platforms
) -> None:
    world = world_of(worlds, db_url, platforms)
    urls = published_with_urls_in_receipts(world, platforms)
    detail = world.galley.show(RUN)
    assert "published at" in str(detail) and all(url in str(detail) for url in urls)
    shown = [e["url"] for e in detail.to_json()["effects"] if e["step"] == "publish"]
    assert shown == urls  # `galley show --json`
    assert all(url in detail._repr_html_() for url in urls)  # the notebook


def test_the_home_tab_links_the_latest_runs_publications_from_its_receipts(
    db_url: str, worlds: MakeWorld, platforms: Platforms
) -> None:
    world = world_of(worlds, db_url, platforms)
    urls = published_with_urls_in_receipts(world, platforms)
    model = read_home(world.core)
    [line] = [line for line in model.recipes if line.last_run == RUN]
    assert [link.url for link in line.last_published] == urls
    view = json.dumps(home_view(model, Viewer("U0EDITOR", True, False), now=world.clock.now()))
    assert all(f"<{url}|" in view for url in urls)


def test_the_decided_review_message_links_each_publication_from_its_receipt(
    db_url: str, worlds: MakeWorld, platforms: Platforms
) -> None:
    world = world_of(worlds, db_url, platforms)
    urls = published_with_urls_in_receipts(world, platforms)
    item = load_item(world.store, KEY)
    assert item is not None and item.state == DraftState.PUBLISHED
    annotated = annotate(world.store, world.config, world.clock.now(), item)
    _, blocks = render(annotated)
    assert blocks[-1]["type"] == "context"  # below who decided, where the buttons were
    shown = json.dumps(blocks[-1])
    assert all(f"<{url}|" in shown for url in urls) and BLUESKY in shown


def test_the_review_message_is_rewritten_once_published_to_end_where_the_post_is(
    db_url: str, worlds: MakeWorld, platforms: Platforms
) -> None:
    """An immediate approval's message said "Approved" and never where the post went:
    a published draft's message is rewritten once, then left alone."""
    world = world_of(worlds, db_url, platforms)
    surface = RecordingSurface()
    outbox = ReviewOutbox(
        world.store, world.ledger(), surface, channel="C0REVIEW", call_lease=timedelta(1)
    )
    world.draft()
    assert outbox.post_ready_drafts() == 1
    assert world.approve().accepted
    outbox.sync_messages()
    assert world.service().publish_run(RUN).outcome == PublishOutcome.PUBLISHED

    assert outbox.sync_messages() == 1
    assert surface.updates[-1] == (KEY, DraftState.PUBLISHED, 1)
    assert outbox.sync_messages() == 0  # once


# --- a partial publication, told per target on every surface ---------------------------------


def test_a_wrong_bluesky_password_is_told_per_target_and_mastodon_s_link_shown_at_once(
    db_url: str, worlds: MakeWorld, platforms: Platforms
) -> None:
    """Bluesky refuses the password while Mastodon publishes: the alert says what became
    of each (never "nothing was published"), the review message links the Mastodon post
    without waiting for a retry, and `galley show` names each target's outcome."""
    from bot.slack_surface import SlackReviewSurface  # the review message as Slack gets it

    wrong = {**ENV, "GALLEY_BLUESKY_PASSWORD": "not-the-password"}
    world = worlds(db_url, publish=platforms.publish, environ=wrong)
    surface = AnnotatedReviewSurface(
        SlackReviewSurface(world.channels, REVIEW), world.store, world.config, world.clock
    )
    outbox = ReviewOutbox(
        world.store, world.ledger(), surface, channel=REVIEW, call_lease=timedelta(1)
    )
    world.draft()
    assert outbox.post_ready_drafts() == 1
    assert world.approve().accepted
    outbox.sync_messages()

    assert world.service().publish_run(RUN).outcome == PublishOutcome.FAILED
    assert platforms.posts() == (0, 1)
    [status] = platforms.mastodon.statuses_of()
    url = f"{platforms.mastodon.url}/@galley/{status['id']}"

    world.alerts().sweep()  # told once, by the failed pass or the sweep
    [alert] = world.alert_messages()
    headline = alert["blocks"][0]["text"]["text"]
    assert "nothing was published" not in headline.lower(), headline
    assert f"Published to: {platforms.mastodon_target} ({url})." in headline, headline
    assert f"Not published to: {BLUESKY}." in headline, headline

    assert outbox.sync_messages() == 1  # the message links what went out, now
    [review] = [m for m in world.slack.messages(REVIEW) if m.get("metadata")]
    assert f"<{url}|{platforms.mastodon_target}>" in json.dumps(review["blocks"])
    assert outbox.sync_messages() == 0  # once per target published

    shown = str(world.galley.show(RUN))
    assert f"{platforms.mastodon_target}: published ({url})" in shown, shown
    assert f"{BLUESKY}: not published (failed" in shown, shown
    assert "Needs a person" in shown and "drafts it again" not in shown, shown
