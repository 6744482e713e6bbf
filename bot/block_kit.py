"""Block Kit's pieces and Slack's limits, shared by every module that builds blocks
(bot/blocks.py, bot/review_modals.py, bot/version_blocks.py, bot/alert_blocks.py): a
section, a context line, plain text, a button's value naming one revision, raw text cut
into Edit inputs. Pure functions, no I/O."""

from __future__ import annotations

import json
from typing import Any

from bot.mrkdwn import clip_mrkdwn, mrkdwn_object

EDIT_MODAL = "galley_edit_modal"
REVIEW_BLOCK_ID = "galley_review"
BLOCK_LIMIT = 50  # blocks in one message
# Slack answers `msg_blocks_too_long` well below 50 full sections (reported near 13,000
# characters in total), so the draft text shown in one message has its own budget.
DRAFT_TEXT_BUDGET = 12_000
BUTTON_VALUE_LIMIT = 2000  # characters in a button's value
CONTEXT_LIMIT = 3000  # characters of one context element's text
INPUT_LIMIT = 3000  # plain_text_input max_length
MODAL_BLOCK_LIMIT = 100
LABEL_LIMIT = 100  # characters of a recipe, platform, model or user shown in a line
REASON_LIMIT = 500  # characters of a rejection reason kept in the message


def button_value(draft_key: str, revision: int) -> str:
    """Compact JSON naming one revision; ValueError if Slack could not carry it."""
    value = json.dumps(
        {"key": draft_key, "rev": revision}, separators=(",", ":"), ensure_ascii=False
    )
    if len(value) >= BUTTON_VALUE_LIMIT:
        raise ValueError(f"draft key too long for a Slack button value: {draft_key[:80]}…")
    return value


def edit_pieces(text: str) -> list[str]:
    """Raw text in pieces of at most INPUT_LIMIT characters. A cut never sits next to
    whitespace (when it can help it), so an input that trims its value loses nothing."""
    parts: list[str] = []
    start = 0
    while len(text) - start > INPUT_LIMIT:
        hard = start + INPUT_LIMIT
        clean = (
            at
            for at in range(hard, start + INPUT_LIMIT // 2, -1)
            if not (text[at - 1].isspace() or text[at].isspace())
        )
        end = next(clean, hard)
        parts.append(text[start:end])
        start = end
    if start < len(text):
        parts.append(text[start:])
    return parts


def section(mrkdwn: str) -> dict[str, Any]:
    """One mrkdwn section, verbatim (`mrkdwn_object`): Slack links nothing it was not told to."""
    return {"type": "section", "text": mrkdwn_object(mrkdwn)}


def context(mrkdwn: str, block_id: str | None = None) -> dict[str, Any]:
    """One mrkdwn context element, clipped to fit."""
    text = clip_mrkdwn(mrkdwn, CONTEXT_LIMIT)
    block = {"type": "context", "elements": [mrkdwn_object(text)]}
    return block | ({"block_id": block_id} if block_id else {})


def plain_text(text: str) -> dict[str, Any]:
    return {"type": "plain_text", "text": text, "emoji": True}
