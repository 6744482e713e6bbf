"""Clicks on a review message decide once, and only when they may (docs/design.md §10):
Approve acks within Slack's 3 seconds and decides exactly once even when two people
click together; a stale, superseded, expired or unauthorised click changes nothing and
says why; Reject records its reason; Edit saves a new revision and retires the old
buttons; a refused message update is retried by the next outbox pass.

A real `Bot` (tests/harness/slack_harness.py) over real HTTP with signed requests; assertions
are on rows and on the calls the fake Slack received, never log lines.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable

import httpx
import pytest

from bot.block_kit import button_value
from bot.blocks import parse_button_value
from core.states import DraftState, RunState
from tests.fakes.slack_api import RESPONSE_URL, RecordedCall, error
from tests.harness.slack_harness import (
    APPROVE,
    EDIT,
    PEOPLE,
    REJECT,
    SETTLE,
    Harness,
    StartBot,
    actions_of,
    age_past_review_window,
    bump_recipe,
    button,
    edit_revision_1,
    eventually,
)
from tests.harness.slack_requests import text_input, view_submission


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

    assert len(h.calls("chat.update")) == 1, [
        (c.params.get("ts"), str(c.params.get("text"))[:80]) for c in h.calls("chat.update")
    ] + [str(c.params.get("text"))[:80] for c in h.calls("chat.postMessage")]
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
    assert len(h.calls("chat.update")) == 1, [
        (c.params.get("ts"), str(c.params.get("text"))[:80]) for c in h.calls("chat.update")
    ] + [str(c.params.get("text"))[:80] for c in h.calls("chat.postMessage")]
    assert h.replies(loser) == [f"Already approved by <@{winner}>."]
    assert h.replies(str(winner)) == []


@pytest.mark.parametrize(
    ("change", "clicker", "says", "state_after"),
    [
        pytest.param(bump_recipe, "U0EDITOR", "superseded", DraftState.SUPERSEDED, id="bumped"),
        pytest.param(edit_revision_1, "U0EDITOR", "edited since", DraftState.READY, id="edited"),
        pytest.param(
            age_past_review_window,
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
    assert len(h.calls("chat.update")) == 1, [
        (c.params.get("ts"), str(c.params.get("text"))[:80]) for c in h.calls("chat.update")
    ] + [str(c.params.get("text"))[:80] for c in h.calls("chat.postMessage")]
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
    assert len(h.calls("chat.update")) == 1, [
        (c.params.get("ts"), str(c.params.get("text"))[:80]) for c in h.calls("chat.update")
    ] + [str(c.params.get("text"))[:80] for c in h.calls("chat.postMessage")]

    assert h.click(APPROVE, "U0EDITOR", key).status_code == 200  # the current buttons work
    eventually(lambda: h.draft_row(key).state == DraftState.APPROVED, "approval of revision 2")


def test_text_added_by_edit_is_saved_and_published_as_its_own_paragraph(
    start_bot: StartBot, db_url: str
) -> None:
    announce = "C0ANNOUNCE"
    publish = f'publish = {{ to = "slack", channel = "{announce}" }}'
    h = start_bot(db_url, slack=PEOPLE, publish=publish)
    key, _ = h.draft_and_post()
    assert h.click(EDIT, "U0EDITOR", key).status_code == 200
    [opened] = eventually(lambda: h.calls("views.open"), "the edit modal")
    view = opened.params["view"]
    submission = view_submission(
        user="U0EDITOR",
        callback_id=view["callback_id"],
        private_metadata=view["private_metadata"],
        values={
            "part_0": {"text": text_input("Galley ships Widget 2.0.")},
            "add_more": {"text": text_input("A second paragraph.")},
        },
    )
    assert h.sender.interactive(submission).status_code == 200
    eventually(lambda: h.draft_row(key).revision == 2, "revision 2")
    joined = "Galley ships Widget 2.0.\n\nA second paragraph."
    assert h.draft_row(key).text == joined

    shown = button_value(key, 2)
    eventually(lambda: button(h.message_for(key)["blocks"], APPROVE) == shown, "revision 2 shown")
    assert h.click(APPROVE, "U0EDITOR", key).status_code == 200
    eventually(lambda: h.draft_row(key).state == DraftState.APPROVED, "the approval")
    h.bot.reconcile()  # the periodic pass publishes approved runs
    [published] = eventually(lambda: h.slack.messages(announce), "the publication")
    shown_text = "".join(b["text"]["text"] for b in published["blocks"])
    assert shown_text == joined, published["blocks"]


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


def test_a_listener_that_fails_still_answers_the_person(
    start_bot: StartBot, sqlite_url: str
) -> None:
    """No exception reaches Bolt unanswered: a click whose listener raises (a button
    value Galley cannot read) and a modal submission that raises are each told why."""
    h = start_bot(sqlite_url, slack=PEOPLE)
    key, _ = h.draft_and_post()

    assert h.click(APPROVE, "U0EDITOR", key, value="not a galley button").status_code == 200
    [reply] = eventually(lambda: h.replies("U0EDITOR"), "the click's answer")
    assert "could not finish" in reply and "not a Galley button value" in reply

    broken = view_submission(
        user="U0EDITOR2",
        callback_id="galley_reject_modal",
        private_metadata="{}",
        values={"reason": {"reason": text_input("Off-brand tone")}},
    )
    # no status asserted: a listener that raises right after ack() can race Bolt's
    # thread runner, which then resets the ack and answers 404 (slack_bolt thread_runner)
    h.sender.interactive(broken)
    [told] = eventually(lambda: h.ephemerals("U0EDITOR2"), "the submission's answer")
    assert "could not finish" in told
    assert h.draft_row(key).state == DraftState.READY


def test_a_review_message_deleted_in_slack_is_not_rewritten_in_a_loop(
    start_bot: StartBot, sqlite_url: str
) -> None:
    """`message_not_found` is final for that message: one refused update, people told
    once, and later passes leave it alone."""
    h = start_bot(sqlite_url, slack=PEOPLE)
    h.slack.script("chat.update", *[error("message_not_found", 200)] * 10)
    key, _ = h.draft_and_post()

    def told() -> list[RecordedCall]:
        posts = h.calls("chat.postMessage")
        return [c for c in posts if "was deleted" in json.dumps(c.params.get("blocks"))]

    assert h.click(APPROVE, "U0EDITOR", key).status_code == 200
    [alert] = eventually(told, "the alert about the deleted message", timeout=10)
    for _ in range(4):
        h.bot.sync_slack()

    assert len(h.calls("chat.update")) == 1
    assert key in json.dumps(alert.params["blocks"]) and len(told()) == 1
    assert h.draft_row(key).state == DraftState.APPROVED
