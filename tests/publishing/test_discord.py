"""The Discord publisher against the fake Discord API over real HTTP: a nonce per effect key
with `enforce_nonce`, a look-up that reads the bot's own messages in the channel since the
first send, faults classified, no ping ever made from model text, threads as replies,
reactions read back.

Each test checks what the publisher raised or returned and what the fake received.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta

import pytest

from core.errors import EffectNotSent, EffectOutcomeUnknown, LookupUnavailable, MissingSecret
from core.identity import discord_nonce
from core.ports import (
    PostQuery,
    Publication,
    Publisher,
    ThreadPlace,
)
from core.publishing.platforms.discord import DiscordPublisher
from core.publishing.platforms.discord_answers import snowflake_at
from core.setup.publish_targets import DiscordTarget
from tests.fakes import discord, social
from tests.fakes.discord import CHANNEL_ID, GUILD_ID, PERSON_ID, TOKEN, FakeDiscord
from tests.fakes.server import closed_port
from tests.harness.slow_marks import starts_a_server

TARGET = f"discord:{CHANNEL_ID}"
KEY = f"discord|weekly-update@2026-11-23T09:00|v1|publish:{TARGET}"
TEXT = "Our week, in brief.\n\nRead more: https://example.com/2026/11/23/our-week & enjoy."
ENV = {"GALLEY_DISCORD_TOKEN": TOKEN}


def publication(
    key: str = KEY, text: str = TEXT, reply_to: ThreadPlace | None = None
) -> Publication:
    now = datetime.now(UTC)
    return Publication(
        effect_key=key,
        draft_key=key.rsplit("|", 1)[0],
        recipe="weekly-update",
        platform="discord",
        slot_at=now,
        text=text,
        approver="U0EDITOR",
        approved_at=now,
        reply_to=reply_to,
    )


def query(key: str = KEY, text: str = TEXT, since: datetime | None = None) -> PostQuery:
    return PostQuery(key, text, since or datetime.now(UTC) - timedelta(minutes=1))


def publisher(
    api: str,
    *,
    seconds: float = 5.0,
    environ: dict[str, str] | None = None,
    channel: str = CHANNEL_ID,
) -> DiscordPublisher:
    target = DiscordTarget(to="discord", channel=channel, api=api)
    return DiscordPublisher(target, timedelta(seconds=seconds), ENV if environ is None else environ)


@pytest.fixture
@starts_a_server
def fake() -> Iterator[FakeDiscord]:
    with FakeDiscord() as server:
        yield server


def creates(fake: FakeDiscord) -> int:
    return len(fake.requests_to(f"/channels/{CHANNEL_ID}/messages", "POST"))


def test_publish_posts_once_under_a_nonce_that_pings_nobody(fake: FakeDiscord) -> None:
    pub: Publisher = publisher(fake.api)
    assert pub.target == TARGET
    message_id = pub.publish(publication())
    [message] = fake.messages()
    assert message["id"] == message_id and message["content"] == TEXT
    [sent] = fake.requests_to(f"/channels/{CHANNEL_ID}/messages", "POST")
    assert sent.headers["authorization"] == f"Bot {TOKEN}"
    assert sent.body["nonce"] == discord_nonce(KEY) and len(sent.body["nonce"]) <= 25
    assert sent.body["enforce_nonce"] is True
    assert sent.body["allowed_mentions"] == {"parse": [], "replied_user": False}
    assert (
        pub.link(message_id) == f"https://discord.com/channels/{GUILD_ID}/{CHANNEL_ID}/{message_id}"
    )


def test_a_resend_within_the_nonce_window_is_the_same_message(fake: FakeDiscord) -> None:
    pub = publisher(fake.api)
    first = pub.publish(publication())
    assert pub.publish(publication()) == first
    assert creates(fake) == 2 and len(fake.messages()) == 1


def test_after_the_nonce_window_a_resend_would_post_again_so_the_look_up_comes_first(
    fake: FakeDiscord,
) -> None:
    """Discord forgets a nonce after a few minutes: past it only the look-up stands
    between a lost answer and a second message."""
    fake.nonce_seconds = 0.0
    pub = publisher(fake.api)
    first = pub.publish(publication())
    assert pub.lookup(query()) == first
    assert pub.publish(publication()) != first and len(fake.messages()) == 2


def test_the_nonce_is_checked_before_the_insert_so_two_concurrent_sends_both_post(
    fake: FakeDiscord,
) -> None:
    """As far as Discord says, the nonce guards a resend, not a race: Galley's receipt
    keeps the second send from being made."""
    fake.script("create", social.slow(0.5), social.slow(0.5))
    pub = publisher(fake.api)
    threads = [threading.Thread(target=pub.publish, args=(publication(),)) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert len(fake.messages()) == 2


def test_lookup_reads_the_bots_messages_since_the_first_send_by_text(fake: FakeDiscord) -> None:
    pub = publisher(fake.api)
    since = datetime.now(UTC) - timedelta(minutes=1)
    assert pub.lookup(query(since=since)) is None
    message_id = pub.publish(publication())
    pub.publish(publication(KEY.replace("v1", "v2"), text="Another post."))
    assert pub.lookup(query(since=since)) == message_id
    assert pub.lookup(query(text="Never posted.", key=KEY + "x")) is None
    later = datetime.now(UTC) + timedelta(hours=1)
    assert pub.lookup(query(since=later)) is None  # made before the first send: not ours
    read = fake.requests_to(f"/channels/{CHANNEL_ID}/messages", "GET")[0]
    assert f"after={snowflake_at(since)}" in read.path and "limit=100" in read.path


def test_lookup_never_takes_a_persons_message_with_the_same_text(fake: FakeDiscord) -> None:
    fake.post_as(PERSON_ID, TEXT)
    pub = publisher(fake.api)
    assert pub.lookup(query()) is None
    message_id = pub.publish(publication())
    assert pub.lookup(query()) == message_id


def test_lookup_skips_a_message_already_proof_of_another_receipt(fake: FakeDiscord) -> None:
    """A recurring text: the newer message is another receipt's proof, the older one ours."""
    pub = publisher(fake.api)
    since = datetime.now(UTC) - timedelta(minutes=1)
    ours = pub.publish(publication(KEY + "-a"))
    theirs = pub.publish(publication(KEY + "-b"))
    skip = PostQuery(KEY + "-c", TEXT, since, taken={theirs}.__contains__)
    assert pub.lookup(skip) == ours
    none_left = PostQuery(KEY + "-c", TEXT, since, taken={ours, theirs}.__contains__)
    assert pub.lookup(none_left) is None


def test_lookup_pages_forward_through_the_channel(fake: FakeDiscord) -> None:
    pub = publisher(fake.api)
    since = datetime.now(UTC) - timedelta(minutes=1)
    for n in range(105):
        fake.post_as(PERSON_ID, f"Chatter {n}.")
    message_id = pub.publish(publication())
    assert pub.lookup(query(since=since)) == message_id
    assert len(fake.requests_to(f"/channels/{CHANNEL_ID}/messages", "GET")) == 2


@pytest.mark.parametrize(
    "action",
    [social.accept_then_drop(), social.accept_then_hang(10)],
    ids=["accept_then_drop", "accept_then_hang"],
)
def test_a_lost_answer_is_unknown_and_the_lookup_finds_the_one_message(
    fake: FakeDiscord, action: social.Action
) -> None:
    fake.script("create", action)
    pub = publisher(fake.api, seconds=1)
    with pytest.raises(EffectOutcomeUnknown):
        pub.publish(publication())
    [message] = fake.messages()
    assert pub.lookup(query()) == message["id"]


def test_a_lost_answer_while_reads_lag_is_absent_and_the_resend_is_the_same_message(
    fake: FakeDiscord,
) -> None:
    """Read before the message shows: absent. The resend under the same nonce, within
    its window, is answered with the message the lost answer made, not a second one."""
    fake.script("create", social.hold_then_drop())
    pub = publisher(fake.api, seconds=1)
    with pytest.raises(EffectOutcomeUnknown):
        pub.publish(publication())
    assert pub.lookup(query()) is None
    [message] = fake.messages()
    assert pub.publish(publication()) == message["id"]
    assert len(fake.messages()) == 1


@pytest.mark.parametrize("action", [social.drop(), social.hang_before(10)], ids=["drop", "hang"])
def test_no_answer_before_acting_is_unknown_and_the_lookup_says_absent(
    fake: FakeDiscord, action: social.Action
) -> None:
    fake.script("create", action)
    pub = publisher(fake.api, seconds=1)
    with pytest.raises(EffectOutcomeUnknown):
        pub.publish(publication())
    assert fake.posts == [] and pub.lookup(query()) is None


REFUSALS: dict[str, tuple[Callable[[], social.Action], bool, bool, float | None, str]] = {
    # id: (the fake's answer, permanent, auth, seconds to wait, Discord's words)
    "429": (lambda: discord.rate_limited(12.5), False, False, 13.0, "rate limited"),
    "429-global": (
        lambda: discord.rate_limited(3.2, is_global=True),
        False,
        False,
        4.0,
        "global retry",
    ),
    "401": (
        lambda: social.status(401, discord.error(0, "401: Unauthorized")),
        True,
        True,
        None,
        "401: Unauthorized",
    ),
    "403": (
        lambda: social.status(403, discord.error(50013, "Missing Permissions")),
        True,
        True,
        None,
        "Missing Permissions (code 50013)",
    ),
    "400": (
        lambda: social.status(
            400, discord.form_error("content", "BASE_TYPE_REQUIRED", "This field is required")
        ),
        True,
        False,
        None,
        "Invalid Form Body (code 50035): content: This field is required",
    ),
}


@pytest.mark.parametrize("case", REFUSALS)
def test_refusals_are_not_sent_and_classified(fake: FakeDiscord, case: str) -> None:
    answer, permanent, auth, wait, words = REFUSALS[case]
    fake.script("create", answer())
    started = time.monotonic()
    with pytest.raises(EffectNotSent) as caught:
        publisher(fake.api).publish(publication())
    assert time.monotonic() - started < 3  # a 429 is not slept on and re-sent
    error = caught.value
    assert (error.permanent, error.auth) == (permanent, auth)
    assert error.retry_after == wait
    assert words in str(error)
    if auth:
        assert "GALLEY_DISCORD_TOKEN" in str(error)
    assert creates(fake) == 1 and fake.posts == []


def test_a_wrong_token_and_a_hidden_channel_are_auth_failures(fake: FakeDiscord) -> None:
    with pytest.raises(EffectNotSent, match="401") as wrong:
        publisher(fake.api, environ={"GALLEY_DISCORD_TOKEN": "nope"}).publish(publication())
    with pytest.raises(EffectNotSent, match="Missing Access") as hidden:
        publisher(fake.api, channel=discord.HIDDEN_CHANNEL).publish(publication())
    assert wrong.value.auth and hidden.value.auth and fake.posts == []


@pytest.mark.parametrize("code", [500, 502, 503, 504])
def test_a_server_error_is_unknown(fake: FakeDiscord, code: int) -> None:
    fake.script("create", social.status(code))
    with pytest.raises(EffectOutcomeUnknown, match=str(code)):
        publisher(fake.api).publish(publication())


def test_an_unreachable_api_is_not_sent_and_retryable() -> None:
    pub = publisher(f"http://127.0.0.1:{closed_port()}/api/v10", seconds=2)
    with pytest.raises(EffectNotSent) as caught:
        pub.publish(publication())
    assert not caught.value.permanent
    with pytest.raises(LookupUnavailable):
        pub.lookup(query())


def test_lookup_failures_cannot_tell(fake: FakeDiscord) -> None:
    pub = publisher(fake.api, seconds=1)
    message_id = pub.publish(publication())
    fake.script("read", social.status(500), social.hang_before(10), discord.rate_limited(2))
    for said in ("500", "ReadTimeout", "429"):
        with pytest.raises(LookupUnavailable, match=said):
            pub.lookup(query())
    assert pub.lookup(query()) == message_id


def test_a_missing_token_names_the_variable_and_sends_nothing(fake: FakeDiscord) -> None:
    pub = publisher(fake.api, environ={})
    with pytest.raises(MissingSecret, match="GALLEY_DISCORD_TOKEN") as caught:
        pub.publish(publication())
    assert caught.value.auth and fake.requests == []
    with pytest.raises(LookupUnavailable, match="GALLEY_DISCORD_TOKEN"):
        pub.lookup(query())


# --- the text ------------------------------------------------------------------------------


def test_model_text_never_pings_anyone(fake: FakeDiscord) -> None:
    """`@everyone`, `@here`, a user and a role, as model text may carry them: shown as
    written, and Discord notifies nobody (without allowed_mentions it would ping all)."""
    text = f"Hello @everyone and @here, thanks <@{PERSON_ID}> and <@&1400000000000000001>!"
    message_id = publisher(fake.api).publish(publication(text=text))
    [message] = fake.messages()
    assert message["content"] == text and message["notified"] == []
    assert publisher(fake.api).lookup(query(text=text)) == message_id
    fake.post_as(PERSON_ID, text)  # the same words without allowed_mentions: the fake pings
    assert len(fake.messages(PERSON_ID)[0]["notified"]) == 4


def test_a_draft_over_2000_characters_is_refused_before_it_is_sent(fake: FakeDiscord) -> None:
    pub = publisher(fake.api)
    assert pub.fit("x" * 2000).fits and not pub.fit("x" * 2001).fits
    assert pub.fit("😀" * 1000).count == 2000  # counted cautiously: UTF-16 units
    with pytest.raises(EffectNotSent, match="2,000 characters") as caught:
        pub.publish(publication(text="x" * 2001))
    assert caught.value.permanent and creates(fake) == 0


def test_the_fake_refuses_content_over_the_limit_as_discord_does(fake: FakeDiscord) -> None:
    import httpx

    answer = httpx.post(
        f"{fake.api}/channels/{CHANNEL_ID}/messages",
        json={"content": "x" * 2001},
        headers={"Authorization": f"Bot {TOKEN}"},
    )
    assert answer.status_code == 400
    assert answer.json()["code"] == 50035
    [error] = answer.json()["errors"]["content"]["_errors"]
    assert error["code"] == "BASE_TYPE_MAX_LENGTH"
