"""The Telegram publisher against the fake Bot API over real HTTP (`httpx`): plain text sent
once, measured in UTF-16 units, no mention made from model text, no look-up (a lost
answer cannot be told), faults classified, and the bot token (in the URL's path) never in
an error, a log line or a receipt.

Each test checks what the publisher raised or returned and what the fake received.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from core.errors import EffectNotSent, EffectOutcomeUnknown, LookupUnavailable, MissingSecret
from core.ports import PostQuery, Publication, Publisher, ThreadPlace
from core.publishing.platforms.telegram import TEXT_LIMIT, UNREADABLE, TelegramPublisher
from core.setup.publish_targets import TelegramTarget
from tests.fakes import social
from tests.fakes.server import closed_port
from tests.fakes.telegram import (
    CHANNEL,
    CHANNEL_ID,
    ELSEWHERE,
    PRIVATE_ID,
    TOKEN,
    FakeTelegram,
    flood_wait,
    server_error,
)
from tests.harness.slow_marks import starts_a_server

KEY = f"telegram|weekly-update@2026-11-23T09:00|v1|publish:telegram:{CHANNEL}"
TEXT = "Our week, in brief.\n\nRead more: https://example.com/week"
ENV = {"GALLEY_TELEGRAM_TOKEN": TOKEN}


def publication(text: str = TEXT, reply_to: ThreadPlace | None = None) -> Publication:
    now = datetime(2026, 11, 23, 9, 5, tzinfo=UTC)
    return Publication(
        effect_key=KEY,
        draft_key=KEY.rsplit("|", 1)[0],
        recipe="weekly-update",
        platform="telegram",
        slot_at=now,
        text=text,
        approver="U0EDITOR",
        approved_at=now,
        reply_to=reply_to,
    )


def publisher(
    api: str, *, chat: str = CHANNEL, seconds: float = 5.0, environ: dict[str, str] | None = None
) -> TelegramPublisher:
    target = TelegramTarget(to="telegram", chat=chat, api=api)
    secrets = ENV if environ is None else environ
    return TelegramPublisher(target, timedelta(seconds=seconds), secrets)


@pytest.fixture
@starts_a_server
def fake() -> Iterator[FakeTelegram]:
    with FakeTelegram() as server:
        yield server


def sends(fake: FakeTelegram) -> int:
    return len(fake.requests_to("/sendMessage", "POST"))


def test_a_message_is_sent_once_as_plain_text_and_linked_by_the_channel_username(
    fake: FakeTelegram,
) -> None:
    pub: Publisher = publisher(fake.url)
    assert pub.target == f"telegram:{CHANNEL}"
    message_id = pub.publish(publication())
    [post] = fake.posts_of(str(CHANNEL_ID))
    assert message_id == str(post["message_id"]) and post["text"] == TEXT
    [sent] = fake.requests_to("/sendMessage", "POST")
    assert sent.body == {"chat_id": CHANNEL, "text": TEXT}  # no parse_mode, no entities
    assert pub.link(message_id) == f"https://t.me/galleynews/{message_id}"
    assert not fake.requests_to("/getChat")  # an @channel names its own public link


def test_a_chat_id_learns_its_public_username_once_and_a_private_chat_has_no_link(
    fake: FakeTelegram,
) -> None:
    public = publisher(fake.url, chat=str(CHANNEL_ID))
    first, second = public.publish(publication()), public.publish(publication("Again."))
    assert public.link(second) == f"https://t.me/galleynews/{second}" != public.link(first)
    assert len(fake.requests_to("/getChat")) == 1
    private = publisher(fake.url, chat=str(PRIVATE_ID))
    assert private.link(private.publish(publication())) is None
    assert len(fake.posts_of(str(PRIVATE_ID))) == 1


def test_model_text_never_becomes_a_mention(fake: FakeTelegram) -> None:
    """Telegram links `@username` in plain text as a mention (in a group, it notifies that
    member): a word joiner after the `@` keeps it inert; an e-mail address is left alone."""
    text = "Thanks @alice_smith and (@bob_jones)! Write to team@example.com"
    publisher(fake.url).publish(publication(text))
    [post] = fake.posts_of(str(CHANNEL_ID))
    assert post["mentions"] == []
    assert post["text"].replace("\u2060", "") == text and "team@example.com" in post["text"]


def test_text_is_counted_in_utf16_units_and_a_longer_one_is_refused_before_sending(
    fake: FakeTelegram,
) -> None:
    pub = publisher(fake.url)
    emoji = "\U0001f680" * 2049  # 2,049 characters, 4,098 UTF-16 units
    fit = pub.fit(emoji)
    assert (fit.count, fit.limit) == (4098, TEXT_LIMIT)
    with pytest.raises(EffectNotSent, match="4,098") as refused:
        pub.publish(publication(emoji))
    assert refused.value.permanent and sends(fake) == 0
    assert pub.fit("@ana " + "x" * 4091).count == 4097  # the word joiner counts too
    pub.publish(publication("x" * TEXT_LIMIT))
    assert len(fake.posts_of(str(CHANNEL_ID))) == 1


def test_a_later_part_replies_to_the_first_message(fake: FakeTelegram) -> None:
    pub = publisher(fake.url)
    first = pub.publish(publication("1/2 The first part."))
    second = pub.publish(publication("2/2 The second.", ThreadPlace(parent=first, root=first)))
    posts = {str(p["message_id"]): p for p in fake.posts_of(str(CHANNEL_ID))}
    assert posts[second]["reply_to_message"]["message_id"] == int(first)
    with pytest.raises(EffectNotSent, match="message to be replied not found") as refused:
        pub.publish(publication("3/3 Lost.", ThreadPlace(parent="999", root="999")))
    assert refused.value.permanent


@pytest.mark.parametrize(
    "action",
    [social.accept_then_drop(), social.accept_then_hang(10), server_error(500)],
    ids=["accept_then_drop", "accept_then_hang", "500"],
)
def test_an_unknown_answer_is_uncertain_and_no_look_up_can_tell(
    fake: FakeTelegram, action: social.Action
) -> None:
    fake.script("create", action)
    pub = publisher(fake.url, seconds=1)
    with pytest.raises(EffectOutcomeUnknown):
        pub.publish(publication())
    query = PostQuery(KEY, TEXT, datetime(2026, 11, 23, 9, 0, tzinfo=UTC))
    with pytest.raises(LookupUnavailable) as caught:
        pub.lookup(query)
    assert str(caught.value) == UNREADABLE and "a person must check" in UNREADABLE
    assert sends(fake) == 1 and len(fake.requests) == 1  # nothing was read: nothing can be


def test_a_flood_wait_is_not_sent_and_names_its_wait(fake: FakeTelegram) -> None:
    fake.script("create", flood_wait(7))
    with pytest.raises(EffectNotSent, match="retry after 7") as refused:
        publisher(fake.url).publish(publication())
    assert refused.value.retry_after == 7.0
    assert not refused.value.permanent and not refused.value.auth
    assert fake.posts == []


@pytest.mark.parametrize(
    ("chat", "token", "said"),
    [
        (CHANNEL, "123:wrong", "401: Unauthorized"),
        (ELSEWHERE, TOKEN, "403: Forbidden: bot is not a member of the channel chat"),
    ],
    ids=["401", "403"],
)
def test_a_refused_token_or_a_chat_the_bot_is_not_in_stops_as_auth(
    fake: FakeTelegram, chat: str, token: str, said: str
) -> None:
    pub = publisher(fake.url, chat=chat, environ={"GALLEY_TELEGRAM_TOKEN": token})
    with pytest.raises(EffectNotSent, match=said) as refused:
        pub.publish(publication())
    assert refused.value.auth and "GALLEY_TELEGRAM_TOKEN" in str(refused.value)
    assert fake.posts == []


def test_a_bad_request_fails_with_telegrams_description(fake: FakeTelegram) -> None:
    with pytest.raises(EffectNotSent, match="400: Bad Request: chat not found") as refused:
        publisher(fake.url, chat="@nosuchchannel").publish(publication())
    assert refused.value.permanent and not refused.value.auth


def test_unreachable_is_not_sent_and_a_missing_token_names_its_variable(
    fake: FakeTelegram,
) -> None:
    with pytest.raises(EffectNotSent, match="unreachable") as refused:
        publisher(f"http://127.0.0.1:{closed_port()}").publish(publication())
    assert not refused.value.permanent
    with pytest.raises(MissingSecret, match="GALLEY_TELEGRAM_TOKEN"):
        publisher(fake.url, environ={}).publish(publication())


@pytest.mark.parametrize(
    "fault",
    ["drop", "hang", "500", "401", "refused", "invalid_url"],
)
def test_the_token_in_the_path_never_reaches_an_error_or_a_log_line(
    fake: FakeTelegram, fault: str, caplog: pytest.LogCaptureFixture
) -> None:
    """httpx names the URL in its exceptions and its request log lines, and the Bot API's
    URL holds the token: neither the error Galley raises (nor anything chained to it) nor
    any log line at debug level carries it."""
    caplog.set_level(logging.DEBUG)
    publisher(fake.url).publish(publication("Sent once, to see httpx's request line."))
    api, environ = fake.url, ENV
    match fault:
        case "drop":
            fake.script("create", social.accept_then_drop())
        case "hang":
            fake.script("create", social.hang_before(10))
        case "500":
            fake.script("create", social.status(500, f"<html>/bot{TOKEN}/sendMessage</html>"))
        case "401":
            environ = {"GALLEY_TELEGRAM_TOKEN": TOKEN + "x"}
        case "refused":
            api = f"http://127.0.0.1:{closed_port()}"
        case "invalid_url":
            environ = {"GALLEY_TELEGRAM_TOKEN": "12:ab\ncd"}
    with pytest.raises((EffectNotSent, EffectOutcomeUnknown)) as caught:
        publisher(api, seconds=1, environ=environ).publish(publication())
    said = [str(caught.value), repr(caught.value)]
    error = caught.value  # nothing chained to it that a traceback would print
    assert error.__cause__ is None and (error.__context__ is None or error.__suppress_context__)
    for secret in {TOKEN, environ["GALLEY_TELEGRAM_TOKEN"]}:
        assert all(secret not in s for s in said), said
        assert all(secret not in r.getMessage() for r in caplog.records)
    assert any("/bot<token>/sendMessage" in r.getMessage() for r in caplog.records)


def test_galley_check_online_asks_get_me_and_get_chat_and_posts_nothing(
    fake: FakeTelegram,
) -> None:
    said = publisher(fake.url, chat=str(CHANNEL_ID)).prove_credentials()
    assert said == f"token is the bot @galley_bot; {CHANNEL_ID} is @galleynews"
    private = publisher(fake.url, chat=str(PRIVATE_ID)).prove_credentials()
    assert "a private chat (no public links)" in private
    with pytest.raises(EffectNotSent, match="not a member") as refused:
        publisher(fake.url, chat=ELSEWHERE).prove_credentials()
    assert refused.value.auth
    assert fake.posts == [] and sends(fake) == 0
