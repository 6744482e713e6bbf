"""The reviewer's loop through signed Slack interactions and the notebook (docs/design.md
§22), against a real `Bot` and the fake Slack and Anthropic APIs over real HTTP.
Assertions are on rows, on the requests the fake Anthropic received and on the calls the
fake Slack received; on both backends."""

from __future__ import annotations

import json
import time
from typing import Any

import galley
from core.setup.settings import Settings
from core.states import DraftState
from tests.fakes.anthropic_api import ok
from tests.harness.slack_harness import (
    APPROVE,
    EDIT,
    KEY,
    PEOPLE,
    SETTLE,
    Harness,
    StartBot,
    button,
    edit_revision_1,
    eventually,
)
from tests.harness.slack_requests import text_input, view_submission

REDRAFT = "galley_redraft"
EDITOR, OTHER = "U0EDITOR", "U0EDITOR2"
NOTE = "shorter, mention the launch date"
ANSWER = "A shorter update: we launch on 1 December."


def model_requests(h: Harness) -> list[dict[str, Any]]:
    return [r.body for r in h.anthropic.requests if r.path.endswith("/v1/messages")]


def redraft_view(h: Harness, user: str = EDITOR) -> dict[str, Any]:
    """The modal the Redraft button opens, as Slack was asked to open it."""
    before = len(h.calls("views.open"))
    assert h.click(REDRAFT, user).status_code == 200
    opened = eventually(lambda: h.calls("views.open")[before:], "the redraft modal")
    view: dict[str, Any] = opened[0].params["view"]
    assert view["callback_id"] == "galley_redraft_modal"
    return view


def submission(view: dict[str, Any], user: str = EDITOR, note: str = NOTE) -> dict[str, Any]:
    return view_submission(
        user=user,
        callback_id=view["callback_id"],
        private_metadata=view["private_metadata"],
        values={"note": {"note": text_input(note)}},
    )


def updates_of(h: Harness, ts: str) -> list[str]:
    return [json.dumps(c.params["blocks"]) for c in h.calls("chat.update") if c.params["ts"] == ts]


def test_one_redraft_submission_delivered_three_times_makes_one_model_request(
    start_bot: StartBot, db_url: str
) -> None:
    h = start_bot(db_url, slack=PEOPLE)
    _, message = h.draft_and_post()
    old_approve = button(message["blocks"], APPROVE)
    view = redraft_view(h)
    h.anthropic.script(ok(text=ANSWER))

    for _ in range(3):  # Slack redelivers; the claim, not the delivery, decides
        assert h.sender.interactive(submission(view)).status_code == 200

    eventually(lambda: h.draft_row().revision == 2, "revision 2")
    shown = eventually(
        lambda: [u for u in updates_of(h, message["ts"]) if "Revision 2" in u], "the message"
    )
    h.bot.host.wait_idle(timeout=30)
    time.sleep(SETTLE)
    requests = model_requests(h)
    assert len(requests) == 2  # the first draft, and one redraft
    assert NOTE in json.dumps(requests[1]) and "You write concise updates." in json.dumps(
        requests[1]
    )
    assert (h.draft_row().state, h.draft_row().text) == (DraftState.READY, ANSWER)
    assert "redrafted for <@U0EDITOR>" in shown[-1] and "shorter" in shown[-1]
    assert len(h.review_messages()) == 1  # in place: the same message, the same ts

    assert h.click(APPROVE, OTHER, value=old_approve).status_code == 200
    [reply] = eventually(lambda: h.replies(OTHER), "the stale approval's refusal")
    assert "edited since" in reply and "revision 2" in reply
    assert h.draft_row().state == DraftState.READY and h.draft_events(DraftState.APPROVED) == []


def test_two_approvals_through_slack_show_progress_then_both_names(
    start_bot: StartBot, db_url: str
) -> None:
    h = start_bot(db_url, slack=PEOPLE, defaults="approvals_required = 2")
    _, message = h.draft_and_post()

    assert h.click(APPROVE, EDITOR).status_code == 200
    progress = eventually(
        lambda: [u for u in updates_of(h, message["ts"]) if "1 of 2" in u], "the progress"
    )
    assert "<@U0EDITOR>" in progress[-1] and "may still approve" in progress[-1]
    assert h.draft_row().state == DraftState.READY

    assert h.click(APPROVE, OTHER).status_code == 200
    eventually(lambda: h.draft_row().state == DraftState.APPROVED, "the approval")
    # The click shows the decision at once unless the progress rewrite was still on its
    # way (a loaded machine): then the next pass does. Run that pass rather than wait.
    h.bot.sync_slack()
    decided = eventually(
        lambda: [u for u in updates_of(h, message["ts"]) if "Approved" in u], "the decision"
    )
    assert "<@U0EDITOR>" in decided[-1] and "<@U0EDITOR2>" in decided[-1]
    assert len(h.draft_events(DraftState.APPROVED)) == 1


def test_the_editors_own_approve_is_refused_in_slack_with_the_reason(
    start_bot: StartBot, db_url: str
) -> None:
    h = start_bot(db_url, slack=PEOPLE, defaults="editor_may_approve = false")
    h.draft_and_post()
    edit_revision_1(h)  # by U0EDITOR
    h.bot.sync_slack()
    assert json.loads(button(h.message_for(KEY)["blocks"], EDIT))["rev"] == 2

    assert h.click(APPROVE, EDITOR).status_code == 200

    [reply] = eventually(lambda: h.replies(EDITOR), "the refusal")
    assert "editor_may_approve" in reply
    assert h.draft_row().state == DraftState.READY


def test_a_notebook_approval_reaches_the_slack_message_as_progress_once(
    start_bot: StartBot, db_url: str
) -> None:
    h = start_bot(db_url, slack=PEOPLE, defaults="approvals_required = 2")
    _, message = h.draft_and_post()
    settings = Settings(
        galley_config=h.bot.settings.galley_config,
        galley_database_url=h.bot.settings.galley_database_url,
    )
    g = galley.connect(EDITOR, settings=settings, clock=h.bot.core.clock)

    answer = g.approve(g.show(KEY))
    h.bot.sync_slack()  # the running bot's outbox pass
    h.bot.sync_slack()  # and once more: the progress is shown once

    assert answer.accepted and "1 of 2" in answer.message
    [update] = updates_of(h, message["ts"])
    assert "1 of 2: <@U0EDITOR>" in update
    assert h.draft_row().state == DraftState.READY
