"""The Discord publisher's threads, images, read-back and credentials, and its keys without
a server: against the fake Discord API over real HTTP (tests/publishing/test_discord.py
holds the sending, the look-up and the faults).
"""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from core.errors import EffectNotSent
from core.identity import discord_nonce
from core.ports import ImageBytes, PostFound, PostGone, PostQuery, ThreadPlace
from core.post_body import ImageRef
from core.publishing.platforms.discord_answers import snowflake_at, snowflake_time
from tests.fakes import discord
from tests.fakes.discord import CHANNEL_ID, FakeDiscord
from tests.publishing.test_discord import (
    KEY,
    TEXT,
    creates,
    fake,
    publication,
    publisher,
    query,
)

__all__ = ["fake"]  # the fixture, shared with test_discord.py


# --- threads, read back, credentials --------------------------------------------------------


def test_a_threads_later_part_replies_to_the_part_before_and_is_found_only_there(
    fake: FakeDiscord,
) -> None:
    pub = publisher(fake.api)
    first = pub.publish(publication(KEY, "Part one."))
    place = ThreadPlace(parent=first, root=first)
    second_key = KEY + "#2"
    elsewhere = pub.publish(publication(KEY + "-other", "Part two."))  # same words, no reply
    second = pub.publish(publication(second_key, "Part two.", reply_to=place))
    sent = fake.requests_to(f"/channels/{CHANNEL_ID}/messages", "POST")[-1]
    assert sent.body["message_reference"]["message_id"] == first
    found = pub.lookup(
        PostQuery(second_key, "Part two.", datetime.now(UTC) - timedelta(minutes=1), reply_to=place)
    )
    assert found == second != elsewhere


def test_a_reply_to_a_deleted_part_is_refused_with_discords_words(fake: FakeDiscord) -> None:
    place = ThreadPlace(parent="1250000000000000077", root="1250000000000000077")
    with pytest.raises(EffectNotSent, match="Unknown message") as caught:
        publisher(fake.api).publish(publication(reply_to=place))
    assert caught.value.permanent and fake.posts == []


def test_read_back_and_reactions_counted_as_likes(fake: FakeDiscord) -> None:
    pub = publisher(fake.api)
    ids = [pub.publish(publication(f"{KEY}:{n}", f"Post {n}.")) for n in range(3)]
    fake.set_reactions(ids[0], **{"👍": 3, "🎉": 2})
    fake.delete(lambda post: post["id"] == ids[2])
    assert isinstance(pub.read_post(ids[0], KEY), PostFound)
    gone = pub.read_post(ids[2], KEY)
    assert isinstance(gone, PostGone) and gone.status == 404 and "Unknown Message" in gone.detail
    counts = pub.read_counts(ids)
    assert sorted(counts) == sorted(ids[:2])
    assert (counts[ids[0]].likes, counts[ids[1]].likes) == (5, 0)
    assert counts[ids[0]].note is not None and "reaction" in counts[ids[0]].note


def test_prove_credentials_reads_the_bot_and_the_channel_without_posting(
    fake: FakeDiscord,
) -> None:
    assert "galley" in publisher(fake.api).prove_credentials()
    with pytest.raises(EffectNotSent, match="401") as wrong:
        publisher(fake.api, environ={"GALLEY_DISCORD_TOKEN": "nope"}).prove_credentials()
    with pytest.raises(EffectNotSent, match="Missing Access"):
        publisher(fake.api, channel=discord.HIDDEN_CHANNEL).prove_credentials()
    assert wrong.value.auth and fake.posts == [] and creates(fake) == 0


def test_the_bot_id_is_asked_once_per_publisher(fake: FakeDiscord) -> None:
    pub = publisher(fake.api)
    pub.lookup(query())
    pub.lookup(query())
    assert len(fake.requests_to("/users/@me")) == 1


def test_images_ride_in_the_message_as_attachments_with_their_alt_text(
    fake: FakeDiscord,
) -> None:
    images = tuple(
        ImageBytes(f"{n}" * 64, f"chart {n}.png", f"Sales, week {n}", "image/png", 8, 8, b"png" * n)
        for n in (1, 2)
    )
    sent = replace(publication(), images=tuple(ImageRef(i.sha256, i.name, i.alt) for i in images))
    with pytest.raises(EffectNotSent, match="images were not read"):
        publisher(fake.api).publish(sent)  # never posted without its images
    message_id = publisher(fake.api).publish(replace(sent, attachments=images))
    [message] = fake.messages()
    assert message["id"] == message_id and message["content"] == TEXT
    assert [(a["filename"], a["description"], a["size"]) for a in message["attachments"]] == [
        ("chart_1.png", "Sales, week 1", 3),
        ("chart_2.png", "Sales, week 2", 6),
    ]
    [request] = fake.requests_to(f"/channels/{CHANNEL_ID}/messages", "POST")
    payload = json.loads(request.body["payload_json"])
    assert payload["nonce"] == discord_nonce(KEY) and payload["allowed_mentions"]["parse"] == []
    assert request.body["files[1]"]["type"] == "image/png"
    assert publisher(fake.api).lookup(query()) == message_id


# --- without a server -----------------------------------------------------------------------


def test_the_nonce_is_25_characters_stable_per_key_and_differs_between_keys() -> None:
    nonce = discord_nonce(KEY)
    assert len(nonce) == 25 and nonce == discord_nonce(KEY) != discord_nonce(KEY + "#2")


def test_a_snowflake_from_a_time_sorts_every_message_made_since_after_it() -> None:
    at = datetime(2026, 11, 23, 9, 0, tzinfo=UTC)
    made_then = discord.snowflake(at.timestamp(), 1)  # the fake's id for a message at `at`
    assert int(snowflake_at(at)) <= int(made_then)
    assert int(snowflake_at(at + timedelta(milliseconds=1))) > int(made_then)
    assert snowflake_time(made_then) == at
