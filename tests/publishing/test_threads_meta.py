"""Threads (Meta) as a destination (docs/design.md §24), in process: the publishing
service and the `httpx` publisher against the fake Threads API over real HTTP.

A post is two recorded steps: the container's id is on its own receipt before
`threads_publish` is sent, and every retry publishes that container, so a lost answer, a
5xx, a crash between the steps or a second pass never makes a second published post.
Counted on the fake: containers made, posts published, the `creation_id` of every
publish request; read from the database: receipts and the run. Both backends.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from bot.review_facts import fit_line
from core.identity import container_effect_key, publish_effect_key, publish_part_key
from core.models import EffectRow
from core.policies import EffectStep, FailReason, PublishOutcome, Refusal
from core.ports import PostQuery, Publication
from core.publishing.containers import with_container
from core.publishing.lost_answers import LOOK_UP_ALLOWANCE
from core.publishing.platforms.threads_meta import ThreadsPublisher
from core.review.facts import annotate
from core.review.queue import load_item
from core.setup.publish_targets import THREADS_READ_DELAY, ThreadsTarget
from core.states import EffectState, RunState
from tests.fakes import social
from tests.fakes.anthropic_api import FakeAnthropic, ok
from tests.fakes.threads_meta import (
    TOKEN,
    USER,
    FakeThreads,
    invalid_token,
    rate_limited,
    server_error,
    throttled,
)
from tests.harness.slow_marks import starts_a_server
from tests.harness.threads import PARTS, approved_thread
from tests.harness.worlds import KEY, RUN, MakeWorld, World

TARGET = f"threads:{USER}"
EFFECT = publish_effect_key(KEY, TARGET)
ENV = {"GALLEY_THREADS_TOKEN": TOKEN}


@pytest.fixture
@starts_a_server
def threads() -> Iterator[FakeThreads]:
    with FakeThreads() as server:
        yield server


def threads_world(worlds: MakeWorld, db_url: str, fake: FakeThreads) -> World:
    publish = f'publish = {{ to = "threads", user = "{USER}", api = "{fake.api}" }}'
    return worlds(db_url, publish=publish, environ=ENV)


def published_from(fake: FakeThreads) -> list[str]:
    """The `creation_id` of every threads_publish request, whatever became of it."""
    return [str(r.body["creation_id"]) for r in fake.requests_to(f"/{USER}/threads_publish")]


def receipt(world: World, key: str) -> EffectRow | None:
    with world.store.read() as session:
        return session.get(EffectRow, key)


def publisher(fake: FakeThreads, environ: dict[str, str] | None = None) -> ThreadsPublisher:
    target = ThreadsTarget(to="threads", user=USER, api=fake.api)
    return ThreadsPublisher(target, timedelta(seconds=5), ENV if environ is None else environ)


def posted(pub: ThreadsPublisher, text: str) -> str:
    """Both steps, as the service takes them: a container, then its publication."""
    now = datetime.now(UTC)
    sent = Publication(EFFECT, KEY, "weekly-update", "threads", now, text, "U0EDITOR", now)
    return pub.publish(replace(sent, container=pub.create_container(sent)))


def passes(world: World) -> None:
    world.service().publish_pending()
    world.alerts().sweep()


def test_a_post_is_a_container_kept_on_its_receipt_then_published_once(
    db_url: str, worlds: MakeWorld, threads: FakeThreads
) -> None:
    world = threads_world(worlds, db_url, threads)
    world.approved()
    assert world.service().publish_run(RUN).outcome == PublishOutcome.PUBLISHED
    [container], [post] = threads.containers(), threads.published()
    made = receipt(world, container_effect_key(EFFECT))
    assert made is not None and made.step == EffectStep.CONTAINER
    assert made.state == EffectState.SUCCEEDED and made.external_id == container["id"]
    assert published_from(threads) == [container["id"]]
    sent = receipt(world, EFFECT)
    assert sent is not None and sent.external_id == post["id"] != container["id"]
    assert json.loads(sent.result or "{}")["url"] == post["permalink"]
    assert world.run_row().state == RunState.SUCCEEDED
    assert world.service("w2").publish_run(RUN).outcome == PublishOutcome.NOT_READY
    assert len(threads.published()) == 1


def test_a_lost_publish_answer_is_found_by_the_containers_status_and_not_sent_again(
    db_url: str, worlds: MakeWorld, threads: FakeThreads
) -> None:
    world = threads_world(worlds, db_url, threads)
    world.approved()
    threads.script("create", social.accept_then_drop())
    assert world.service().publish_run(RUN).outcome == PublishOutcome.UNCERTAIN
    world.clock.advance(THREADS_READ_DELAY)
    passes(world)
    assert world.run_row().state == RunState.SUCCEEDED
    [post] = threads.published()
    assert receipt(world, EFFECT).external_id == post["id"]  # type: ignore[union-attr]
    assert len(published_from(threads)) == 1 and len(threads.containers()) == 1
    world.clock.advance(LOOK_UP_ALLOWANCE)
    world.alerts().sweep()
    assert world.alert_messages() == []


@pytest.mark.parametrize("fault", ["no_answer", "server_error"])
def test_a_publish_that_did_not_happen_publishes_the_same_container_again(
    db_url: str, worlds: MakeWorld, threads: FakeThreads, fault: str
) -> None:
    """A crash or a 5xx between the steps: the look-up finds the container FINISHED, and
    the retry publishes that container; no second container is ever made."""
    world = threads_world(worlds, db_url, threads)
    world.approved()
    threads.script("create", social.drop() if fault == "no_answer" else server_error())
    assert world.service().publish_run(RUN).outcome == PublishOutcome.UNCERTAIN
    assert threads.published() == []
    world.clock.advance(THREADS_READ_DELAY)
    passes(world)
    assert world.run_row().state == RunState.SUCCEEDED
    [container] = threads.containers()
    assert published_from(threads) == [container["id"], container["id"]]
    assert len(threads.published()) == 1


def test_a_lost_container_answer_makes_another_but_only_the_receipts_is_published(
    db_url: str, worlds: MakeWorld, threads: FakeThreads
) -> None:
    world = threads_world(worlds, db_url, threads)
    world.approved()
    threads.script("container", social.accept_then_drop())
    assert world.service().publish_run(RUN).outcome == PublishOutcome.WAITING
    assert published_from(threads) == [] and len(threads.containers()) == 1
    world.clock.advance(timedelta(minutes=1))
    assert world.service("w2").publish_run(RUN).outcome == PublishOutcome.PUBLISHED
    _stray, kept = threads.containers()
    assert receipt(world, container_effect_key(EFFECT)).external_id == kept["id"]  # type: ignore[union-attr]
    assert published_from(threads) == [kept["id"]] and len(threads.published()) == 1


def test_an_expired_container_is_made_again_under_a_renewed_key(
    db_url: str, worlds: MakeWorld, threads: FakeThreads
) -> None:
    world = threads_world(worlds, db_url, threads)
    world.approved()
    threads.script("create", rate_limited(retry_after=60))
    assert world.service().publish_run(RUN).outcome == PublishOutcome.WAITING
    [first] = threads.containers()
    threads.expire(first["id"])  # a day passed before the next try
    world.clock.advance(timedelta(minutes=2))
    assert world.service().publish_run(RUN).outcome == PublishOutcome.PUBLISHED
    _, second = threads.containers()
    renewed = receipt(world, container_effect_key(EFFECT, 2))
    assert renewed is not None and renewed.external_id == second["id"]
    assert published_from(threads) == [first["id"], second["id"]]
    assert len(threads.published()) == 1


@pytest.mark.parametrize(
    ("answer", "wait"),
    [(rate_limited(retry_after=30), 30), (throttled(code=4, regain_minutes=5), 300)],
    ids=["429_retry_after", "graph_code_4"],
)
def test_a_throttled_publish_waits_the_named_time_then_publishes_once(
    db_url: str, worlds: MakeWorld, threads: FakeThreads, answer: social.Action, wait: int
) -> None:
    world = threads_world(worlds, db_url, threads)
    world.approved()
    threads.script("create", answer)
    assert world.service().publish_run(RUN).outcome == PublishOutcome.WAITING
    world.clock.advance(timedelta(seconds=wait - 5))
    assert world.service().publish_run(RUN).outcome == PublishOutcome.WAITING
    assert len(published_from(threads)) == 1  # not asked again before its time
    world.clock.advance(timedelta(seconds=10))
    assert world.service().publish_run(RUN).outcome == PublishOutcome.PUBLISHED
    assert len(threads.published()) == 1 and len(threads.containers()) == 1


def test_a_refused_token_stops_the_run_and_tells_people(
    db_url: str, worlds: MakeWorld, threads: FakeThreads
) -> None:
    world = threads_world(worlds, db_url, threads)
    world.approved()
    threads.script("container", invalid_token())
    assert world.service().publish_run(RUN).outcome == PublishOutcome.FAILED
    run = world.run_row()
    assert run.state == RunState.FAILED and run.reason == FailReason.PUBLISH_AUTH
    assert len(world.alert_messages()) == 1
    assert threads.published() == [] and published_from(threads) == []


def test_a_full_days_quota_is_refused_with_the_reason_before_the_publish(
    db_url: str, worlds: MakeWorld, threads: FakeThreads
) -> None:
    world = threads_world(worlds, db_url, threads)
    world.approved()
    threads.fill_quota(250)
    result = world.service().publish_run(RUN)
    assert result.outcome == PublishOutcome.FAILED
    assert "250 posts in 24 hours" in (result.detail or "")
    assert world.run_row().state == RunState.FAILED
    sent = receipt(world, EFFECT)
    assert sent is not None and "250 posts in 24 hours" in (sent.detail or "")
    assert published_from(threads) == []  # refused ahead, never sent to fail


def test_a_thread_is_published_part_after_part_each_replying_to_the_one_before(
    db_url: str, worlds: MakeWorld, threads: FakeThreads
) -> None:
    world = threads_world(worlds, db_url, threads)
    approved_thread(world)
    threads.script("create", social.accept(), social.accept_then_drop())  # part 2's answer lost
    assert world.service().publish_run(RUN).outcome == PublishOutcome.UNCERTAIN
    world.clock.advance(THREADS_READ_DELAY)
    assert world.service("w2").publish_run(RUN).outcome == PublishOutcome.PUBLISHED
    posts = threads.published()
    assert [p["text"] for p in posts] == list(PARTS)
    assert [p["replied_to"] for p in posts] == [None, *[p["id"] for p in posts[:-1]]]
    assert len(published_from(threads)) == 4 and len(threads.containers()) == 4
    keys = [publish_part_key(KEY, TARGET, n) for n in (1, 2, 3, 4)]
    assert [receipt(world, k).external_id for k in keys] == [p["id"] for p in posts]  # type: ignore[union-attr]


def test_the_look_up_takes_no_post_made_before_the_first_send_nor_anothers_proof(
    threads: FakeThreads,
) -> None:
    pub = publisher(threads)
    post_id = posted(pub, "We're hiring.")
    now = datetime.now(UTC)
    assert pub.lookup(PostQuery(EFFECT, "We're hiring.", now - timedelta(minutes=5))) == post_id
    later = PostQuery(EFFECT, "We're hiring.", now + timedelta(hours=1))
    assert pub.lookup(later) is None  # made before this receipt's first send
    taken = PostQuery(EFFECT, "We're hiring.", now - timedelta(minutes=5), taken=lambda _: True)
    assert pub.lookup(taken) is None  # already another receipt's proof


def test_a_draft_over_500_characters_shows_its_count_and_cannot_be_approved(
    db_url: str, worlds: MakeWorld, threads: FakeThreads, fake_anthropic: FakeAnthropic
) -> None:
    world = threads_world(worlds, db_url, threads)
    fake_anthropic.script(ok(text="Big news. " + "🎉" * 123))  # 10 + 123 x 4 bytes = 502
    key = world.draft()
    item = load_item(world.store, key)
    assert item is not None
    measured = annotate(world.store, world.config, world.clock.now(), item, world.core.fits)
    assert [(f.label, f.count, f.limit) for f in measured.fits] == [("Threads", 502, 500)]
    assert fit_line(measured.fits) == "Threads 502/500 ✗"  # the review message's line
    refused = world.galley.approve(key, 1, user="U0EDITOR")
    assert not refused.accepted and refused.refusal == Refusal.DOES_NOT_FIT
    assert "Threads: 502/500" in refused.message
    assert threads.requests == []  # measured here, nothing asked of Threads


def test_a_container_made_for_another_text_or_failed_is_never_published(
    db_url: str, worlds: MakeWorld, threads: FakeThreads
) -> None:
    """The container's receipt names what it was made for: a text edited since (or a
    container Threads failed) gets a new container under a renewed key, and the old one
    is never handed to threads_publish."""
    world = threads_world(worlds, db_url, threads)
    pub, ledger = publisher(threads), world.ledger()
    now = datetime.now(UTC)
    first = Publication(EFFECT, KEY, "weekly-update", "threads", now, "Old.", "U0EDITOR", now)

    def staged(publication: Publication) -> str:
        shaped = with_container(
            ledger, pub, publication, run_id=RUN, call_timeout=timedelta(seconds=5)
        )
        assert shaped.container is not None
        return shaped.container

    old = staged(first)
    assert staged(first) == old  # the receipt's container, asked and reused
    edited = staged(replace(first, text="New."))
    threads.fail(edited)
    remade = staged(replace(first, text="New."))
    assert len({old, edited, remade}) == 3
    assert [c["text"] for c in threads.containers()] == ["Old.", "New.", "New."]
    keys = [container_effect_key(EFFECT, n) for n in (1, 2, 3)]
    assert [receipt(world, k).external_id for k in keys] == [old, edited, remade]  # type: ignore[union-attr]
    assert published_from(threads) == []


def test_a_database_restored_from_before_the_send_finds_the_post_and_sends_nothing(
    db_url: str, worlds: MakeWorld, threads: FakeThreads
) -> None:
    """The restored rows have no receipt and no container: the account's posts since the
    approval are asked, and the post is recorded, not made again."""
    world = threads_world(worlds, db_url, threads)
    world.approved()
    world.back_up()
    assert world.service().publish_run(RUN).outcome == PublishOutcome.PUBLISHED
    world.restore()
    assert world.run_row().state == RunState.APPROVED  # the rows forgot the send
    assert world.service().publish_run(RUN).outcome == PublishOutcome.PUBLISHED
    [post] = threads.published()
    assert receipt(world, EFFECT).external_id == post["id"]  # type: ignore[union-attr]
    assert len(published_from(threads)) == 1 and len(threads.containers()) == 1
