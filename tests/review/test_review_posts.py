"""Each ready draft is posted for review exactly once, whatever the wire does (docs/design.md
§7, §9 and §13): a refused post is retried, a post whose answer was lost is looked
up by its metadata before it is sent again, a 429 storm delays posts without losing or
reordering any, and model text reaches Slack inert and within Block Kit limits.

A real `Bot` (tests/harness/slack_harness.py) against the fake Slack and Anthropic APIs over
real HTTP; assertions are on receipts and on the calls the fake Slack received.
"""

from __future__ import annotations

import itertools
import json
import time

from bot.blocks import parse_button_value
from core.policies import SkipReason
from core.states import DraftState, EffectState, RunState
from tests.fakes.anthropic_api import ok
from tests.fakes.slack_api import RecordedCall, accept_then_hang, drop, error, rate_limited
from tests.harness.slack_harness import (
    APPROVE,
    CHANNEL,
    KEY,
    PEOPLE,
    RECIPE,
    RUN,
    SETTLE,
    SLOT,
    Harness,
    StartBot,
    actions_of,
    button,
    eventually,
)

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
    assert texts == ["Approve", "Reject", "Edit", "Redraft"]
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
        "Redraft",
    ]
