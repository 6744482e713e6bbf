"""The review message's modals, built and read back: Reject (an optional reason), Redraft
(what to change) and Edit (the raw draft in boxes of at most 3,000 characters, then
"Add more"). Pure functions returning plain dicts, no I/O; a set's modals are in
bot/version_blocks.py.
"""

from __future__ import annotations

import re
from typing import Any

from bot.block_kit import (
    EDIT_MODAL,
    INPUT_LIMIT,
    MODAL_BLOCK_LIMIT,
    REASON_LIMIT,
    button_value,
    context,
    edit_pieces,
    plain_text,
)

REJECT_MODAL = "galley_reject_modal"
REDRAFT_MODAL = "galley_redraft_modal"
NOTE_LIMIT = 1000  # characters of a redraft note
_PART_ID = re.compile(r"part_(\d+)")
ADD_MORE_ID = "add_more"  # the Edit modal's box for text added after the draft


def reject_modal(draft_key: str, revision: int) -> dict[str, Any]:
    reason = _text_input("reason", "reason", "Reason (optional)", max_length=REASON_LIMIT)
    return _modal(
        REJECT_MODAL, button_value(draft_key, revision), "Reject draft", "Reject", [reason]
    )


def reject_reason(view_state_values: dict[str, Any]) -> str | None:
    """The reason typed into `reject_modal`, stripped; None when blank or absent."""
    reason = _input_value(view_state_values, "reason", "reason").strip()
    return reason or None


def redraft_modal(draft_key: str, revision: int) -> dict[str, Any]:
    """A modal asking what the model should change in `revision`."""
    note = _text_input("note", "note", "What should change?", max_length=NOTE_LIMIT)
    note["optional"] = False
    hint = context("The model rewrites the current text with your note; one click, one call.")
    value = button_value(draft_key, revision)
    return _modal(REDRAFT_MODAL, value, "Redraft", "Redraft", [hint, note])


def redraft_note(view_state_values: dict[str, Any]) -> str:
    """The note typed into `redraft_modal`, stripped."""
    return _input_value(view_state_values, "note", "note").strip()


def edit_modal(draft_key: str, revision: int, text: str) -> dict[str, Any]:
    """A modal holding the raw draft in parts of at most 3,000 characters, plus an
    empty part for additions. ValueError if the draft needs more parts than fit."""
    parts = edit_pieces(text)
    hint = context(
        "Long drafts are split across boxes; the boxes are joined exactly as they are, "
        "with nothing added between them."
    )
    head = [hint] if len(parts) > 1 else []
    if len(head) + len(parts) + 1 > MODAL_BLOCK_LIMIT:
        raise ValueError(f"draft of {len(text):,} characters is too long to edit in Slack")
    count = len(parts)
    labels = [f"Draft, part {i + 1} of {count}" if count > 1 else "Draft" for i in range(count)]
    inputs = [_text_input(f"part_{i}", "text", labels[i], part) for i, part in enumerate(parts)]
    addition = _text_input(ADD_MORE_ID, "text", "Add more (optional)")
    addition["hint"] = plain_text(
        "Added after the draft as a new paragraph (a blank line between)."
    )
    inputs.append(addition)
    value = button_value(draft_key, revision)
    return _modal(EDIT_MODAL, value, "Edit draft", "Save", [*head, *inputs])


def edited_text(view_state_values: dict[str, Any]) -> str:
    """The text of `edit_modal`: the draft's boxes joined in order with nothing between
    (one text split to fit), then "Add more" as a paragraph of its own."""
    numbered = sorted(
        (int(match.group(1)), block_id)
        for block_id in view_state_values
        if (match := _PART_ID.fullmatch(block_id))
    )
    draft = "".join(_input_value(view_state_values, block_id, "text") for _, block_id in numbered)
    return with_addition(draft, _input_value(view_state_values, ADD_MORE_ID, "text"))


def with_addition(draft: str, addition: str) -> str:
    """`addition` after `draft` as a person means it: a new paragraph (a blank line
    between), never glued to the draft's last word; blank ends dropped."""
    added = addition.strip()
    if not added:
        return draft
    if not draft.strip():
        return added
    return f"{draft.rstrip()}\n\n{added}"


def _input_value(values: dict[str, Any], block_id: str, action_id: str) -> str:
    value = values.get(block_id, {}).get(action_id, {}).get("value")
    return value if isinstance(value, str) else ""


def _text_input(
    block_id: str, action_id: str, label: str, initial: str = "", max_length: int = INPUT_LIMIT
) -> dict[str, Any]:
    # Optional, so a person may empty a part; an empty edit as a whole is the caller's
    # "nothing to save". Slack refuses an empty initial_value, so none is sent.
    element = {"type": "plain_text_input", "action_id": action_id, "multiline": True}
    element |= {"max_length": max_length} | ({"initial_value": initial} if initial else {})
    return {
        "type": "input",
        "block_id": block_id,
        "optional": True,
        "label": plain_text(label),
        "element": element,
    }


def _modal(
    callback_id: str, metadata: str, title: str, submit: str, blocks: list[dict[str, Any]]
) -> dict[str, Any]:
    return {
        "type": "modal",
        "callback_id": callback_id,
        "private_metadata": metadata,
        "title": plain_text(title),
        "submit": plain_text(submit),
        "close": plain_text("Cancel"),
        "blocks": blocks,
    }
