"""Backpressure from people (docs/design.md §11): a recipe with too many drafts waiting
skips its slots, the review channel is told once per episode and once when drafting
resumes, and a draft whose review window passes leaves the queue and its message says so.
"""

from __future__ import annotations

import json

from core.drafting_policies import DraftOutcome
from core.policies import SkipReason
from core.review.queue import expire_overdue_drafts
from core.states import DraftState, RunState
from tests.harness.bots import operator
from tests.harness.slack_harness import (
    APPROVE,
    CHANNEL,
    KEY,
    PEOPLE,
    RECIPE,
    SLOT,
    StartBot,
    actions_of,
    age_past_review_window,
    eventually,
)


def test_backpressure_is_announced_once_per_episode_and_once_on_resuming(
    start_bot: StartBot, sqlite_url: str
) -> None:
    h = start_bot(sqlite_url, slack=PEOPLE, pending_limit=1)
    first = h.draft("2026-11-16T09:00")
    refused = operator(h.bot).draft(RECIPE, SLOT)
    assert (refused.outcome, refused.reason) == (DraftOutcome.SKIPPED, SkipReason.BACKPRESSURE)
    again = operator(h.bot).draft(RECIPE, SLOT)  # the same episode
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
    age_past_review_window(h)

    galley = h.bot.core
    [expired] = expire_overdue_drafts(galley.store, galley.config, galley.clock)
    h.bot.sync_slack()
    h.bot.sync_slack()

    assert expired.key == key
    assert h.draft_row(key).state == DraftState.EXPIRED
    run = h.run_row()
    assert run is not None and run.state == RunState.EXPIRED
    [status] = operator(h.bot).status().recipes
    assert status.pending == 0
    [update] = h.calls("chat.update")
    assert update.params["ts"] == message["ts"]
    assert actions_of(update.params["blocks"]) == []
    assert "Expired" in json.dumps(update.params["blocks"])
