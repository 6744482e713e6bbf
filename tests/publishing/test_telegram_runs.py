"""A recipe publishing to Telegram (docs/design.md §24), in process over the fake Bot API:
one message per run with its t.me link on the receipt; a lost answer or a 5xx left
`uncertain` with people told at once why (no look-up can tell) and never sent again by a
pass; a flood wait honoured; a refused token failed and alerted; a thread as replies to its
first message; images refused at review; the target refused without its secret; its posts
said to be unreadable for engagement. Counted: messages on the fake, rows. Both backends.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from pydantic import ValidationError
from sqlmodel import select
from typer.testing import CliRunner

from bot.cli import app
from bot.review_facts import fit_line
from core.failpoints import Failpoint, hook
from core.identity import publish_effect_key, publish_part_key
from core.images.limits import ImageFacts
from core.images.review_fit import image_problems
from core.models import EventRow, PostCheckRow
from core.policies import FailReason, PostCheck, PublishOutcome, Refusal
from core.post_body import ImageRef
from core.publishing.readings import PostReadings
from core.review.facts import annotate
from core.review.queue import edit, load_item
from core.setup.config import parse_config
from core.setup.publish_targets import TelegramTarget
from core.states import EffectState, RunState
from core.store.effects import EffectLedger
from core.store.receipt_rows import NEVER_SENT
from tests.conftest import config_text
from tests.fakes import social
from tests.fakes.anthropic_api import FakeAnthropic
from tests.fakes.slack_api import FakeSlack
from tests.fakes.telegram import CHANNEL, CHANNEL_ID, TOKEN, FakeTelegram, flood_wait, server_error
from tests.harness.slow_marks import starts_a_server
from tests.harness.threads import PARTS, approved_thread
from tests.harness.worlds import KEY, RUN, MakeWorld, World, galley_config

TARGET = f"telegram:{CHANNEL}"
EFFECT = publish_effect_key(KEY, TARGET)


@pytest.fixture
@starts_a_server
def fake() -> Iterator[FakeTelegram]:
    with FakeTelegram() as server:
        yield server


def publish_line(fake: FakeTelegram) -> str:
    return f'publish = {{ to = "telegram", chat = "{CHANNEL}", api = "{fake.url}" }}'


@pytest.fixture
def world(db_url: str, worlds: MakeWorld, fake: FakeTelegram) -> World:
    made = worlds(
        db_url,
        publish=publish_line(fake),
        environ={"GALLEY_TELEGRAM_TOKEN": TOKEN},
    )
    return made


def messages(fake: FakeTelegram) -> list[dict[str, object]]:
    return fake.posts_of(str(CHANNEL_ID))


def sends(fake: FakeTelegram) -> int:
    return len(fake.requests_to("/sendMessage", "POST"))


def passes(world: World, times: int = 3) -> None:
    """What the bot's passes do meanwhile: publish what is due, sweep the alerts."""
    for _ in range(times):
        world.service().publish_pending()
        world.alerts().sweep()
        world.clock.advance(timedelta(minutes=5))


def test_a_run_sends_one_message_and_its_receipt_holds_the_t_me_link(
    world: World, fake: FakeTelegram
) -> None:
    world.approved()
    assert world.service().publish_run(RUN).outcome == PublishOutcome.PUBLISHED
    [message] = messages(fake)
    receipt = world.effect(EFFECT)
    assert receipt is not None and receipt.state == EffectState.SUCCEEDED
    assert receipt.external_id == str(message["message_id"])
    url = json.loads(receipt.result or "{}")["url"]
    assert url == f"https://t.me/galleynews/{message['message_id']}"
    assert TOKEN not in json.dumps([receipt.result, receipt.detail])
    passes(world)
    assert sends(fake) == 1 and world.run_row().state == RunState.SUCCEEDED


@pytest.mark.parametrize(
    "action",
    [social.accept_then_drop(), server_error(502)],
    ids=["answer_lost", "502"],
)
def test_an_unknown_answer_is_uncertain_people_are_told_why_and_nothing_is_resent(
    world: World, fake: FakeTelegram, action: social.Action
) -> None:
    world.approved()
    fake.script("create", action)
    assert world.service().publish_run(RUN).outcome == PublishOutcome.UNCERTAIN
    passes(world)
    assert world.run_row().state == RunState.UNCERTAIN
    receipt = world.effect(EFFECT)
    assert receipt is not None and receipt.state == EffectState.UNCERTAIN
    [alert] = world.alert_messages()
    said = json.dumps(alert)
    assert RUN in said and "cannot read a chat's messages back" in said
    assert "Mark published" in said and TOKEN not in said
    assert sends(fake) == 1  # no pass sent it again: only a person decides
    assert len(messages(fake)) == (1 if action.kind == "accept_then_drop" else 0)


class Crash(Exception):
    """The process dying at a failpoint, in process: nothing after it runs."""


def crash() -> None:
    raise Crash


def reasons(world: World) -> list[str | None]:
    with world.store.read() as session:
        rows = session.exec(select(EventRow).where(EventRow.subject_id == EFFECT)).all()
        return [row.reason for row in rows]


def test_a_holder_killed_just_before_the_send_provably_sent_nothing_and_it_is_sent_again(
    world: World, fake: FakeTelegram
) -> None:
    """No look-up can tell, so the receipt does: it is marked as the call leaves. Killed
    before that mark, the holder is taken over, the receipt says it was not sent, and the
    message goes out once, with nobody paged."""
    world.approved()
    with hook(Failpoint.BEFORE_PUBLISH_CALL, crash), pytest.raises(Crash):
        world.service().publish_run(RUN)
    assert sends(fake) == 0
    world.clock.advance(timedelta(minutes=5))  # its lease and one call's limit ran out
    assert world.service("w2").publish_run(RUN).outcome == PublishOutcome.PUBLISHED
    assert len(messages(fake)) == 1 and NEVER_SENT in reasons(world)
    passes(world)
    assert world.alert_messages() == [] and sends(fake) == 1


def test_a_holder_taken_over_before_its_mark_never_sends_and_the_message_goes_once(
    world: World, fake: FakeTelegram
) -> None:
    """A holder paused past its lease just before the call (a GC pause, a stalled host):
    another worker takes over, proves from the unmarked receipt that nothing left, and
    sends. The first holder's mark then matches no row, so it sends nothing."""
    world.approved()
    slow_beat = EffectLedger(world.store, world.clock, "w1", heartbeat=timedelta(hours=1))
    paused = []

    def taken_over_meanwhile() -> None:
        if paused:
            return  # the second worker's own call
        paused.append(True)
        world.clock.advance(timedelta(minutes=5))
        assert world.service("w2").publish_run(RUN).outcome == PublishOutcome.PUBLISHED

    with hook(Failpoint.BEFORE_PUBLISH_CALL, taken_over_meanwhile):
        first = world.service("w1", ledger=slow_beat).publish_run(RUN)
    assert first.outcome == PublishOutcome.IN_PROGRESS  # its lease was lost: it sent nothing
    assert world.run_row().state == RunState.SUCCEEDED
    assert sends(fake) == 1 and len(messages(fake)) == 1
    assert NEVER_SENT in reasons(world)


def test_a_holder_killed_after_telegram_accepted_is_uncertain_and_never_sent_again(
    world: World, fake: FakeTelegram
) -> None:
    world.approved()
    with hook(Failpoint.AFTER_PUBLISH_CALL, crash), pytest.raises(Crash):
        world.service().publish_run(RUN)
    world.clock.advance(timedelta(minutes=5))
    assert world.service("w2").publish_run(RUN).outcome == PublishOutcome.UNCERTAIN
    passes(world)
    assert world.run_row().state == RunState.UNCERTAIN and NEVER_SENT not in reasons(world)
    [alert] = world.alert_messages()
    assert RUN in json.dumps(alert) and "cannot tell" in json.dumps(alert)
    assert sends(fake) == 1 and len(messages(fake)) == 1


def test_a_flood_wait_is_honoured_and_the_message_sent_once_after_it(
    world: World, fake: FakeTelegram
) -> None:
    world.approved()
    fake.script("create", flood_wait(40))
    assert world.service().publish_run(RUN).outcome == PublishOutcome.WAITING
    world.clock.advance(timedelta(seconds=30))
    assert world.service().publish_run(RUN).outcome == PublishOutcome.WAITING
    assert sends(fake) == 1  # not asked again within the wait
    world.clock.advance(timedelta(seconds=11))
    assert world.service().publish_run(RUN).outcome == PublishOutcome.PUBLISHED
    assert sends(fake) == 2 and len(messages(fake)) == 1


def test_a_refused_token_fails_the_run_and_alerts(
    db_url: str, worlds: MakeWorld, fake: FakeTelegram
) -> None:
    world = worlds(
        db_url, publish=publish_line(fake), environ={"GALLEY_TELEGRAM_TOKEN": "1:revoked"}
    )
    world.approved()
    assert world.service().publish_run(RUN).outcome == PublishOutcome.FAILED
    run = world.run_row()
    assert (run.state, run.reason) == (RunState.FAILED, FailReason.PUBLISH_AUTH)
    world.alerts().sweep()
    [alert] = world.alert_messages()
    assert "401: Unauthorized" in json.dumps(alert) and "1:revoked" not in json.dumps(alert)
    assert messages(fake) == []


def test_a_thread_is_one_message_then_replies_to_it_each_under_its_own_key(
    world: World, fake: FakeTelegram
) -> None:
    approved_thread(world)
    assert world.service().publish_run(RUN).outcome == PublishOutcome.PUBLISHED
    first, *replies = sorted(messages(fake), key=lambda m: int(str(m["message_id"])))
    assert [m["text"] for m in [first, *replies]] == list(PARTS)
    assert "reply_to_message" not in first
    assert all(m["reply_to_message"]["message_id"] == first["message_id"] for m in replies)  # type: ignore[index]
    keys = {publish_part_key(KEY, TARGET, n) for n in (1, 2, 3, 4)}
    receipts = {r.key: r for r in world.publish_effects()}
    assert set(receipts) == keys
    assert all(r.state == EffectState.SUCCEEDED for r in receipts.values())


def test_a_thread_whose_third_part_was_refused_for_now_resumes_at_that_part(
    world: World, fake: FakeTelegram
) -> None:
    approved_thread(world)
    fake.script("create", social.accept(), social.accept(), flood_wait(3))
    assert world.service().publish_run(RUN).outcome == PublishOutcome.WAITING
    world.clock.advance(timedelta(seconds=4))
    assert world.service("w2").publish_run(RUN).outcome == PublishOutcome.PUBLISHED
    assert [m["text"] for m in messages(fake)] == list(PARTS) and sends(fake) == 5


def test_a_draft_over_4096_utf16_units_shows_its_count_and_cannot_be_approved(
    world: World, fake: FakeTelegram
) -> None:
    key = world.draft()
    long = "Launch day \U0001f680 " * 300  # 3,900 characters, 4,200 UTF-16 units
    changed = edit(
        world.store,
        world.config,
        world.clock,
        draft_key=key,
        revision=1,
        text=long,
        user="U0EDITOR",
        permitted=True,
    )
    assert changed.accepted
    item = load_item(world.store, key)
    assert item is not None
    measured = annotate(world.store, world.config, world.clock.now(), item, world.core.fits)
    assert [(f.label, f.count, f.limit) for f in measured.fits] == [("Telegram", 4200, 4096)]
    assert fit_line(measured.fits) == "Telegram 4200/4096 ✗"  # the review message's line
    refused = world.galley.approve(key, 2, user="U0EDITOR")
    assert not refused.accepted and refused.refusal == Refusal.DOES_NOT_FIT
    assert "Telegram" in refused.message and sends(fake) == 0


@pytest.mark.parametrize(
    ("chat", "target"),
    [("@galleynews", "telegram:@galleynews"), (-1001234567890, "telegram:-1001234567890")],
)
def test_a_chat_is_a_channel_username_or_an_id_even_written_as_a_number(
    chat: object, target: str
) -> None:
    assert TelegramTarget.model_validate({"to": "telegram", "chat": chat}).target == target
    other = {"to": "telegram", "chat": chat, "secret_env": "TEAM_BOT"}
    assert TelegramTarget.model_validate(other).target == f"{target}+TEAM_BOT"


@pytest.mark.parametrize(
    "bad",
    [
        {"chat": "galleynews"},
        {"chat": "@a|b"},
        {"chat": "@x"},
        {"chat": "@ok_name", "api": "ftp://x"},
    ],
)
def test_a_bad_chat_or_api_is_refused_by_the_config(bad: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        TelegramTarget.model_validate({"to": "telegram", **bad})


def test_an_image_is_refused_at_review_saying_telegram_has_no_alt_text() -> None:
    image = ImageRef("a" * 64, "chart.png", alt="Sales by week")
    facts = {"a" * 64: ImageFacts("image/png", 800, 600, 90_000)}
    assert image_problems([image], [TARGET], facts) == [
        "Telegram takes no images: its Bot API has no alt text for a photo. "
        "Remove them before approving, or publish the image elsewhere."
    ]


def test_galley_check_refuses_the_target_without_its_token() -> None:
    line = 'publish = { to = "telegram", chat = "@galleynews" }'
    config = parse_config(galley_config(line))
    [missing] = config.missing_secrets({})
    assert "GALLEY_TELEGRAM_TOKEN" in missing and TARGET in missing
    assert config.missing_secrets({"GALLEY_TELEGRAM_TOKEN": TOKEN}) == []


def test_its_posts_are_said_to_be_unreadable_not_counted(world: World, fake: FakeTelegram) -> None:
    world.approved()
    assert world.service().publish_run(RUN).outcome == PublishOutcome.PUBLISHED
    readings = PostReadings(
        world.store,
        world.config,
        world.clock,
        "w1",
        world.publishers.publishers_for,
        world.alerts().alert_post_gone,
    )
    assert readings.read_due().taken_up == 1
    world.clock.advance(timedelta(minutes=3))  # past verify_after
    assert readings.read_due().unreadable == 1
    with world.store.read() as session:
        [row] = session.exec(select(PostCheckRow)).all()
    assert row.state == PostCheck.UNREADABLE and row.due_at is None
    assert len(fake.requests) == 1  # the send; nothing was asked after it


def test_galley_check_refuses_a_missing_token_and_online_proves_it_without_posting(
    tmp_path: Path, fake: FakeTelegram, fake_anthropic: FakeAnthropic
) -> None:
    recipe = f"""
[[recipes]]
name = "announce"
platform = "telegram"
schedule = "0 9 * * mon"
prompt = "Write."
publish = {{ to = "telegram", chat = "{CHANNEL}", api = "{fake.url}" }}
"""
    config = tmp_path / "galley.toml"
    config.write_text(config_text() + recipe)
    with FakeSlack() as slack:
        env: dict[str, str | None] = {
            "GALLEY_CONFIG": str(config),
            "GALLEY_DATABASE_URL": f"sqlite:///{tmp_path / 'g.db'}",
            "SLACK_BOT_TOKEN": "xoxb-test",
            "GALLEY_SLACK_API_URL": slack.url + "/api/",
            "ANTHROPIC_API_KEY": "sk-ant-test",
            "ANTHROPIC_BASE_URL": fake_anthropic.url,
            "GALLEY_TELEGRAM_TOKEN": None,
        }
        cli = CliRunner()
        assert cli.invoke(app, ["db", "upgrade"], env=env).exit_code == 0
        missing = cli.invoke(app, ["check"], env=env)
        assert missing.exit_code == 2 and "GALLEY_TELEGRAM_TOKEN" in missing.output
        wrong = cli.invoke(app, ["check", "--online"], env=env | {"GALLEY_TELEGRAM_TOKEN": "9:no"})
        proved = cli.invoke(app, ["check", "--online"], env=env | {"GALLEY_TELEGRAM_TOKEN": TOKEN})
    assert wrong.exit_code == 2 and "9:no" not in wrong.output
    [failed] = [line for line in wrong.output.splitlines() if ": FAILED: " in line]
    assert failed.startswith(f"{TARGET}: FAILED: ") and "401: Unauthorized" in failed
    assert proved.exit_code == 0, proved.output
    assert f"{TARGET}: ok: token is the bot @galley_bot; {CHANNEL} is @galleynews" in proved.output
    assert len(fake.requests_to("/getMe")) == 2 and sends(fake) == 0 and fake.posts == []
