"""`/galley post` (docs/design.md §37): the slash command opens a form (views.open), and its
submission (view_submission) writes the person's post, whose review message is posted at
once, with no model call; a refusal stays on the form. Signed requests through Bolt to a
running bot, the fake Slack Web API and the fake Anthropic API; both backends.
"""

from __future__ import annotations

from typing import Any

from sqlmodel import col, select

from bot.post_modal import POST_MODAL
from core.models import EventRow, RunRow
from core.states import DraftState, RunState
from tests.fakes.anthropic_api import FakeAnthropic
from tests.harness.slack_harness import RECIPE, StartBot, eventually
from tests.harness.slack_requests import text_input, view_submission

PEOPLE = 'approvers = ["U0EDITOR"]\nadmins = ["U0ADMIN"]'
TEXT = "Doors open at nine: see you there."


def submitted(view: dict[str, Any], text: str, user: str = "U0ADMIN") -> dict[str, Any]:
    return view_submission(
        user=user,
        callback_id=POST_MODAL,
        private_metadata=view["private_metadata"],
        values={
            "recipe": {"recipe": {"type": "static_select", "selected_option": {"value": RECIPE}}},
            "text": {"text": text_input(text)},
            "at": {"at": {"type": "datetimepicker", "selected_date_time": None}},
        },
    )


def test_the_modal_s_submission_writes_the_post_and_its_review_message_appears(
    db_url: str, start_bot: StartBot, fake_anthropic: FakeAnthropic
) -> None:
    h = start_bot(db_url, slack=PEOPLE)
    assert h.command("post", "U0ADMIN").status_code == 200
    [opened] = eventually(lambda: h.calls("views.open"), "the post form")
    view = opened.params["view"]
    assert view["callback_id"] == POST_MODAL
    blocks = {b["block_id"]: b for b in view["blocks"] if b["type"] == "input"}
    assert {"recipe", "text", "at"} <= set(blocks)

    assert h.sender.interactive(submitted(view, TEXT)).status_code == 200
    message = eventually(
        lambda: next((m for m in h.review_messages() if TEXT in str(m["blocks"])), None),
        "the review message",
    )
    assert "Approve" in str(message["blocks"])
    with h.store.read() as session:
        [run] = session.exec(select(RunRow).where(col(RunRow.id).contains("@post:"))).all()
        written = session.exec(
            select(EventRow).where(col(EventRow.run_id) == run.id, col(EventRow.decision) == "post")
        ).all()
    assert run.state == RunState.AWAITING_REVIEW
    assert h.draft_row(run.draft_key or "").state == DraftState.READY
    assert [e.actor for e in written] == ["U0ADMIN"]  # the decision log names the person
    assert fake_anthropic.requests == []  # no model call


def test_a_refused_post_stays_on_the_form_and_a_non_admin_gets_no_form(
    db_url: str, start_bot: StartBot
) -> None:
    h = start_bot(db_url, slack=PEOPLE)
    assert "admins" in h.ask("post", "U0EDITOR")
    assert h.calls("views.open") == []
    assert h.command("post", "U0ADMIN").status_code == 200
    [opened] = eventually(lambda: h.calls("views.open"), "the post form")
    answer = h.sender.interactive(submitted(opened.params["view"], "   "))
    assert answer.status_code == 200
    assert "no text" in answer.text
    with h.store.read() as session:
        assert session.exec(select(RunRow).where(col(RunRow.id).contains("@post:"))).all() == []
