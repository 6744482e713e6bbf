"""The Slack review loop end to end: a real `Bot` (Bolt, uvicorn, outbox, scheduler)
against the fake Slack Web API and the fake Anthropic API, over real HTTP.

Slack's requests reach `/slack/events` signed with a real signing secret. Each test
drives outbox passes itself (`bot.sync_slack()`) and checks final state: database rows
and the calls the fake Slack received, never log lines.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
import sqlalchemy as sa
from sqlmodel import col, select

from bot.blocks import button_value, parse_button_value
from bot.run import Bot
from core.models import DraftRow, EffectRow, EventRow, RecipeRow, RunRow
from core.policies import DraftOutcome, SkipReason
from core.review import edit, expire_overdue_drafts
from core.states import DraftState, EffectState, RunState
from core.store import Store
from tests import bots
from tests.conftest import config_text
from tests.fakes.anthropic_api import FakeAnthropic, ok, status
from tests.fakes.slack_api import (
    RESPONSE_URL,
    FakeSlack,
    RecordedCall,
    accept_then_hang,
    drop,
    error,
    rate_limited,
)
from tests.slack_requests import (
    SlackSender,
    block_actions,
    slash_command,
    text_input,
    view_submission,
)

SECRET = "8f742231b10e8888abcd99yyyzzz85a5-galley-test"
CHANNEL = "C0REVIEW"
RECIPE = "weekly-update"
SLOT = "2026-11-23T09:00"  # the latest due Monday at bots.BOT_EPOCH
RUN = f"{RECIPE}@{SLOT}"
KEY = f"linkedin|{RUN}|v1"
APPROVE, REJECT, EDIT = "galley_approve", "galley_reject", "galley_edit"
PEOPLE = 'approvers = ["U0EDITOR", "U0EDITOR2", "S0EDITORS"]\nadmins = ["U0ADMIN"]'
SETTLE = 0.3  # time for a listener that should do nothing to have done something
T = TypeVar("T")


def eventually(probe: Callable[[], T], what: str, timeout: float = 5.0) -> T:
    """Poll until `probe()` is truthy (Bolt acks first and runs listeners after)."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.02)


def actions_of(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [b for b in blocks if b.get("type") == "actions"]


def button(blocks: list[dict[str, Any]], action_id: str) -> str:
    [actions] = actions_of(blocks)
    [value] = [e["value"] for e in actions["elements"] if e["action_id"] == action_id]
    return str(value)


@dataclass
class Harness:
    bot: Bot
    slack: FakeSlack
    anthropic: FakeAnthropic
    store: Store
    sender: SlackSender

    # --- acting ---

    def draft(self, slot: str = SLOT) -> str:
        result = self.bot.galley.draft(RECIPE, slot)
        assert result.outcome == DraftOutcome.DRAFTED, result
        assert result.key is not None
        return result.key

    def draft_and_post(self, slot: str = SLOT) -> tuple[str, dict[str, Any]]:
        key = self.draft(slot)
        self.bot.sync_slack()
        return key, self.message_for(key)

    def click(
        self,
        action_id: str,
        user: str,
        key: str = KEY,
        *,
        value: str | None = None,
        **signing: Any,
    ) -> httpx.Response:
        """A signed click on the review message's button, as it currently reads."""
        message = self.message_for(key)
        payload = block_actions(
            user=user,
            action_id=action_id,
            value=value if value is not None else button(message["blocks"], action_id),
            message_ts=message["ts"],
            response_url=self.slack.response_url(user),
            message=message,
        )
        return self.sender.interactive(payload, **signing)

    def command(self, text: str, user: str, **signing: Any) -> httpx.Response:
        body = slash_command(text=text, user=user, response_url=self.slack.response_url(user))
        return self.sender.send(body, **signing)

    def ask(self, text: str, user: str) -> str:
        """`/galley <text>` from `user`; the reply it gets through response_url."""
        before = len(self.replies(user))
        assert self.command(text, user).status_code == 200
        replies = eventually(lambda: self.replies(user)[before:], f"the reply to {text!r}")
        [reply] = replies
        return reply

    # --- looking ---

    def review_messages(self) -> list[dict[str, Any]]:
        return [
            m
            for m in self.slack.messages(CHANNEL)
            if (m.get("metadata") or {}).get("event_type") == "galley_draft"
        ]

    def message_for(self, key: str) -> dict[str, Any]:
        [message] = [
            m for m in self.review_messages() if m["metadata"]["event_payload"]["draft_key"] == key
        ]
        return message

    def calls(self, method: str) -> list[RecordedCall]:
        return self.slack.calls(method)

    def replies(self, user: str | None = None) -> list[str]:
        """Texts sent through response_url (respond()), optionally to one user's click."""
        return [
            str(c.params.get("text"))
            for c in self.slack.calls(RESPONSE_URL)
            if user is None or c.path == f"/response/{user}"
        ]

    def ephemerals(self, user: str) -> list[str]:
        return [
            str(c.params.get("text"))
            for c in self.slack.calls("chat.postEphemeral")
            if c.params.get("user") == user
        ]

    def draft_row(self, key: str = KEY) -> DraftRow:
        with self.store.transaction() as session:
            return session.exec(select(DraftRow).where(col(DraftRow.key) == key)).one()

    def run_row(self, run: str = RUN) -> RunRow | None:
        with self.store.transaction() as session:
            return session.exec(select(RunRow).where(col(RunRow.id) == run)).one_or_none()

    def receipt(self, key: str = KEY) -> EffectRow | None:
        with self.store.transaction() as session:
            return session.exec(
                select(EffectRow).where(col(EffectRow.key) == f"{key}|review")
            ).one_or_none()

    def recipe_row(self) -> RecipeRow:
        with self.store.transaction() as session:
            return session.exec(select(RecipeRow).where(col(RecipeRow.name) == RECIPE)).one()

    def draft_events(self, to_state: str, key: str = KEY) -> list[EventRow]:
        with self.store.transaction() as session:
            return list(
                session.exec(
                    select(EventRow).where(
                        col(EventRow.subject) == "draft",
                        col(EventRow.subject_id) == key,
                        col(EventRow.to_state) == to_state,
                    )
                ).all()
            )


StartBot = Callable[..., Harness]


@pytest.fixture
def start_bot(tmp_path: Path, fake_anthropic: FakeAnthropic) -> Iterator[StartBot]:
    """Start a Bot on `db_url` with the fakes; `slack=` and `defaults=` add config lines."""
    started: list[Harness] = []

    def start(db_url: str, *, slack: str = "", defaults: str = "", **overrides: Any) -> Harness:
        text = config_text(**overrides)
        text = text.replace(
            f'review_channel = "{CHANNEL}"', f'review_channel = "{CHANNEL}"\n{slack}'
        )
        text = text.replace("[defaults]\n", f"[defaults]\n{defaults}\n")
        path = tmp_path / f"galley-{len(started)}.toml"
        path.write_text(text)
        fake_slack = FakeSlack().start()
        try:
            bot = bots.start_bot(
                config=path,
                db_url=db_url,
                anthropic_url=fake_anthropic.url,
                slack_url=fake_slack.url,
                secret=SECRET,
            )
        except BaseException:
            fake_slack.stop()
            raise
        sender = SlackSender(f"http://127.0.0.1:{bot.http_port}/slack/events", SECRET)
        harness = Harness(bot, fake_slack, fake_anthropic, Store(db_url), sender)
        started.append(harness)
        return harness

    yield start
    for harness in started:
        harness.bot.stop()
        harness.sender.close()
        harness.slack.stop()
        harness.bot.galley.store.dispose()
        harness.store.dispose()


# --- start-up ------------------------------------------------------------------------------


def test_start_up_catch_up_skips_a_days_old_slot_and_a_manual_draft_of_it_is_allowed(
    start_bot: StartBot, sqlite_url: str
) -> None:
    """The assumption every other test leans on: at start-up the latest due Monday
    (2026-11-23 09:00, two days before the bot's clock, far past misfire_grace) is a
    skipped misfire with no model call; `galley.draft` of it is then a manual run."""
    h = start_bot(sqlite_url)

    run = h.run_row(RUN)
    assert run is not None
    assert (run.state, run.reason) == (RunState.SKIPPED, SkipReason.MISFIRE)
    assert h.anthropic.requests == []
    h.bot.sync_slack()
    assert h.calls("chat.postMessage") == []

    assert h.draft() == KEY
    assert len(h.anthropic.requests) == 1
    run = h.run_row(RUN)
    assert run is not None and run.state == RunState.AWAITING_REVIEW


# --- posting: exactly once, whatever the wire does -----------------------------------------


def test_one_draft_is_posted_once_with_metadata_and_a_receipt(
    start_bot: StartBot, db_url: str
) -> None:
    h = start_bot(db_url)
    key = h.draft()

    h.bot.sync_slack()
    h.bot.sync_slack()

    [post] = h.calls("chat.postMessage")
    assert post.params["channel"] == CHANNEL
    metadata = post.params["metadata"]
    assert metadata["event_type"] == "galley_draft"
    assert metadata["event_payload"]["draft_key"] == key
    assert metadata["event_payload"]["revision"] == 1
    [message] = h.slack.messages(CHANNEL)
    texts = [e["text"]["text"] for e in actions_of(message["blocks"])[0]["elements"]]
    assert texts == ["Approve", "Reject", "Edit"]
    assert parse_button_value(button(message["blocks"], APPROVE)) == (key, 1)
    shown = json.dumps(message["blocks"])
    for part in (RECIPE, "linkedin", "v1", "Write the weekly update for 23 November 2026."):
        assert part in shown
    receipt = h.receipt(key)
    assert receipt is not None
    assert receipt.state == EffectState.SUCCEEDED
    assert receipt.external_id == message["ts"]


def test_a_post_accepted_then_hung_is_found_by_lookup_not_posted_again(
    start_bot: StartBot, db_url: str
) -> None:
    h = start_bot(db_url, defaults='call_timeout = "1s"')
    h.slack.script("chat.postMessage", accept_then_hang(5))
    key = h.draft()

    h.bot.sync_slack()  # the post lands, but the answer never comes: outcome unknown
    receipt = h.receipt(key)
    assert receipt is not None and receipt.state == EffectState.UNCERTAIN
    assert len(h.slack.messages(CHANNEL)) == 1

    h.bot.sync_slack()  # look before you leap: the message is found, not re-sent

    assert len(h.calls("chat.postMessage")) == 1
    [lookup, *_] = h.calls("conversations.history")
    assert str(lookup.params.get("include_all_metadata")).lower() in ("1", "true")
    [message] = h.slack.messages(CHANNEL)
    receipt = h.receipt(key)
    assert receipt is not None
    assert receipt.state == EffectState.SUCCEEDED
    assert receipt.external_id == message["ts"]


def test_a_refused_post_is_simply_retried_on_the_next_pass(
    start_bot: StartBot, sqlite_url: str
) -> None:
    h = start_bot(sqlite_url)
    h.slack.script("chat.postMessage", error("internal_error", 200))
    key = h.draft()

    h.bot.sync_slack()  # {"ok": false}: known not to have happened
    receipt = h.receipt(key)
    assert receipt is not None and receipt.state == EffectState.FAILED
    assert h.slack.messages(CHANNEL) == []

    h.bot.sync_slack()

    assert len(h.calls("chat.postMessage")) == 2
    assert h.calls("conversations.history") == []  # a refusal needs no lookup
    [message] = h.slack.messages(CHANNEL)
    receipt = h.receipt(key)
    assert receipt is not None
    assert (receipt.state, receipt.external_id) == (EffectState.SUCCEEDED, message["ts"])


def test_a_dropped_post_is_looked_up_then_posted_once(start_bot: StartBot, sqlite_url: str) -> None:
    h = start_bot(sqlite_url)
    h.slack.script("chat.postMessage", drop())
    key = h.draft()

    h.bot.sync_slack()  # the connection closes with no answer: outcome unknown
    receipt = h.receipt(key)
    assert receipt is not None and receipt.state == EffectState.UNCERTAIN

    h.bot.sync_slack()  # the lookup finds nothing, so the post is made once
    h.bot.sync_slack()

    assert len(h.calls("conversations.history")) >= 1
    assert len(h.calls("chat.postMessage")) == 2
    [message] = h.slack.messages(CHANNEL)
    receipt = h.receipt(key)
    assert receipt is not None
    assert (receipt.state, receipt.external_id) == (EffectState.SUCCEEDED, message["ts"])


def review_posts(h: Harness) -> list[RecordedCall]:
    return [
        c
        for c in h.calls("chat.postMessage")
        if (c.params.get("metadata") or {}).get("event_type") == "galley_draft"
    ]


def test_a_post_whose_outcome_cannot_be_checked_is_not_sent_again(
    start_bot: StartBot, sqlite_url: str
) -> None:
    h = start_bot(sqlite_url)
    h.slack.script("chat.postMessage", drop())
    h.slack.script("conversations.history", error("internal_error", 200))
    key = h.draft()

    h.bot.sync_slack()  # outcome unknown
    h.bot.sync_slack()  # the lookup fails too: cannot tell, so nothing is sent

    assert len(review_posts(h)) == 1
    receipt = h.receipt(key)
    assert receipt is not None and receipt.state == EffectState.UNCERTAIN
    [alert] = [c for c in h.calls("chat.postMessage") if c not in review_posts(h)]
    assert "cannot find it" in json.dumps(alert.params["blocks"])  # people are told

    h.bot.sync_slack()  # the lookup answers: clearly absent, so the post is made once

    assert len(review_posts(h)) == 2
    [message] = h.review_messages()
    receipt = h.receipt(key)
    assert receipt is not None
    assert (receipt.state, receipt.external_id) == (EffectState.SUCCEEDED, message["ts"])


def test_a_decision_on_a_message_whose_post_was_uncertain_still_reaches_the_message(
    start_bot: StartBot, sqlite_url: str
) -> None:
    h = start_bot(sqlite_url, slack=PEOPLE, defaults='call_timeout = "1s"')
    h.slack.script("chat.postMessage", accept_then_hang(5))
    key = h.draft()
    h.bot.sync_slack()  # the message landed in Slack, the receipt says uncertain
    receipt = h.receipt(key)
    assert receipt is not None and receipt.state == EffectState.UNCERTAIN

    assert h.click(APPROVE, "U0EDITOR", key).status_code == 200  # people see it and decide
    eventually(lambda: h.draft_row(key).state == DraftState.APPROVED, "the approval")
    time.sleep(SETTLE)
    h.bot.sync_slack()
    h.bot.sync_slack()

    assert len(h.calls("chat.postMessage")) == 1
    receipt = h.receipt(key)
    assert receipt is not None and receipt.state == EffectState.SUCCEEDED
    assert actions_of(h.message_for(key)["blocks"]) == []  # "approved by", not the buttons


def test_a_429_storm_delays_posts_but_loses_none_and_keeps_their_order(
    start_bot: StartBot, sqlite_url: str
) -> None:
    h = start_bot(sqlite_url, pending_limit=5)
    keys = [h.draft(slot) for slot in ("2026-11-09T09:00", "2026-11-16T09:00", SLOT)]
    # Retry-After 2 is longer than the pacer's own 1 s spacing, so honouring it shows.
    h.slack.script("chat.postMessage", rate_limited(2), rate_limited(1), rate_limited(1))

    started = time.monotonic()
    h.bot.sync_slack()
    elapsed = time.monotonic() - started

    posts = h.calls("chat.postMessage")
    assert len(posts) == 6  # three refusals, then one accepted post per draft
    gaps = [later.at - earlier.at for earlier, later in itertools.pairwise(posts[:4])]
    assert gaps[0] >= 1.9 and gaps[1] >= 0.9 and gaps[2] >= 0.9, gaps
    assert elapsed >= 4
    posted = [m["metadata"]["event_payload"]["draft_key"] for m in h.slack.messages(CHANNEL)]
    assert posted == keys
    for key in keys:
        receipt = h.receipt(key)
        assert receipt is not None and receipt.state == EffectState.SUCCEEDED


def test_model_text_never_reaches_slack_as_a_live_mention(
    start_bot: StartBot, sqlite_url: str
) -> None:
    raw = ("<!channel>", "<!here>", "<!subteam^S1>", "<@U1>")
    h = start_bot(sqlite_url, slack=PEOPLE)
    h.anthropic.script(ok(text="Big news <!channel> and <!here>: <!subteam^S1> thanks <@U1> & co"))
    key, _ = h.draft_and_post()
    assert h.click(APPROVE, "U0EDITOR", key).status_code == 200
    eventually(lambda: h.calls("chat.update"), "the decided message")

    sent = h.calls("chat.postMessage") + h.calls("chat.update")
    assert len(sent) == 2
    for call in sent:
        dumped = json.dumps({k: call.params.get(k) for k in ("text", "blocks")})
        for sequence in raw:
            assert sequence not in dumped, (call.method, sequence)
        assert "&lt;!channel&gt;" in dumped  # the text is there, made inert


def test_a_long_draft_is_split_within_block_kit_limits(
    start_bot: StartBot, sqlite_url: str
) -> None:
    paragraph = "A sentence about this week's news & plans, told at length. " * 40
    long_text = "\n\n".join([paragraph] * 12)  # about 28,000 characters
    h = start_bot(sqlite_url)
    h.anthropic.script(ok(text=long_text))

    h.draft_and_post()

    [post] = h.calls("chat.postMessage")
    blocks = post.params["blocks"]
    assert len(blocks) <= 50
    for block in blocks:
        if block["type"] == "section":
            assert 0 < len(block["text"]["text"]) <= 3000
    assert len(json.dumps(post.params["text"])) < 4000
    assert [e["text"]["text"] for e in actions_of(blocks)[0]["elements"]] == [
        "Approve",
        "Reject",
        "Edit",
    ]


# --- deciding -----------------------------------------------------------------------------


def test_approve_click_acks_fast_and_decides_once(start_bot: StartBot, db_url: str) -> None:
    h = start_bot(db_url, slack=PEOPLE)
    key, _ = h.draft_and_post()

    started = time.monotonic()
    response = h.click(APPROVE, "U0EDITOR", key)
    assert response.status_code == 200
    assert time.monotonic() - started < 1.0

    eventually(lambda: h.draft_row(key).state == DraftState.APPROVED, "the approval")
    [update] = eventually(lambda: h.calls("chat.update"), "the decided message")
    h.bot.sync_slack()  # a later pass has nothing left to show

    assert len(h.calls("chat.update")) == 1
    draft = h.draft_row(key)
    assert draft.decided_by == "U0EDITOR" and draft.decided_at is not None
    run = h.run_row()
    assert run is not None and run.state == RunState.SUCCEEDED
    assert actions_of(update.params["blocks"]) == []
    assert "<@U0EDITOR>" in json.dumps(update.params["blocks"])
    assert update.params["ts"] == h.message_for(key)["ts"]
    assert actions_of(h.message_for(key)["blocks"]) == []
    assert h.replies() == []  # the person who decided is not told "already decided"


def test_two_approvers_clicking_at_once_make_one_decision(start_bot: StartBot, db_url: str) -> None:
    h = start_bot(db_url, slack=PEOPLE)
    key, _ = h.draft_and_post()
    users = ("U0EDITOR", "U0EDITOR2")
    barrier = threading.Barrier(len(users))
    statuses: dict[str, int] = {}

    def click(user: str) -> None:
        barrier.wait()
        statuses[user] = h.click(APPROVE, user, key).status_code

    threads = [threading.Thread(target=click, args=(u,)) for u in users]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)

    assert statuses == {u: 200 for u in users}
    eventually(lambda: h.replies(), "the loser's reply")
    eventually(lambda: h.calls("chat.update"), "the decided message")
    time.sleep(SETTLE)
    h.bot.sync_slack()

    draft = h.draft_row(key)
    assert draft.state == DraftState.APPROVED
    winner = draft.decided_by
    assert winner in users
    [loser] = [u for u in users if u != winner]
    assert len(h.draft_events(DraftState.APPROVED, key)) == 1
    assert len(h.calls("chat.update")) == 1
    assert h.replies(loser) == [f"Already approved by <@{winner}>."]
    assert h.replies(str(winner)) == []


def _bump(h: Harness) -> None:
    h.bot.galley.bump(RECIPE, actor="U0ADMIN", reason="new tone")


def _edit(h: Harness) -> None:
    galley = h.bot.galley
    answer = edit(
        galley.store,
        galley.config,
        galley.clock,
        draft_key=KEY,
        revision=1,
        text="An edited draft.",
        user="U0EDITOR",
        permitted=True,
    )
    assert answer.accepted, answer


def _age_past_review_window(h: Harness) -> None:
    with h.store.transaction() as session:
        session.execute(
            sa.update(DraftRow)
            .where(col(DraftRow.key) == KEY)
            .values(ready_at=h.bot.galley.clock.now() - timedelta(hours=49))  # window: 48h
        )


@pytest.mark.parametrize(
    ("change", "clicker", "says", "state_after"),
    [
        pytest.param(_bump, "U0EDITOR", "superseded", DraftState.SUPERSEDED, id="bumped"),
        pytest.param(_edit, "U0EDITOR", "edited since", DraftState.READY, id="edited"),
        pytest.param(
            _age_past_review_window,
            "U0EDITOR",
            "review window",
            DraftState.EXPIRED,
            id="review-window-passed",
        ),
        pytest.param(None, "U0STRANGER", "not one of", DraftState.READY, id="not-an-approver"),
    ],
)
def test_a_stale_or_unauthorised_click_decides_nothing_and_says_why(
    start_bot: StartBot,
    sqlite_url: str,
    change: Callable[[Harness], None] | None,
    clicker: str,
    says: str,
    state_after: DraftState,
) -> None:
    h = start_bot(sqlite_url, slack=PEOPLE)
    h.slack.usergroups["S0EDITORS"] = ["U0GROUPIE"]
    _, message = h.draft_and_post()
    revision_1 = button(message["blocks"], APPROVE)
    if change is not None:
        change(h)

    assert h.click(APPROVE, clicker, value=revision_1).status_code == 200

    [reply] = eventually(lambda: h.replies(clicker), "the refusal")
    assert says in reply.lower()
    [call] = h.slack.calls(RESPONSE_URL)
    assert call.params.get("response_type") == "ephemeral"
    assert call.params.get("replace_original") is False
    time.sleep(SETTLE)
    draft = h.draft_row()
    assert draft.state == state_after
    assert draft.decided_by is None
    assert h.draft_events(DraftState.APPROVED) == []
    run = h.run_row()
    assert run is not None and run.state not in (RunState.APPROVED, RunState.SUCCEEDED)


def test_a_user_group_member_may_approve_and_a_stranger_may_not(
    start_bot: StartBot, sqlite_url: str
) -> None:
    h = start_bot(sqlite_url, slack=PEOPLE)
    h.slack.usergroups["S0EDITORS"] = ["U0GROUPIE"]
    key, _ = h.draft_and_post()

    assert h.click(APPROVE, "U0STRANGER", key).status_code == 200
    eventually(lambda: h.replies("U0STRANGER"), "the stranger's refusal")
    assert h.draft_row(key).state == DraftState.READY

    assert h.click(APPROVE, "U0GROUPIE", key).status_code == 200
    eventually(lambda: h.draft_row(key).state == DraftState.APPROVED, "the member's approval")

    assert h.draft_row(key).decided_by == "U0GROUPIE"
    assert any(c.params.get("usergroup") == "S0EDITORS" for c in h.calls("usergroups.users.list"))
    assert h.replies("U0GROUPIE") == []


def test_reject_opens_a_modal_and_its_reason_is_recorded(
    start_bot: StartBot, sqlite_url: str
) -> None:
    h = start_bot(sqlite_url, slack=PEOPLE)
    key, message = h.draft_and_post()

    assert h.click(REJECT, "U0EDITOR", key).status_code == 200
    [opened] = eventually(lambda: h.calls("views.open"), "the reject modal")
    view = opened.params["view"]
    assert view["callback_id"] == "galley_reject_modal"
    assert parse_button_value(view["private_metadata"]) == (key, 1)
    assert h.draft_row(key).state == DraftState.READY  # opening the modal decides nothing

    def submit(user: str) -> httpx.Response:
        submission = view_submission(
            user=user,
            callback_id=view["callback_id"],
            private_metadata=view["private_metadata"],
            values={"reason": {"reason": text_input("Off-brand tone")}},
        )
        return h.sender.interactive(submission)

    assert submit("U0STRANGER").status_code == 200  # not an approver: told, nothing changes
    [refusal] = eventually(lambda: h.ephemerals("U0STRANGER"), "the stranger's refusal")
    assert "not one of" in refusal
    assert h.draft_row(key).state == DraftState.READY

    assert submit("U0EDITOR").status_code == 200

    eventually(lambda: h.draft_row(key).state == DraftState.REJECTED, "the rejection")
    [update] = eventually(lambda: h.calls("chat.update"), "the decided message")
    h.bot.sync_slack()
    assert len(h.calls("chat.update")) == 1
    draft = h.draft_row(key)
    assert (draft.decided_by, draft.decision_reason) == ("U0EDITOR", "Off-brand tone")
    run = h.run_row()
    assert run is not None and run.state == RunState.REJECTED
    assert actions_of(update.params["blocks"]) == []
    shown = json.dumps(update.params["blocks"])
    assert "Rejected" in shown and "Off-brand tone" in shown and "<@U0EDITOR>" in shown
    assert update.params["ts"] == message["ts"]


def test_an_edit_saves_revision_2_and_retires_the_old_buttons(
    start_bot: StartBot, sqlite_url: str
) -> None:
    h = start_bot(sqlite_url, slack=PEOPLE)
    key, message = h.draft_and_post()
    old_approve = button(message["blocks"], APPROVE)
    original = h.draft_row(key).text

    assert h.click(EDIT, "U0EDITOR", key).status_code == 200
    [opened] = eventually(lambda: h.calls("views.open"), "the edit modal")
    view = opened.params["view"]
    assert view["callback_id"] == "galley_edit_modal"
    inputs = [b for b in view["blocks"] if b.get("type") == "input"]
    assert inputs[0]["element"]["initial_value"] == original

    empty = view_submission(
        user="U0EDITOR",
        callback_id=view["callback_id"],
        private_metadata=view["private_metadata"],
        values={"part_0": {"text": text_input("  ")}, "part_1": {"text": text_input(None)}},
    )
    refused = h.sender.interactive(empty)
    assert refused.status_code == 200 and refused.json()["response_action"] == "errors"
    assert h.draft_row(key).revision == 1

    new_text = "A shorter, better weekly update."
    submission = view_submission(
        user="U0EDITOR",
        callback_id=view["callback_id"],
        private_metadata=view["private_metadata"],
        values={"part_0": {"text": text_input(new_text)}, "part_1": {"text": text_input(None)}},
    )
    assert h.sender.interactive(submission).status_code == 200

    eventually(lambda: h.draft_row(key).revision == 2, "revision 2")
    [update] = eventually(lambda: h.calls("chat.update"), "the refreshed message")
    draft = h.draft_row(key)
    assert (draft.state, draft.text) == (DraftState.READY, new_text)
    assert parse_button_value(button(update.params["blocks"], APPROVE)) == (key, 2)
    assert new_text in json.dumps(update.params["blocks"])
    assert button(h.message_for(key)["blocks"], APPROVE) == button_value(key, 2)

    assert h.click(APPROVE, "U0EDITOR", key, value=old_approve).status_code == 200
    [reply] = eventually(lambda: h.replies("U0EDITOR"), "the refusal of revision 1")
    assert "edited since" in reply
    time.sleep(SETTLE)
    assert h.draft_row(key).state == DraftState.READY
    assert len(h.calls("chat.update")) == 1

    assert h.click(APPROVE, "U0EDITOR", key).status_code == 200  # the current buttons work
    eventually(lambda: h.draft_row(key).state == DraftState.APPROVED, "approval of revision 2")


def test_a_failed_decision_update_is_retried_by_the_next_pass(
    start_bot: StartBot, sqlite_url: str
) -> None:
    h = start_bot(sqlite_url, slack=PEOPLE)
    h.slack.script("chat.update", error("internal_error", 200))
    key, _ = h.draft_and_post()

    assert h.click(APPROVE, "U0EDITOR", key).status_code == 200
    eventually(lambda: h.calls("chat.update"), "the first, refused update")
    time.sleep(SETTLE)
    assert actions_of(h.message_for(key)["blocks"]) != []  # still shows the buttons

    h.bot.sync_slack()
    h.bot.sync_slack()

    assert len(h.calls("chat.update")) == 2
    assert actions_of(h.message_for(key)["blocks"]) == []


def test_a_failed_update_after_an_edit_is_retried_by_the_next_pass(
    start_bot: StartBot, sqlite_url: str
) -> None:
    h = start_bot(sqlite_url, slack=PEOPLE)
    h.slack.script("chat.update", error("internal_error", 200))
    key, message = h.draft_and_post()

    submission = view_submission(
        user="U0EDITOR",
        callback_id="galley_edit_modal",
        private_metadata=button(message["blocks"], EDIT),
        values={"part_0": {"text": text_input("Edited text.")}},
    )
    assert h.sender.interactive(submission).status_code == 200
    eventually(lambda: h.draft_row(key).revision == 2, "revision 2")
    eventually(lambda: h.calls("chat.update"), "the first, refused update")
    time.sleep(SETTLE)

    h.bot.sync_slack()
    h.bot.sync_slack()

    # Otherwise the message keeps revision 1's text and buttons: every click on it is
    # refused as "edited since", and the new text is never shown to anyone.
    assert button(h.message_for(key)["blocks"], APPROVE) == button_value(key, 2)


def test_backpressure_is_announced_once_per_episode_and_once_on_resuming(
    start_bot: StartBot, sqlite_url: str
) -> None:
    h = start_bot(sqlite_url, slack=PEOPLE, pending_limit=1)
    first = h.draft("2026-11-16T09:00")
    refused = h.bot.galley.draft(RECIPE, SLOT)
    assert (refused.outcome, refused.reason) == (DraftOutcome.SKIPPED, SkipReason.BACKPRESSURE)
    again = h.bot.galley.draft(RECIPE, SLOT)  # the same episode
    assert again.outcome == DraftOutcome.SKIPPED

    h.bot.sync_slack()
    h.bot.sync_slack()

    def notices() -> list[str]:
        return [m["text"] for m in h.slack.messages(CHANNEL) if not m.get("metadata")]

    [paused] = notices()
    assert "paused" in paused.lower() and RECIPE in paused

    assert h.click(APPROVE, "U0EDITOR", first).status_code == 200
    eventually(lambda: h.draft_row(first).state == DraftState.APPROVED, "the approval")
    assert h.draft(SLOT) == KEY
    h.bot.sync_slack()
    h.bot.sync_slack()

    assert len(notices()) == 2
    assert "resumed" in notices()[1].lower()
    assert len(h.review_messages()) == 2


def test_an_expired_draft_leaves_the_queue_and_its_message_says_so(
    start_bot: StartBot, sqlite_url: str
) -> None:
    h = start_bot(sqlite_url)
    key, message = h.draft_and_post()
    _age_past_review_window(h)

    galley = h.bot.galley
    [expired] = expire_overdue_drafts(galley.store, galley.config, galley.clock)
    h.bot.sync_slack()
    h.bot.sync_slack()

    assert expired.key == key
    assert h.draft_row(key).state == DraftState.EXPIRED
    run = h.run_row()
    assert run is not None and run.state == RunState.EXPIRED
    [status] = galley.status().recipes
    assert status.pending == 0
    [update] = h.calls("chat.update")
    assert update.params["ts"] == message["ts"]
    assert actions_of(update.params["blocks"]) == []
    assert "Expired" in json.dumps(update.params["blocks"])


# --- signatures -----------------------------------------------------------------------------


def test_unsigned_or_replayed_requests_are_refused_and_change_nothing(
    start_bot: StartBot, sqlite_url: str
) -> None:
    h = start_bot(sqlite_url, slack=PEOPLE)
    key, _ = h.draft_and_post()
    stale = int(time.time()) - 6 * 60

    assert h.click(APPROVE, "U0EDITOR", key, secret="not-the-secret").status_code == 401
    assert h.click(APPROVE, "U0EDITOR", key, timestamp=stale).status_code == 401
    assert h.command("pause all", "U0ADMIN", secret="not-the-secret").status_code == 401
    assert h.command("pause all", "U0ADMIN", timestamp=stale).status_code == 401
    time.sleep(SETTLE)

    assert h.draft_row(key).state == DraftState.READY
    assert h.recipe_row().paused is False
    assert h.calls("chat.update") == []
    assert h.slack.calls(RESPONSE_URL) == []

    assert h.click(APPROVE, "U0EDITOR", key).status_code == 200  # the same click, signed
    eventually(lambda: h.draft_row(key).state == DraftState.APPROVED, "the signed approval")


# --- /galley --------------------------------------------------------------------------------


def test_slash_help_is_open_to_everyone(start_bot: StartBot, sqlite_url: str) -> None:
    h = start_bot(sqlite_url, slack=PEOPLE)

    assert h.command("help", "U0STRANGER").status_code == 200

    [reply] = eventually(lambda: h.replies("U0STRANGER"), "the help reply")
    assert "/galley run" in reply and "/galley pause" in reply
    [call] = h.slack.calls(RESPONSE_URL)
    assert call.params.get("response_type") == "ephemeral"
    status = h.ask("status", "U0STRANGER")
    assert f"*{RECIPE}* v1" in status and "0/3 waiting" in status


def test_slash_admin_commands_check_the_caller_and_answer_in_one_sentence(
    start_bot: StartBot, sqlite_url: str
) -> None:
    h = start_bot(sqlite_url, slack=PEOPLE)

    refusal = h.ask("pause all holiday", "U0EDITOR")  # an approver, not an admin
    assert refusal == "Only Galley's admins may `pause`."
    assert h.recipe_row().paused is False

    paused = h.ask("pause all holiday", "U0ADMIN")
    assert RECIPE in paused
    row = h.recipe_row()
    assert (row.paused, row.paused_reason, row.changed_by) == (True, "holiday", "U0ADMIN")

    unknown = h.ask("bump nope", "U0ADMIN")
    assert "nope" in unknown and "\n" not in unknown and "Traceback" not in unknown
    assert h.ask("bump", "U0ADMIN") == "Usage: `/galley bump <recipe> [reason]`"
    assert h.recipe_row().version == 1


def test_slash_retry_drafts_a_failed_run_again_without_a_bump(
    start_bot: StartBot, sqlite_url: str
) -> None:
    h = start_bot(sqlite_url, slack=PEOPLE, max_attempts=1)
    h.anthropic.script(status(500))  # the only attempt fails: the run fails
    failed = h.bot.galley.draft(RECIPE, SLOT)
    assert failed.outcome == DraftOutcome.FAILED

    reply = h.ask(f"retry {RUN}", "U0ADMIN")

    assert "being drafted again" in reply
    [outcome] = eventually(lambda: h.replies("U0ADMIN")[1:], "the outcome")
    assert "drafted" in outcome
    run = h.run_row()
    assert run is not None and (run.state, run.version) == (RunState.AWAITING_REVIEW, 1)
    assert h.recipe_row().version == 1  # no bump


def test_slash_run_answers_at_once_and_the_draft_follows(
    start_bot: StartBot, sqlite_url: str
) -> None:
    h = start_bot(sqlite_url, slack=PEOPLE)
    h.anthropic.script(ok(delay=2))  # a slow model must not hold up Slack's 3 seconds

    started = time.monotonic()
    response = h.command(f"run {RECIPE}", "U0ADMIN")
    assert response.status_code == 200
    assert time.monotonic() - started < 1.0
    [reply] = eventually(lambda: h.replies("U0ADMIN"), "the reply")
    assert RECIPE in reply

    eventually(
        lambda: (run := h.run_row()) is not None and run.state == RunState.AWAITING_REVIEW,
        "the manual draft",
        timeout=10,
    )
    assert h.draft_row(KEY).state == DraftState.READY
    assert len(h.anthropic.requests) == 1
    h.bot.sync_slack()
    assert h.message_for(KEY)["ts"]


# --- the HTTP server ------------------------------------------------------------------------


def test_health_readiness_and_metrics_endpoints(start_bot: StartBot, sqlite_url: str) -> None:
    h = start_bot(sqlite_url)
    base = f"http://127.0.0.1:{h.bot.http_port}"

    health = httpx.get(f"{base}/healthz")
    assert (health.status_code, health.text) == (200, "ok")
    ready = httpx.get(f"{base}/readyz")
    assert ready.status_code == 200 and ready.json()["ready"] is True
    metrics = httpx.get(f"{base}/metrics")
    assert metrics.status_code == 200
    assert metrics.headers["content-type"].startswith("text/plain")
    assert "# TYPE " in metrics.text and "# HELP " in metrics.text
