"""One staleness table, two surfaces: approving (or redrafting, docs/design.md §22) a
draft that was bumped, edited or expired after a person read it changes nothing and
says why, the same way from the operator API (a notebook) as from a signed Slack click
or modal submission (docs/design.md §10).

Both surfaces run against a real `Bot` (fake Slack and Anthropic over real HTTP), so a
decision made in the notebook is also shown to reach the Slack review message through
the bot's outbox. Assertions are on rows and on the calls the fake Slack received.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

import galley
from core.setup.settings import Settings
from core.states import DraftState, RunState
from tests.fakes.slack_api import RESPONSE_URL
from tests.harness.slack_harness import (
    APPROVE,
    KEY,
    PEOPLE,
    SETTLE,
    Harness,
    StartBot,
    age_past_review_window,
    bump_recipe,
    button,
    edit_revision_1,
    eventually,
)
from tests.harness.slack_requests import text_input, view_submission

EDITOR = "U0EDITOR"


def notebook(h: Harness) -> galley.Galley:
    """The notebook of an approver, on the bot's database and clock."""
    settings = Settings(
        galley_config=h.bot.settings.galley_config,
        galley_database_url=h.bot.settings.galley_database_url,
    )
    return galley.connect(EDITOR, settings=settings, clock=h.bot.core.clock)


@dataclass(frozen=True)
class Read:
    """What a person saw before the change: the draft in the notebook, the message's
    Approve button in Slack. Both carry revision 1."""

    detail: galley.DraftDetail
    button_value: str


def approve_in_notebook(h: Harness, read: Read) -> str:
    answer = notebook(h).approve(read.detail)
    assert not answer.accepted
    return answer.message


def approve_in_slack(h: Harness, read: Read) -> str:
    assert h.click(APPROVE, EDITOR, value=read.button_value).status_code == 200
    [reply] = eventually(lambda: h.replies(EDITOR), "the refusal")
    [call] = h.slack.calls(RESPONSE_URL)
    assert call.params.get("response_type") == "ephemeral"
    return reply


Surface = Callable[[Harness, Read], str]


@pytest.mark.parametrize(
    "approve",
    [pytest.param(approve_in_notebook, id="api"), pytest.param(approve_in_slack, id="slack")],
)
@pytest.mark.parametrize(
    ("change", "says", "state_after"),
    [
        pytest.param(bump_recipe, "superseded", DraftState.SUPERSEDED, id="bumped"),
        pytest.param(edit_revision_1, "edited since", DraftState.READY, id="edited"),
        pytest.param(age_past_review_window, "review window", DraftState.EXPIRED, id="expired"),
    ],
)
def test_a_stale_approval_decides_nothing_and_says_why_on_both_surfaces(
    start_bot: StartBot,
    db_url: str,
    approve: Surface,
    change: Callable[[Harness], None],
    says: str,
    state_after: DraftState,
) -> None:
    h = start_bot(db_url, slack=PEOPLE)
    _, message = h.draft_and_post()
    read = Read(notebook(h).show(KEY), button(message["blocks"], APPROVE))
    assert read.detail.revision == 1
    change(h)

    said = approve(h, read)

    assert says in said.lower()
    time.sleep(SETTLE)
    draft = h.draft_row()
    assert (draft.state, draft.decided_by) == (state_after, None)
    assert h.draft_events(DraftState.APPROVED) == []
    run = h.run_row()
    assert run is not None and run.state not in (RunState.APPROVED, RunState.SUCCEEDED)


def test_a_notebook_decision_reaches_the_slack_message_through_the_outbox(
    start_bot: StartBot, db_url: str
) -> None:
    h = start_bot(db_url, slack=PEOPLE)
    h.draft_and_post()
    assert h.calls("chat.update") == []

    answer = notebook(h).approve(notebook(h).show(KEY))
    assert answer.accepted, answer
    h.bot.sync_slack()  # the running bot's outbox pass
    h.bot.sync_slack()  # and once more: the update is made once

    [update] = h.calls("chat.update")
    shown = json.dumps(update.params["blocks"])
    assert "Approved" in shown and f"<@{EDITOR}>" in shown
    assert "galley_approve" not in shown  # the buttons are gone
    assert h.draft_row().decided_by == EDITOR


# --- the same table for a redraft ----------------------------------------

REDRAFT = "galley_redraft"
NOTE = "shorter, mention the launch date"


def model_requests(h: Harness) -> list[dict[str, Any]]:
    return [r.body for r in h.anthropic.requests if r.path.endswith("/v1/messages")]


def redraft_view(h: Harness) -> dict[str, Any]:
    """The modal the Redraft button opened, as Slack was asked to open it."""
    assert h.click(REDRAFT, EDITOR).status_code == 200
    [opened] = eventually(lambda: h.calls("views.open"), "the redraft modal")
    view: dict[str, Any] = opened.params["view"]
    return view


def submission(view: dict[str, Any]) -> dict[str, Any]:
    return view_submission(
        user=EDITOR,
        callback_id=view["callback_id"],
        private_metadata=view["private_metadata"],
        values={"note": {"note": text_input(NOTE)}},
    )


def redraft_in_notebook(h: Harness, read: galley.DraftDetail, view: dict[str, Any]) -> str:
    answer = notebook(h).redraft(read, NOTE)
    assert not answer.accepted
    return answer.message


def redraft_in_slack(h: Harness, read: galley.DraftDetail, view: dict[str, Any]) -> str:
    assert h.sender.interactive(submission(view)).status_code == 200
    [reply] = eventually(lambda: h.ephemerals(EDITOR), "the refusal")
    return reply


@pytest.mark.parametrize(
    "redraft",
    [pytest.param(redraft_in_notebook, id="api"), pytest.param(redraft_in_slack, id="slack")],
)
@pytest.mark.parametrize(
    ("change", "says", "state_after"),
    [
        pytest.param(bump_recipe, "superseded", DraftState.SUPERSEDED, id="bumped"),
        pytest.param(edit_revision_1, "edited since", DraftState.READY, id="edited"),
        pytest.param(age_past_review_window, "review window", DraftState.READY, id="expired"),
    ],
)
def test_a_stale_redraft_calls_no_model_and_says_why_on_both_surfaces(
    start_bot: StartBot,
    db_url: str,
    redraft: Callable[[Harness, galley.DraftDetail, dict[str, Any]], str],
    change: Callable[[Harness], None],
    says: str,
    state_after: DraftState,
) -> None:
    h = start_bot(db_url, slack=PEOPLE)
    h.draft_and_post()
    read, view = notebook(h).show(KEY), redraft_view(h)  # both read revision 1
    change(h)

    said = redraft(h, read, view)

    assert says in said.lower()
    time.sleep(SETTLE)
    assert len(model_requests(h)) == 1  # the first draft only
    assert h.draft_row().state == state_after  # a redraft expires nothing: it only asks
