"""Every Block Kit builder stays within Slack's limits whatever the input.

Hypothesis drives each message, modal and view builder with arbitrary, hostile and very
long text; every result is parsed and validated by `slack_sdk`'s own models (which
enforce the documented per-field limits) and checked against the limits they do not
enforce: blocks per message, fallback text, and no live mention or link made from input.
"""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from slack_sdk.models.blocks import Block
from slack_sdk.models.views import View

from bot.alert_blocks import (
    MessageTooLong,
    alert_actions,
    alert_message,
    publication_message,
    resolved_blocks,
)
from bot.block_kit import BLOCK_LIMIT, DRAFT_TEXT_BUDGET, INPUT_LIMIT, MODAL_BLOCK_LIMIT
from bot.blocks import decided_message, escape_mrkdwn, help_text, notice_blocks, review_message
from bot.review_modals import edit_modal, reject_modal
from core.identity import draft_key, run_id
from core.ports import ReviewItem, RunAlert
from core.setup.config import NAME_MAX_LENGTH, PLATFORM_MAX_LENGTH
from core.states import DraftState

FALLBACK_LIMIT = 3000  # Galley's own cap on a message's notification text
TEXT_LIMIT = 3000  # section text, and each context element's text
HOSTILE = [
    "<!channel>",
    "<!here|here>",
    "<!everyone>",
    "<@U0VICTIM>",
    "<#C0SECRET>",
    "<!subteam^S0GROUP>",
    "<https://evil.example|click>",
    "&amp;",
    "&lt;",
    "&",
    "<",
    ">",
    "|",
    "*",
    "`",
    "\n\n",
    "\n",
    " ",
    "🎉",
]
SETTINGS = settings(max_examples=40, deadline=None)

pieces = st.one_of(st.sampled_from(HOSTILE), st.text(max_size=40))
# Arbitrary text from a few pieces, each possibly repeated many times: cheap to draw,
# and it reaches far past every limit (up to a few hundred thousand characters).
texts = st.lists(st.tuples(pieces, st.sampled_from([1, 1, 1, 7, 100, 3000])), max_size=8).map(
    lambda parts: "".join(piece * times for piece, times in parts)
)
recipes = st.from_regex(rf"[a-z0-9][a-z0-9-]{{0,{NAME_MAX_LENGTH - 1}}}", fullmatch=True)
platforms = st.text(min_size=1, max_size=PLATFORM_MAX_LENGTH).filter(lambda p: "|" not in p)
user_ids = st.one_of(st.from_regex(r"[UW][A-Z0-9]{2,12}", fullmatch=True), texts)
slack_ids = st.from_regex(r"[UWS][A-Z0-9]{2,12}", fullmatch=True)
moments = st.datetimes(
    min_value=datetime(2000, 1, 1), max_value=datetime(2099, 1, 1), timezones=st.just(UTC)
)


DECIDED = [
    DraftState.APPROVED,
    DraftState.PUBLISHED,
    DraftState.REJECTED,
    DraftState.EXPIRED,
    DraftState.SUPERSEDED,
]


@st.composite
def draft_views(draw: st.DrawFn) -> ReviewItem:
    recipe, platform = draw(recipes), draw(platforms)
    slot = draw(moments)
    version = draw(st.integers(1, 10_000))
    run = run_id(recipe, slot.replace(tzinfo=None), draw(st.sampled_from([1, 2])))
    return ReviewItem(
        draft_key=draft_key(platform, run, version),
        run_id=run,
        state=DraftState.READY,
        revision=draw(st.integers(1, 10_000)),
        text=draw(texts),
        recipe=recipe,
        platform=platform,
        slot_at=slot,
        version=version,
        model=draw(st.one_of(st.none(), texts)),
        input_tokens=draw(st.integers(0, 10**9)),
        output_tokens=draw(st.integers(0, 10**9)),
        decided_by=None,
        decided_at=None,
        decision_reason=draw(st.one_of(st.none(), texts)),  # why it is back for review
    )


@st.composite
def run_ids(draw: st.DrawFn) -> str:
    return run_id(draw(recipes), draw(moments).replace(tzinfo=None), draw(st.sampled_from([1, 2])))


# --- the checks ---------------------------------------------------------------------------

ALLOWED_ANGLES = re.compile(r"<!date\^\d+\^\{date_short_pretty\} \{time\}\|[^<>]*>")


def texts_in(node: Any) -> list[str]:
    """Every `text` string anywhere in a payload (sections, contexts, buttons, labels)."""
    if isinstance(node, dict):
        found = [node["text"]] if isinstance(node.get("text"), str) else []
        return found + [t for value in node.values() for t in texts_in(value)]
    if isinstance(node, list):
        return [t for item in node for t in texts_in(item)]
    return []


def assert_no_live_mention(node: Any, allowed: set[str]) -> None:
    """A `<…>` in any text is a date we built or a mention of someone named on purpose."""
    for text in texts_in(node):
        for angle in re.findall(r"<[^>]*>?", text):
            assert ALLOWED_ANGLES.fullmatch(angle) or angle in allowed, (angle, text[:200])


def assert_valid_blocks(blocks: list[dict[str, Any]], block_limit: int = BLOCK_LIMIT) -> None:
    assert 1 <= len(blocks) <= block_limit
    for raw in blocks:
        block = Block.parse(raw)
        assert block is not None, raw
        block.to_dict()  # runs slack_sdk's validators, nested elements included
        if raw["type"] == "section":
            assert 1 <= len(raw["text"]["text"]) <= TEXT_LIMIT
        if raw["type"] == "context":
            assert 1 <= len(raw["elements"]) <= 10
            assert all(1 <= len(e["text"]) <= TEXT_LIMIT for e in raw["elements"])
        if raw["type"] == "actions":
            for element in raw["elements"]:
                assert len(element["value"]) <= 2000 and len(element["action_id"]) <= 255
        assert len(raw.get("block_id", "")) <= 255


def assert_valid_message(text: str, blocks: list[dict[str, Any]], allowed: set[str]) -> None:
    assert 1 <= len(text) <= FALLBACK_LIMIT
    assert not re.search(r"&[a-z]{0,3}$", text), "the fallback ends in a cut entity"
    assert_valid_blocks(blocks)
    assert_no_live_mention({"text": text, "blocks": blocks}, allowed)


def assert_valid_modal(modal: dict[str, Any]) -> None:
    view = View(**modal)
    view.to_dict()  # title, submit, close, blocks, private_metadata, callback_id
    assert_valid_blocks(modal["blocks"], MODAL_BLOCK_LIMIT)
    assert len(modal["private_metadata"]) <= 3000
    assert_no_live_mention(modal["blocks"], set())


def model_sections_are_verbatim(blocks: list[dict[str, Any]], view_text: str) -> None:
    escaped = escape_mrkdwn(view_text)
    for block in blocks:
        text = block.get("text", {})
        shown = text.get("text") or ""
        if block["type"] == "section" and shown.strip() and shown in escaped:
            assert text.get("verbatim") is True, shown[:80]


# --- the builders ---------------------------------------------------------------------------


@SETTINGS
@given(draft_views())
def test_review_message_fits_whatever_the_draft(view: ReviewItem) -> None:
    text, blocks = review_message(view)
    assert_valid_message(text, blocks, set())
    model_sections_are_verbatim(blocks[1:], view.text)
    shown = sum(len(b["text"]["text"]) for b in blocks if b["type"] == "section")
    assert shown <= DRAFT_TEXT_BUDGET + 2 * TEXT_LIMIT  # the draft's budget plus heading/notes


@SETTINGS
@given(draft_views(), st.sampled_from(DECIDED), st.one_of(st.none(), user_ids), moments)
def test_decided_message_fits_whatever_the_decision(
    view: ReviewItem, state: DraftState, by: str | None, at: datetime
) -> None:
    decision = replace(view, state=state, decided_by=by, decided_at=at)
    text, blocks = decided_message(decision)
    allowed = {f"<@{by}>"} if by and re.fullmatch(r"[UW][A-Z0-9]+", by) else set()
    assert_valid_message(text, blocks, allowed)


@SETTINGS
@given(draft_views())
def test_reject_and_edit_modals_fit_or_refuse_plainly(view: ReviewItem) -> None:
    assert_valid_modal(reject_modal(view.draft_key, view.revision))
    try:
        modal = edit_modal(view.draft_key, view.revision, view.text)
    except ValueError:
        assert len(view.text) > INPUT_LIMIT * (MODAL_BLOCK_LIMIT - 3) // 2
        return
    assert_valid_modal(modal)


@SETTINGS
@given(texts, st.text(max_size=300))
def test_publication_fits_or_is_refused_never_cut(text: str, effect_key: str) -> None:
    try:
        message = publication_message(text, effect_key)
    except MessageTooLong:
        assert len(escape_mrkdwn(text)) > DRAFT_TEXT_BUDGET
        return
    assert_valid_message(message["text"], message["blocks"], set())
    shown = "".join(b["text"]["text"] for b in message["blocks"])
    assert len(shown) >= len(escape_mrkdwn(text).replace("\n", "").replace(" ", "")) or not text
    assert all(b["text"].get("verbatim") for b in message["blocks"] if b["text"]["text"].strip())


@SETTINGS
@given(run_ids(), recipes, texts, st.lists(texts, max_size=5), st.lists(slack_ids, max_size=30))
def test_alert_fits_whatever_the_facts(
    run: str, recipe: str, headline: str, facts: list[str], mentions: list[str]
) -> None:
    message = alert_message(RunAlert(run, recipe, headline, facts, mentions))
    allowed = {f"<@{m}>" for m in mentions} | {f"<!subteam^{m}>" for m in mentions}
    assert_valid_message(message["text"], message["blocks"], allowed)
    assert_valid_blocks([alert_actions(run)])


@SETTINGS
@given(run_ids(), texts, user_ids, st.integers(0, 60))
def test_an_alert_resolved_after_many_reminders_still_fits(
    run: str, outcome_piece: str, by: str, reminders: int
) -> None:
    """The Cancel outcome lists every completed effect: after dozens of reminders it is
    long, and it quotes destinations' external ids, which must stay inert."""
    blocks = alert_message(RunAlert(run, "r", "headline", ["fact"], ["U0ONCALL"]))["blocks"]
    receipts = ", ".join(f"alert|{run}|reminder:{n} → {outcome_piece}" for n in range(reminders))
    outcome = f"`{run}` cancelled. Effects already completed: {receipts or 'none'}."
    resolved = resolved_blocks(blocks, outcome, by=by)
    allowed = {"<@U0ONCALL>"} | ({f"<@{by}>"} if re.fullmatch(r"[UW][A-Z0-9]+", by) else set())
    assert_valid_message("resolved", resolved, allowed)
    assert not [b for b in resolved if b["type"] == "actions"]


@SETTINGS
@given(texts)
def test_notices_fit(text: str) -> None:
    assert_valid_blocks(notice_blocks(escape_mrkdwn(text)))


def test_help_fits() -> None:
    assert_valid_blocks(notice_blocks(help_text()))


def test_a_webhook_id_that_looks_like_a_mention_stays_inert() -> None:
    blocks = alert_message(RunAlert("r@2026-11-23T09:00", "r", "h", ["f"], []))["blocks"]
    outcome = "`r@2026-11-23T09:00` cancelled. Effects already completed: k → <!channel>."
    [note] = resolved_blocks(blocks, outcome, by="U0ADMIN")[-1]["elements"]
    assert "<!channel>" not in note["text"]
    assert note["text"].startswith("<@U0ADMIN>: ")


@pytest.mark.parametrize("length", [DRAFT_TEXT_BUDGET + 1, 40_000])
def test_a_publication_longer_than_the_budget_is_refused(length: int) -> None:
    with pytest.raises(MessageTooLong):
        publication_message("a" * length, "k")


def test_fallback_text_never_ends_in_half_an_entity() -> None:
    message = publication_message("&" * 2000, "k")
    assert message["text"].endswith("&amp;…") or message["text"].endswith("…")
    assert not re.search(r"&[a-z]{0,3}…$", message["text"])
