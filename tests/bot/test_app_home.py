"""The App Home tab: rendering (pure), publishing on app_home_opened in HTTP and Socket
Mode, the admin buttons with `/galley`'s checks, paced refreshes for recent viewers, and
slack_sdk's own Block Kit validation of every view and message Galley sends.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from slack_sdk.models.blocks import Block
from slack_sdk.models.views import View

from bot.alert_blocks import MessageTooLong, alert_message, publication_message, resolved_blocks
from bot.app_home import (
    ACTION_HOME_BUMP,
    ACTION_HOME_PAUSE,
    ACTION_HOME_RESUME,
    VIEW_BLOCK_LIMIT,
    Viewer,
    home_view,
)
from bot.blocks import notice_blocks
from core.api.galley import RecipeStatus
from core.api.home import HomeModel, RecipeLine, RunNeedingPerson, WaitingDraft
from core.ports import RunAlert
from core.states import DraftState
from tests.bot.test_socket_mode import StartSocketBot, start_socket_bot
from tests.fakes.slack_api import rate_limited
from tests.harness.bots import operator
from tests.harness.slack_harness import (
    APPROVE,
    EDIT,
    PEOPLE,
    RECIPE,
    REJECT,
    SETTLE,
    Harness,
    StartBot,
    eventually,
)
from tests.harness.slack_requests import app_home_opened, block_actions, text_input, view_submission

NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
ADMIN = Viewer("U0ADMIN", approver=True, admin=True)
EDITOR = Viewer("U0EDITOR", approver=True, admin=False)
STRANGER = Viewer("U0STRANGER", approver=False, admin=False)
__all__ = ["start_socket_bot"]  # a fixture used below


# --- Block Kit validation, as slack_sdk does it --------------------------------------------


def assert_valid_view(view: dict[str, Any]) -> None:
    """slack_sdk parses and validates every block (to_dict() raises on any limit)."""
    View(**view).to_dict()
    assert 1 <= len(view["blocks"]) <= VIEW_BLOCK_LIMIT


def assert_valid_message(blocks: list[dict[str, Any]]) -> None:
    assert 1 <= len(blocks) <= 50
    for raw in blocks:
        block = Block.parse(raw)
        assert block is not None, raw
        block.to_dict()


def assert_everything_sent_is_valid(h: Harness) -> int:
    """Every message, modal and Home view the fake Slack received; returns how many."""
    checked = 0
    for method in ("chat.postMessage", "chat.update"):
        for call in h.calls(method):
            assert_valid_message(call.params["blocks"])
            checked += 1
    for method in ("views.open", "views.publish"):
        for call in h.calls(method):
            assert_valid_view(call.params["view"])
            checked += 1
    return checked


# --- rendering (pure) ------------------------------------------------------------------------


def status(name: str = RECIPE, **changes: Any) -> RecipeStatus:
    values: dict[str, Any] = {
        "name": name,
        "version": 1,
        "paused": False,
        "pending": 1,
        "pending_limit": 3,
        "next_slot": "2026-11-30T09:00:00+00:00",
    }
    return RecipeStatus(**(values | changes))


def model(waiting: int = 1, recipes: int = 1, needing: int = 0) -> HomeModel:
    drafts = [
        WaitingDraft(
            f"linkedin|{RECIPE}@2026-11-{n % 28 + 1:02d}T09:00|v1",
            f"{RECIPE}@2026-11-{n % 28 + 1:02d}T09:00",
            RECIPE,
            1,
            NOW - timedelta(hours=n),
            "C0REVIEW",
            f"1796000000.{n:06d}",
        )
        for n in range(waiting)
    ]
    lines = [
        RecipeLine(status(f"recipe-{n}"), f"recipe-{n}@2026-11-23T09:00", "skipped", "misfire")
        for n in range(recipes)
    ]
    runs = [
        RunNeedingPerson(
            f"{RECIPE}@2026-10-{n % 28 + 1:02d}T09:00", RECIPE, "uncertain", None, NOW, False
        )
        for n in range(needing)
    ]
    return HomeModel(drafts, waiting, lines, runs)


def texts(view: dict[str, Any]) -> str:
    return json.dumps(view["blocks"])


def action_ids(view: dict[str, Any]) -> list[str]:
    return [e["action_id"] for b in view["blocks"] if b["type"] == "actions" for e in b["elements"]]


def test_an_approver_sees_each_waiting_draft_linked_to_its_review_message() -> None:
    view = home_view(model(waiting=2), EDITOR, now=NOW, workspace_url="https://t1.slack.com/")

    assert_valid_view(view)
    shown = texts(view)
    assert "Waiting for your decision* (2)" in shown
    assert "https://t1.slack.com/archives/C0REVIEW/p1796000000000001|Open the review" in shown
    assert action_ids(view) == []  # an approver is not an admin: no controls


def test_someone_who_may_not_approve_sees_counts_but_no_drafts_for_them() -> None:
    view = home_view(model(waiting=2), STRANGER, now=NOW)

    assert_valid_view(view)
    assert "none of them waits for your decision" in texts(view)
    assert "Open the review" not in texts(view)


def test_an_admin_gets_the_controls_and_the_runs_needing_a_person() -> None:
    paused = RecipeLine(status(paused=True, paused_reason="holiday", pending=3), None, None, None)
    home = HomeModel([], 0, [paused], model(needing=1).needing_person)

    view = home_view(home, ADMIN, now=NOW, notice="Paused: *weekly-update*")

    assert_valid_view(view)
    shown = texts(view)
    assert "3/3 waiting (full" in shown and "paused (holiday)" in shown
    assert "Runs needing a person* (1)" in shown and "Paused: *weekly-update*" in shown
    assert action_ids(view) == [
        ACTION_HOME_RESUME,
        "galley_home_run",
        ACTION_HOME_BUMP,
        "galley_home_mark_published",
        "galley_home_retry",
        "galley_home_cancel",
    ]


def test_an_items_recipe_shows_its_latest_poll_and_a_failure_answer_escaped() -> None:
    failed = "2026-11-30 12:00 UTC failed: source 'blog': 404 <b>Not Found</b>"
    line = RecipeLine(status(last_poll=failed), None, None, None)

    view = home_view(HomeModel([], 0, [line], []), ADMIN, now=NOW)

    assert_valid_view(view)
    assert "Last poll: 2026-11-30 12:00 UTC failed: source 'blog': 404 &lt;b&gt;" in texts(view)


@pytest.mark.parametrize(
    ("waiting", "recipes", "needing"), [(200, 1, 0), (5, 80, 0), (60, 30, 40), (0, 0, 200)]
)
def test_a_home_past_100_blocks_is_summarised_and_still_valid(
    waiting: int, recipes: int, needing: int
) -> None:
    view = home_view(model(waiting, recipes, needing), ADMIN, now=NOW)

    assert_valid_view(view)
    assert len(view["blocks"]) <= VIEW_BLOCK_LIMIT
    assert "more" in texts(view)


def test_alert_publication_and_notice_messages_pass_slack_sdk_validation() -> None:
    alert = RunAlert(
        run_id=f"{RECIPE}@2026-11-23T09:00",
        recipe=RECIPE,
        headline="Galley cannot tell whether this was published.",
        facts=["Run is `uncertain`."] * 30,
        mentions=["U0ONCALL", "S0EDITORS"],
    )
    message = alert_message(alert)
    assert_valid_message(message["blocks"])
    assert_valid_message(resolved_blocks(message["blocks"], "marked published", by="U0ADMIN"))
    long_draft = "A long approved post & more <!channel>. " * 140  # ~5,600, escaped ~7,000
    assert_valid_message(publication_message(long_draft, "k|publish:slack")["blocks"])
    with pytest.raises(MessageTooLong):  # too long for one message: refused, never cut
        publication_message(long_draft * 16, "k|publish:slack")
    assert_valid_message(notice_blocks("Drafting paused for *weekly-update*: 3 drafts waiting."))


# --- end to end ------------------------------------------------------------------------------


def open_home(h: Harness, user: str) -> dict[str, Any]:
    before = len(published_for(h, user))
    assert h.sender.event(app_home_opened(user=user)).status_code == 200  # type: ignore[attr-defined]
    views = eventually(lambda: published_for(h, user)[before:], f"{user}'s Home")
    return views[-1]


def published_for(h: Harness, user: str) -> list[dict[str, Any]]:
    return [c.params["view"] for c in h.calls("views.publish") if c.params["user_id"] == user]


def click_home(h: Harness, user: str, action_id: str, value: str) -> None:
    payload = block_actions(
        user=user,
        action_id=action_id,
        value=value,
        message_ts="",
        response_url=h.slack.response_url(user),
    )
    payload.pop("message"), payload.pop("channel")
    payload["container"] = {"type": "view", "view_id": "V0HOME"}
    payload["view"] = {"id": "V0HOME", "type": "home", "blocks": [], "callback_id": "galley_home"}
    assert h.sender.interactive(payload).status_code == 200


def home_cycle(h: Harness) -> None:
    """Open, list, control and refresh: the same in both modes."""
    key, _ = h.draft_and_post()

    home = open_home(h, "U0EDITOR")
    assert key.split("|")[1] in texts(home)
    assert "/archives/C0REVIEW/p" in texts(home)
    stranger = open_home(h, "U0STRANGER")
    assert "none of them waits for your decision" in texts(stranger)
    admin = open_home(h, "U0ADMIN")
    assert ACTION_HOME_PAUSE in action_ids(admin)

    click_home(h, "U0EDITOR", ACTION_HOME_PAUSE, RECIPE)  # not an admin: refused
    refused = eventually(lambda: published_for(h, "U0EDITOR")[1:], "the refusal on Home")
    assert "Only Galley's admins may `pause`" in texts(refused[-1])
    assert h.recipe_row().paused is False
    click_home(h, "U0ADMIN", ACTION_HOME_PAUSE, RECIPE)
    eventually(lambda: h.recipe_row().paused, "the pause")
    paused = eventually(lambda: published_for(h, "U0ADMIN")[1:], "the answer on Home")
    assert "Paused: *weekly-update*" in texts(paused[-1])
    assert ACTION_HOME_RESUME in action_ids(paused[-1])

    # A decision changes what every viewer sees: home passes refresh each Home once,
    # paced (the clicks above used the burst), and not again while nothing changes.
    assert h.click(APPROVE, "U0EDITOR", key).status_code == 200
    eventually(lambda: h.draft_row(key).state == DraftState.APPROVED, "the approval")
    time.sleep(SETTLE)
    before = {u: len(published_for(h, u)) for u in ("U0EDITOR", "U0STRANGER", "U0ADMIN")}

    def refreshed() -> bool:
        h.bot.home.refresh_recent()  # the bot's "home" job, driven by the test
        return all(len(published_for(h, u)) > n for u, n in before.items())

    eventually(refreshed, "every viewer's refreshed Home", timeout=10)
    time.sleep(1.5)  # the pacer has tokens again
    h.bot.home.refresh_recent()
    after = {u: len(published_for(h, u)) for u in before}
    assert after == {u: n + 1 for u, n in before.items()}
    assert "Nothing waits for you." in texts(published_for(h, "U0EDITOR")[-1])


def test_home_lists_controls_and_refreshes_the_same_over_http(
    start_bot: StartBot, sqlite_url: str
) -> None:
    h = start_bot(sqlite_url, slack=PEOPLE)
    home_cycle(h)
    assert assert_everything_sent_is_valid(h) >= 8


def test_home_lists_controls_and_refreshes_the_same_over_socket_mode(
    start_socket_bot: StartSocketBot, db_url: str
) -> None:
    h = start_socket_bot(db_url, slack=PEOPLE)
    home_cycle(h)
    assert assert_everything_sent_is_valid(h) >= 8


def test_every_message_and_modal_of_the_review_loop_passes_slack_sdk_validation(
    start_bot: StartBot, sqlite_url: str
) -> None:
    h = start_bot(sqlite_url, slack=PEOPLE, pending_limit=1)
    key, message = h.draft_and_post()
    operator(h.bot).draft(RECIPE, "2026-11-30T09:00")  # refused: backpressure notice
    h.bot.sync_slack()
    assert h.click(EDIT, "U0EDITOR", key).status_code == 200
    eventually(lambda: h.calls("views.open"), "the edit modal")
    edit = view_submission(
        user="U0EDITOR",
        callback_id="galley_edit_modal",
        private_metadata=h.calls("views.open")[0].params["view"]["private_metadata"],
        values={"part_0": {"text": text_input("Edited & <b>bold</b>.")}},
    )
    assert h.sender.interactive(edit).status_code == 200
    eventually(lambda: h.calls("chat.update"), "revision 2 shown")
    assert h.click(REJECT, "U0EDITOR", key).status_code == 200
    eventually(lambda: len(h.calls("views.open")) == 2, "the reject modal")
    assert h.click(APPROVE, "U0EDITOR", key).status_code == 200
    eventually(lambda: len(h.calls("chat.update")) == 2, "the decided message")

    kinds = {c.method for c in h.slack.calls()} & {"chat.postMessage", "chat.update", "views.open"}
    assert kinds == {"chat.postMessage", "chat.update", "views.open"}
    assert assert_everything_sent_is_valid(h) >= 5
    assert message["blocks"]


def test_home_refreshes_honour_a_429_and_catch_up_after_it(
    start_bot: StartBot, sqlite_url: str
) -> None:
    h = start_bot(sqlite_url, slack=PEOPLE)
    open_home(h, "U0EDITOR")
    h.slack.script("views.publish", rate_limited(1))
    h.draft()  # what the editor sees has changed

    assert h.bot.home.refresh_recent() == 0  # refused with Retry-After: 1
    assert h.bot.home.refresh_recent() == 0  # waits it out: no call at all
    calls_while_blocked = len(h.calls("views.publish"))
    time.sleep(1.1)
    assert h.bot.home.refresh_recent() == 1

    assert calls_while_blocked == 2  # the open, then the refused refresh
    assert len(published_for(h, "U0EDITOR")) == 3
    assert "Waiting for your decision* (1)" in texts(published_for(h, "U0EDITOR")[-1])


def test_a_stage_approver_slack_does_not_list_sees_the_drafts_as_an_approver(
    start_bot: StartBot, sqlite_url: str
) -> None:
    """Named by a recipe's approval stage only, not by `[slack] approvers`: Home shows
    them the drafts waiting, as the review message asks them to decide."""
    stages = 'approval_stages = [{ name = "editor" }, { name = "legal", approvers = ["U0LAWYER"] }]'
    h = start_bot(sqlite_url, slack=PEOPLE, defaults=stages)
    key, _ = h.draft_and_post()

    home = open_home(h, "U0LAWYER")

    assert key.split("|")[1] in texts(home)
    assert "none of them waits for your decision" not in texts(home)
