"""`/galley post`'s modal (docs/design.md §37): the recipe whose targets and stages the post
uses (a select), its text, a text of its own for each of that recipe's targets (optional),
and an optional time (a `datetimepicker`); and its submission read back. Pure functions of
the config and Slack's `view.state.values`: the listener in bot/handlers.py calls core.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from bot.block_kit import INPUT_LIMIT, MODAL_BLOCK_LIMIT, context
from core.setup.config import Recipe

POST_MODAL = "galley_post_modal"
RECIPE_BLOCK, TEXT_BLOCK, AT_BLOCK = "recipe", "text", "at"
TARGET_BLOCK = "target_"  # `target_0`, `target_1`, …: the metadata names each one's target
MAX_OPTIONS = 100  # a static_select's options


@dataclass(frozen=True)
class PostForm:
    """What the person typed: the recipe chosen, the text, texts per target, the time."""

    recipe: str
    text: str
    targets: Mapping[str, str]
    at: datetime | None


def post_modal(recipes: Sequence[Recipe], chosen: Recipe) -> dict[str, Any]:
    """The form for a post to `chosen`'s targets; another recipe may be picked, its own
    targets then taking the common text (a version per target needs the recipe named:
    `/galley post <recipe>`)."""
    options = [_option(r.name) for r in recipes[:MAX_OPTIONS]]
    select = {
        "type": "static_select",
        "action_id": RECIPE_BLOCK,
        "options": options,
        "initial_option": _option(chosen.name),
    }
    targets = [t.target for t in chosen.targets][: MODAL_BLOCK_LIMIT - 5]
    blocks: list[dict[str, Any]] = [
        context("Written by you, reviewed like a draft, published once at its time."),
        _input(RECIPE_BLOCK, "Recipe", select),
        _input(TEXT_BLOCK, "Text for every target", _text(TEXT_BLOCK), optional=False),
        *(
            _input(f"{TARGET_BLOCK}{n}", f"Text for {target} (optional)", _text("text"))
            for n, target in enumerate(targets)
        ),
        _input(
            AT_BLOCK,
            "Publish at (empty: once approved)",
            {"type": "datetimepicker", "action_id": AT_BLOCK},
        ),
    ]
    metadata = json.dumps({"recipe": chosen.name, "targets": targets}, separators=(",", ":"))
    return {
        "type": "modal",
        "callback_id": POST_MODAL,
        "private_metadata": metadata,
        "title": _plain("Write a post"),
        "submit": _plain("Send to review"),
        "close": _plain("Cancel"),
        "blocks": blocks,
    }


def read_post(values: Mapping[str, Any], metadata: str) -> PostForm:
    """The submission: texts per target only where typed, and only while the recipe chosen
    is the one the form was opened for (its fields name that recipe's targets)."""
    try:
        opened = json.loads(metadata)
        targets = [str(t) for t in opened.get("targets", [])]
        opened_for = str(opened.get("recipe", ""))
    except (ValueError, AttributeError):
        targets, opened_for = [], ""
    chosen = (values.get(RECIPE_BLOCK, {}).get(RECIPE_BLOCK) or {}).get("selected_option") or {}
    recipe = str(chosen.get("value") or opened_for)
    texts = {
        target: _value(values, f"{TARGET_BLOCK}{n}", "text") for n, target in enumerate(targets)
    }
    own = {t: text for t, text in texts.items() if text.strip()} if recipe == opened_for else {}
    picked = (values.get(AT_BLOCK, {}).get(AT_BLOCK) or {}).get("selected_date_time")
    at = (
        datetime.fromtimestamp(int(picked), UTC)
        if isinstance(picked, int | str) and str(picked).isdigit()
        else None
    )
    return PostForm(recipe, _value(values, TEXT_BLOCK, TEXT_BLOCK), own, at)


def _value(values: Mapping[str, Any], block: str, action: str) -> str:
    value = (values.get(block, {}).get(action) or {}).get("value")
    return value if isinstance(value, str) else ""


def _option(name: str) -> dict[str, Any]:
    return {"text": _plain(name[:75]), "value": name}


def _text(action_id: str) -> dict[str, Any]:
    return {
        "type": "plain_text_input",
        "action_id": action_id,
        "multiline": True,
        "max_length": INPUT_LIMIT,
    }


def _input(
    block_id: str, label: str, element: dict[str, Any], *, optional: bool = True
) -> dict[str, Any]:
    return {
        "type": "input",
        "block_id": block_id,
        "optional": optional,
        "label": _plain(label),
        "element": element,
    }


def _plain(text: str) -> dict[str, Any]:
    return {"type": "plain_text", "text": text, "emoji": True}
