"""Block Kit for a draft that holds a set (docs/design.md §30): each version under its
target's label with its count, a thread's parts numbered "1/3"; a set too long for one
message ends with **Show all**, a modal holding the whole set; Edit opens one field per
part. Pure functions, no I/O; model text is escaped as bot/blocks.py escapes it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from bot.block_kit import (
    BLOCK_LIMIT,
    DRAFT_TEXT_BUDGET,
    EDIT_MODAL,
    INPUT_LIMIT,
    LABEL_LIMIT,
    MODAL_BLOCK_LIMIT,
    REVIEW_BLOCK_ID,
    button_value,
    context,
    edit_pieces,
    section,
)
from bot.mrkdwn import SECTION_LIMIT, escape_mrkdwn, inert, section_spans
from core.ports import Fit, ReviewItem
from core.post_body import EVERY_TARGET, PostBody

ACTION_SHOW_ALL = "galley_show_all"
SHOW_ALL_MODAL = "galley_show_all_modal"
EVERY_TARGET_LABEL = "Every target"
# An Edit field's block id names the version, the part and the box (a part longer than
# one input is split across boxes, joined with nothing added): "version|<key>|<n>|<box>".
_FIELD = re.compile(r"^version\|(.+)\|(\d+)\|(\d+)$")


def is_set(text: str) -> bool:
    """Whether a draft's text holds more than one text (versions or thread parts)."""
    return not PostBody.parse(text).is_single()


def set_blocks(item: ReviewItem, trailing: int) -> list[dict[str, Any]]:
    """The heading, then each part under its label and count, leaving room for `trailing`
    blocks and within the message's text budget; a set that does not fit ends with the
    parts left out counted and a **Show all** button."""
    heading = section(
        f"*Draft for review* · {inert(item.recipe, LABEL_LIMIT)} · "
        f"{inert(item.platform, LABEL_LIMIT)}"
    )
    shown = [_part_blocks(head, text) for head, text in part_heads(item)]
    room = BLOCK_LIMIT - 1 - trailing
    if sum(map(len, shown)) <= room and _chars(shown) <= DRAFT_TEXT_BUDGET:
        return [heading, *(block for part in shown for block in part)]
    kept: list[list[dict[str, Any]]] = []
    for part in shown:  # whole parts only, two blocks kept for the note and the button
        if sum(map(len, kept)) + len(part) > room - 2 or _chars([*kept, part]) > DRAFT_TEXT_BUDGET:
            break
        kept.append(part)
    left = len(shown) - len(kept)
    note = context(f"_… {left} more part{'s' if left != 1 else ''}: Show all to read the set_")
    button = {
        "type": "button",
        "text": {"type": "plain_text", "text": "Show all", "emoji": True},
        "action_id": ACTION_SHOW_ALL,
        "value": button_value(item.draft_key, item.revision),
    }
    actions = {"type": "actions", "block_id": f"{REVIEW_BLOCK_ID}_set", "elements": [button]}
    return [heading, *(block for part in kept for block in part), note, actions]


def show_all_modal(item: ReviewItem) -> dict[str, Any]:
    """Every version and part of the set, read-only; past the modal's 100 blocks the
    rest is counted, for Edit to show."""
    blocks: list[dict[str, Any]] = []
    heads = part_heads(item)
    for index, (head, text) in enumerate(heads):
        part = _part_blocks(head, text)
        if len(blocks) + len(part) > MODAL_BLOCK_LIMIT - 1:
            blocks.append(context(f"_… {len(heads) - index} more parts: open Edit to read them_"))
            break
        blocks += part
    return {
        "type": "modal",
        "callback_id": SHOW_ALL_MODAL,
        "private_metadata": button_value(item.draft_key, item.revision),
        "title": {"type": "plain_text", "text": "The whole set", "emoji": True},
        "close": {"type": "plain_text", "text": "Close", "emoji": True},
        "blocks": blocks,
    }


def part_heads(item: ReviewItem) -> list[tuple[str, str]]:
    """(mrkdwn head, raw text) of every part: "*Bluesky* · 2/3 · Bluesky 280/300"."""
    body = PostBody.parse(item.text)
    heads = []
    for key, parts in body.versions.items():
        fits = _fits_of(key, body, item.fits)
        label = inert(_version_label(key, fits), LABEL_LIMIT)
        for number, text in enumerate(parts, 1):
            place = f" · {number}/{len(parts)}" if len(parts) > 1 else ""
            heads.append((f"*{label}*{place} · {_counts(fits, number, len(parts), text)}", text))
    return heads


def edit_set_modal(item: ReviewItem, revision: int) -> dict[str, Any]:
    """One field per part of every version (a part longer than one field split across
    boxes); saving writes one new revision of the whole set, if `revision` (the one the
    reviewer read) is still current. ValueError if it cannot fit."""
    body = PostBody.parse(item.text)
    fields: list[dict[str, Any]] = []
    for key, parts in body.versions.items():
        label = _version_label(key, _fits_of(key, body, item.fits))
        for number, text in enumerate(parts, 1):
            pieces = edit_pieces(text) or [""]
            for box, piece in enumerate(pieces):
                words = label + (f" · part {number}/{len(parts)}" if len(parts) > 1 else "")
                words += f" (box {box + 1} of {len(pieces)})" if len(pieces) > 1 else ""
                fields.append(_field(f"version|{key}|{number}|{box}", words[:LABEL_LIMIT], piece))
    hint = context("Each version and part has its own field; saving makes one new revision.")
    if len(fields) + 1 > MODAL_BLOCK_LIMIT:
        raise ValueError(f"a set of {len(fields)} fields is too long to edit in Slack")
    return {
        "type": "modal",
        "callback_id": EDIT_MODAL,
        "private_metadata": button_value(item.draft_key, revision),
        "title": {"type": "plain_text", "text": "Edit draft", "emoji": True},
        "submit": {"type": "plain_text", "text": "Save", "emoji": True},
        "close": {"type": "plain_text", "text": "Cancel", "emoji": True},
        "blocks": [hint, *fields],
    }


def edited_versions(values: Mapping[str, Any]) -> dict[str, list[str]] | None:
    """The versions typed into `edit_set_modal`, each part's boxes joined in order and
    blank parts left out; None when the modal was a plain draft's."""
    found: dict[str, dict[int, dict[int, str]]] = {}
    for block_id, actions in values.items():
        match = _FIELD.fullmatch(block_id)
        if match is None:
            continue
        value = actions.get("text", {}).get("value")
        key, number, box = match.group(1), int(match.group(2)), int(match.group(3))
        found.setdefault(key, {}).setdefault(number, {})[box] = (
            value if isinstance(value, str) else ""
        )
    if not found:
        return None
    versions = {}
    for key, numbered in found.items():
        parts = ["".join(boxes[b] for b in sorted(boxes)) for _, boxes in sorted(numbered.items())]
        versions[key] = [part for part in parts if part.strip()]
    return versions


def edited_set_text(current: str, versions: Mapping[str, Sequence[str]]) -> str | None:
    """The new stored text of an edited set: every version the draft holds, written whole
    (its images kept); None when a version was left empty or is missing."""
    body = PostBody.parse(current)
    if set(versions) != set(body.versions) or not all(versions.values()):
        return None
    return body.with_versions({key: tuple(versions[key]) for key in body.versions}).to_text()


def _fits_of(key: str, body: PostBody, fits: Sequence[Fit]) -> list[Fit]:
    """The measured fits of a version: its own target's, or for the version every target
    shares, those of the targets without a version of their own."""
    if key == EVERY_TARGET:
        return [fit for fit in fits if fit.target not in body.versions]
    return [fit for fit in fits if fit.target == key]


def _version_label(key: str, fits: Sequence[Fit]) -> str:
    if key == EVERY_TARGET:
        return EVERY_TARGET_LABEL
    return fits[0].label.split(", part ")[0] if fits else key


def _counts(fits: Sequence[Fit], number: int, total: int, text: str) -> str:
    """This part's count against each limit it is measured by, else its length."""
    by_target: dict[str, list[Fit]] = {}
    for fit in fits:
        by_target.setdefault(fit.target, []).append(fit)
    mine = [measured[number - 1] for measured in by_target.values() if len(measured) == total]
    if not mine:
        return f"{len(text):,} characters"
    return " · ".join(
        f"{escape_mrkdwn(fit.label.split(', part ')[0])} {fit.count:,}/{fit.limit:,}"
        + ("" if fit.fits else " ✗")
        for fit in mine
    )


def _part_blocks(head: str, text: str) -> list[dict[str, Any]]:
    escaped = escape_mrkdwn(text) or " "
    spans = section_spans(escaped, SECTION_LIMIT)
    return [context(head), *(section(escaped[s:e]) for s, e in spans)]


def _chars(parts: Sequence[Sequence[dict[str, Any]]]) -> int:
    return sum(len(block["text"]["text"]) for part in parts for block in part[1:])


def _field(block_id: str, label: str, initial: str) -> dict[str, Any]:
    element: dict[str, Any] = {"type": "plain_text_input", "action_id": "text", "multiline": True}
    element |= {"max_length": INPUT_LIMIT} | ({"initial_value": initial} if initial else {})
    return {
        "type": "input",
        "block_id": block_id,
        "optional": True,
        "label": {"type": "plain_text", "text": label, "emoji": True},
        "element": element,
    }
