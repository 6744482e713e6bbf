"""A recipe publishing to a Discord channel through the publishing service, in process,
over the Discord fake: exactly one message through a lost answer, a 5xx, a 429 with its
wait and a refused token; the message's URL on the receipt; a draft over 2,000
characters cannot be approved; a thread as replies. Counted: messages on the fake, the
run, the receipt. Both backends.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from datetime import timedelta

import pytest
from sqlmodel import select

from core.identity import publish_effect_key, publish_part_key
from core.models import PostReadingRow
from core.policies import ImageSource, PublishOutcome
from core.post_body import PostBody
from core.publishing.readings import PostReadings
from core.states import DraftState, EffectState, RunState
from tests.fakes import discord, social
from tests.fakes.anthropic_api import FakeAnthropic, ok
from tests.fakes.discord import CHANNEL_ID, GUILD_ID, TOKEN, FakeDiscord
from tests.harness.slow_marks import starts_a_server
from tests.harness.threads import PARTS, approved_thread
from tests.harness.worlds import KEY, RUN, MakeWorld, World
from tests.images.pictures import flat

TARGET = f"discord:{CHANNEL_ID}"
EFFECT = publish_effect_key(KEY, TARGET)
ENV = {"GALLEY_DISCORD_TOKEN": TOKEN}


@pytest.fixture
@starts_a_server
def fake() -> Iterator[FakeDiscord]:
    with FakeDiscord() as server:
        yield server


def publish_line(fake_api: str, extra: str = "") -> str:
    return f'publish = {{ to = "discord", channel = "{CHANNEL_ID}", api = "{fake_api}"{extra} }}'


def world_of(worlds: MakeWorld, db_url: str, fake: FakeDiscord, defaults: str = "") -> World:
    return worlds(db_url, publish=publish_line(fake.api), environ=ENV, defaults=defaults)


def receipt_state(world: World, key: str = EFFECT) -> str | None:
    effect = world.effect(key)
    return None if effect is None else effect.state


def test_a_message_is_published_once_and_its_url_kept_on_the_receipt(
    db_url: str, worlds: MakeWorld, fake: FakeDiscord
) -> None:
    world = world_of(worlds, db_url, fake)
    world.approved()
    assert world.service().publish_run(RUN).outcome == PublishOutcome.PUBLISHED
    [message] = fake.messages()
    effect = world.effect(EFFECT)
    assert effect is not None and effect.state == EffectState.SUCCEEDED
    assert effect.external_id == message["id"]
    assert effect.result is not None
    url = json.loads(effect.result)["url"]
    assert url == f"https://discord.com/channels/{GUILD_ID}/{CHANNEL_ID}/{message['id']}"
    assert world.run_row().state == RunState.SUCCEEDED
    assert len(fake.requests_to(f"/channels/{CHANNEL_ID}/messages", "POST")) == 1


@pytest.mark.parametrize(
    "fault",
    [social.accept_then_drop(), social.status(500), social.status(502), social.drop()],
    ids=["answer_lost", "500", "502", "dropped_before"],
)
def test_an_unknown_answer_is_looked_up_and_published_exactly_once(
    db_url: str, worlds: MakeWorld, fake: FakeDiscord, fault: social.Action
) -> None:
    world = world_of(worlds, db_url, fake)
    world.approved()
    fake.script("create", fault)
    first = world.service().publish_run(RUN)
    assert first.outcome in (PublishOutcome.UNCERTAIN, PublishOutcome.PUBLISHED), first
    for _ in range(3):
        world.clock.advance(timedelta(minutes=1))
        if world.run_row().state == RunState.SUCCEEDED:
            break
        world.service().publish_run(RUN)
    assert world.run_row().state == RunState.SUCCEEDED
    assert len(fake.messages()) == 1
    assert receipt_state(world) == EffectState.SUCCEEDED


def test_a_429_waits_the_time_discord_names_then_publishes_once(
    db_url: str, worlds: MakeWorld, fake: FakeDiscord
) -> None:
    world = world_of(worlds, db_url, fake)
    world.approved()
    fake.script("create", discord.rate_limited(30.5))
    assert world.service().publish_run(RUN).outcome == PublishOutcome.WAITING
    world.clock.advance(timedelta(seconds=5))
    assert world.service().publish_run(RUN).outcome == PublishOutcome.WAITING  # not yet
    assert len(fake.requests_to(f"/channels/{CHANNEL_ID}/messages", "POST")) == 1
    world.clock.advance(timedelta(seconds=30))
    assert world.service().publish_run(RUN).outcome == PublishOutcome.PUBLISHED
    assert len(fake.messages()) == 1


@pytest.mark.parametrize(
    "answer",
    [
        social.status(401, discord.error(0, "401: Unauthorized")),
        social.status(403, discord.error(50013, "Missing Permissions")),
    ],
    ids=["401", "403"],
)
def test_a_refused_token_fails_the_run_and_alerts_people(
    db_url: str, worlds: MakeWorld, fake: FakeDiscord, answer: social.Action
) -> None:
    world = world_of(worlds, db_url, fake)
    world.approved()
    fake.script("create", answer)
    result = world.service().publish_run(RUN)
    assert result.outcome == PublishOutcome.FAILED
    assert result.detail is not None and "GALLEY_DISCORD_TOKEN" in result.detail
    assert world.run_row().state == RunState.FAILED
    [alert] = world.alert_messages()  # posted at once: refused credentials stop and tell
    assert TARGET in json.dumps(alert)
    assert fake.posts == []


def test_a_draft_over_2000_characters_cannot_be_approved(
    db_url: str, worlds: MakeWorld, fake_anthropic: FakeAnthropic
) -> None:
    """Discord's limit is measured here, before anything is sent: no server is asked."""
    world = worlds(db_url, publish=publish_line("http://127.0.0.1:9/api/v10"), environ=ENV)
    fake_anthropic.script(ok(text="A week of shipping. " * 101))  # 2,020 characters
    key = world.draft()
    answer = world.galley.approve(key, revision=1, user="U0EDITOR")
    assert not answer.accepted
    assert answer.message == (
        "Too long for Discord: 2020/2000. Edit or redraft it to fit before approving."
    )
    assert world.draft_row(key).state == DraftState.READY


def test_a_thread_is_published_as_replies_each_part_once_through_a_lost_answer(
    db_url: str, worlds: MakeWorld, fake: FakeDiscord
) -> None:
    world = world_of(worlds, db_url, fake)
    approved_thread(world)
    fake.script("create", social.accept(), social.accept_then_drop())  # part 2's answer lost
    assert world.service().publish_run(RUN).outcome == PublishOutcome.UNCERTAIN
    world.clock.advance(timedelta(seconds=1))
    assert world.service("w2").publish_run(RUN).outcome == PublishOutcome.PUBLISHED
    messages = sorted(fake.messages(), key=lambda m: int(m["id"]))
    assert [m["content"] for m in messages] == list(PARTS)
    replied_to = [(m.get("message_reference") or {}).get("message_id") for m in messages]
    assert replied_to == [None, *(m["id"] for m in messages[:-1])]
    assert len(fake.requests_to(f"/channels/{CHANNEL_ID}/messages", "POST")) == len(PARTS)
    for part in range(1, len(PARTS) + 1):
        assert receipt_state(world, publish_part_key(KEY, TARGET, part)) == EffectState.SUCCEEDED


def test_the_message_is_verified_then_its_reactions_kept_per_reading_and_deletion_alerted(
    db_url: str, worlds: MakeWorld, fake: FakeDiscord
) -> None:
    world = world_of(worlds, db_url, fake)
    world.approved()
    assert world.service().publish_run(RUN).outcome == PublishOutcome.PUBLISHED
    [message] = fake.messages()
    world.clock.advance(timedelta(minutes=2))
    assert readings(world).read_due().verified == 1
    fake.set_reactions(message["id"], **{"👍": 4, "🎉": 1})
    world.clock.advance(timedelta(hours=1))
    assert readings(world).read_due().readings == 1
    with world.store.read() as session:
        [reading] = session.exec(select(PostReadingRow)).all()
    assert (reading.target, reading.likes, reading.reposts) == (TARGET, 5, 0)
    fake.delete(lambda post: post["id"] == message["id"])
    world.clock.advance(timedelta(hours=23))
    assert readings(world).read_due().gone == 1
    [alert] = world.alert_messages()
    assert "Discord" in json.dumps(alert) and "gone" in json.dumps(alert)


def readings(world: World) -> PostReadings:
    return PostReadings(
        world.store,
        world.config,
        world.clock,
        "w1",
        world.publishers.publishers_for,
        world.alerts("w1").alert_post_gone,
    )


def test_an_approved_image_goes_with_the_message_once_with_its_alt_text(
    db_url: str, worlds: MakeWorld, fake: FakeDiscord, fake_anthropic: FakeAnthropic
) -> None:
    world = world_of(worlds, db_url, fake)
    fake_anthropic.script(ok(text="A week of shipping."))
    key = world.draft()
    data = flat(800, 600)
    ref = world.core.images.take(
        data, "chart.png", ImageSource.SLACK_FILE, [TARGET], alt="Sales by week"
    ).ref
    body = PostBody.single("A week of shipping.").with_images([ref]).to_text()
    assert world.galley.edit(key, body, revision=1, user="U0EDITOR").accepted
    assert world.galley.approve(key, revision=2, user="U0EDITOR").accepted
    fake.script("create", social.accept_then_drop())  # the answer lost: looked up, not resent
    world.service().publish_run(RUN)
    world.clock.advance(timedelta(minutes=1))
    world.service().publish_run(RUN)
    assert world.run_row().state == RunState.SUCCEEDED
    [message] = fake.messages()
    [attachment] = message["attachments"]
    assert (attachment["filename"], attachment["description"]) == ("chart.png", "Sales by week")
    assert attachment["sha256"] == hashlib.sha256(data).hexdigest() == ref.sha256
    assert len(fake.requests_to(f"/channels/{CHANNEL_ID}/messages", "POST")) == 1
