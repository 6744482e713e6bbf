"""Approvals are fresh (docs/design.md §10): an approval older than `approval_ttl` when
publishing starts is not revived; the draft goes back to review as a new revision, its
review message gets its buttons back and says why, and only the newest revision can be
approved.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import timedelta

from sqlmodel import col, select

from bot.block_kit import button_value
from bot.blocks import ACTION_APPROVE, parse_button_value
from core.drafting_policies import AttemptCause
from core.models import AttemptRow
from core.policies import Finding, PublishOutcome
from core.review.queue import edit
from core.states import DraftState, RunState
from tests.harness.bots import operator
from tests.harness.publishing_bots import BotHarness
from tests.harness.worlds import HOOK_KEY, KEY, RECIPE, REVIEW, RUN, SLOT, MakeWorld

# --- 4. stale approvals ---------------------------------------------------------------------


def test_an_approval_older_than_approval_ttl_goes_back_to_review(
    worlds: MakeWorld, db_url: str
) -> None:
    w = worlds(db_url, defaults='approval_ttl = "1h"')
    w.approved()
    w.clock.advance(timedelta(hours=1, minutes=1))

    result = w.service().publish_run(RUN)

    assert result.outcome == PublishOutcome.SENT_BACK
    assert w.posts() == 0
    assert w.hook.lookups == []
    assert w.publish_effects() == []
    draft = w.draft_row()
    assert (draft.state, draft.revision, draft.decided_by) == (DraftState.READY, 2, None)
    assert w.run_row().state == RunState.AWAITING_REVIEW

    old_button = w.approve(revision=1)
    assert not old_button.accepted
    assert "edited since" in old_button.message
    assert w.draft_row().state == DraftState.READY
    assert w.service().publish_pending() == []
    assert w.posts() == 0

    # Back in review, someone edits it; only the newest revision can be approved.
    edited = "Edited after it went back to review."
    assert edit(
        w.store,
        w.config,
        w.clock,
        draft_key=KEY,
        revision=2,
        text=edited,
        user="U0EDITOR",
        permitted=True,
    ).accepted
    assert not w.approve(revision=2).accepted
    assert w.approve(revision=3).accepted
    assert w.service().publish_run(RUN).outcome == PublishOutcome.PUBLISHED
    assert w.posts() == 1
    assert w.hook.publications[HOOK_KEY]["body"]["text"] == edited


def test_a_draft_sent_back_for_a_stale_approval_can_still_be_reviewed(
    worlds: MakeWorld, sqlite_url: str
) -> None:
    w = worlds(sqlite_url, defaults='approval_ttl = "24h"\nreview_window = "48h"')
    w.draft()
    w.clock.advance(timedelta(hours=40))
    assert w.approve().accepted  # within the review window
    w.clock.advance(timedelta(hours=25))  # publishing starts after an outage
    assert w.service().publish_run(RUN).outcome == PublishOutcome.SENT_BACK
    assert w.draft_row().state == DraftState.READY

    answer = w.approve(revision=2)

    assert answer.accepted, answer.message


def test_a_redraft_binds_to_the_revision_sent_back_like_an_approval(
    worlds: MakeWorld, db_url: str
) -> None:
    w = worlds(db_url, defaults='approval_ttl = "1h"')
    w.approved()
    w.clock.advance(timedelta(hours=1, minutes=1))
    assert w.service().publish_run(RUN).outcome == PublishOutcome.SENT_BACK
    stale = w.galley.redraft(KEY, "shorter", revision=1, user="U0EDITOR")
    fresh = w.galley.redraft(KEY, "shorter", revision=2, user="U0EDITOR")

    assert not stale.accepted and "edited since" in stale.message
    assert fresh.accepted, fresh.message
    with w.store.read() as session:  # one model call, for the revision still current
        causes = session.exec(select(AttemptRow.cause).order_by(col(AttemptRow.number))).all()
    assert list(causes) == [AttemptCause.DRAFT, AttemptCause.REDRAFT]
    assert (w.draft_row().state, w.draft_row().revision) == (DraftState.READY, 3)
    assert not w.approve(revision=2).accepted
    assert w.approve(revision=3).accepted
    assert w.service().publish_run(RUN).outcome == PublishOutcome.PUBLISHED


def test_an_uncertain_run_resolved_absent_after_approval_ttl_goes_back_to_review(
    worlds: MakeWorld, db_url: str
) -> None:
    w = worlds(db_url, target="webhook-no-status", defaults='approval_ttl = "24h"')
    w.go_uncertain()
    w.clock.advance(timedelta(hours=25))

    w.resolver().resolve(RUN, Finding.ABSENT, actor="U0ADMIN")
    results = w.service().publish_pending()

    assert w.posts() == 1
    assert [r.outcome for r in results] == [PublishOutcome.SENT_BACK]
    assert w.draft_row().state == DraftState.READY


def test_a_draft_sent_back_for_a_stale_approval_gets_its_buttons_back(
    bot_harness: Callable[..., BotHarness], sqlite_url: str
) -> None:
    h = bot_harness(sqlite_url, status_url=True, defaults='approval_ttl = "1s"')
    assert operator(h.bot).draft(RECIPE, SLOT).key == KEY
    h.bot.sync_slack()
    h.approve()
    h.bot.sync_slack()  # the message now says who approved it
    time.sleep(1.2)  # the approval goes stale before publishing starts

    assert h.bot.services.publishing.publish_run(RUN).outcome == PublishOutcome.SENT_BACK
    h.bot.sync_slack()

    assert len(h.hook.posts) == 0
    [message] = h.slack.messages(REVIEW)
    actions = [b for b in message["blocks"] if b["type"] == "actions"]
    assert actions, "the review message offers no buttons for revision 2"
    [approve] = [e["value"] for e in actions[0]["elements"] if e["action_id"] == ACTION_APPROVE]
    assert parse_button_value(approve) == (KEY, 2)
    assert approve == button_value(KEY, 2)
    assert "approval was older than" in json.dumps(message["blocks"])  # and it says why
