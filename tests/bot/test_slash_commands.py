"""`/galley` from Slack: help and status for everyone, admin commands check the caller and
answer in one sentence, `run` and `retry` answer at once and the draft follows.
"""

from __future__ import annotations

import time

from core.drafting_policies import DraftOutcome
from core.states import DraftState, RunState
from tests.fakes.anthropic_api import ok, status
from tests.fakes.slack_api import RESPONSE_URL
from tests.harness.bots import operator
from tests.harness.slack_harness import KEY, PEOPLE, RECIPE, RUN, SLOT, StartBot, eventually

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
    failed = operator(h.bot).draft(RECIPE, SLOT)
    assert failed.outcome == DraftOutcome.FAILED

    assert h.command(f"retry {RUN}", "U0ADMIN").status_code == 200

    # the answer and the outcome come from two threads: either may arrive first
    replies = eventually(lambda: h.replies("U0ADMIN")[1:] and h.replies("U0ADMIN"), "both")
    [answer] = [r for r in replies if "being drafted again" in r]
    [outcome] = [r for r in replies if r != answer]
    assert outcome.endswith(": drafted")
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
