"""A draft's images in its review message (docs/design.md §32), as pure functions of
core's `ReviewItem`: one line per image (its name, size and alt text, or that it has
none) with a Remove button, then why the images block approval, if they do.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from bot.mrkdwn import inert, mrkdwn_object
from core.images.limits import size_in_words
from core.ports import ReviewItem, ShownImage
from core.post_body import BodyUnreadable, ImageRef, PostBody

ACTION_REMOVE_IMAGE = "galley_remove_image"
NAME_LIMIT = 80
ALT_LIMIT = 400
CONTEXT_LIMIT = 2000


def image_blocks(item: ReviewItem, *, removable: bool) -> list[dict[str, Any]]:
    """The image lines, each with Remove while the draft waits for review."""
    blocks = [_image_line(item, image, removable) for image in item.images]
    if item.image_problems:
        text = inert(" ".join(item.image_problems), CONTEXT_LIMIT)
        blocks.append({"type": "context", "elements": [mrkdwn_object(f":warning: {text}")]})
    return blocks


def text_beside_images(item: ReviewItem) -> ReviewItem:
    """A draft of one text with images shown as that text (its images have their own
    lines), never as the stored body's JSON. Any other shape is left as it is."""
    try:
        body = PostBody.parse(item.text)
    except BodyUnreadable:
        return item
    parts = list(body.versions.values())
    if not body.images or len(parts) != 1 or len(parts[0]) != 1:
        return item
    return replace(item, text=parts[0][0])


def remove_value(draft_key: str, revision: int, sha256: str) -> str:
    return json.dumps({"key": draft_key, "rev": revision, "img": sha256}, separators=(",", ":"))


def parse_remove_value(value: str) -> tuple[str, int, str]:
    """(draft key, revision, image hash) of a Remove button; ValueError for anything else."""
    try:
        decoded = json.loads(value)
        key, rev, sha = decoded["key"], decoded["rev"], decoded["img"]
    except (TypeError, KeyError, json.JSONDecodeError) as exc:
        raise ValueError(f"not a Remove button value: {value[:80]!r}") from exc
    if not (isinstance(key, str) and isinstance(rev, int) and isinstance(sha, str)):
        raise ValueError(f"not a Remove button value: {value[:80]!r}")
    return key, rev, sha


def _image_line(item: ReviewItem, image: ShownImage, removable: bool) -> dict[str, Any]:
    size = "bytes not stored" if image.size is None else size_in_words(image.size)
    shape = f" · {image.width}x{image.height}" if image.width and image.height else ""
    alt = f"alt: {inert(image.alt, ALT_LIMIT)}" if image.alt else ":warning: no alt text yet"
    text = f":frame_with_picture: *{inert(image.name, NAME_LIMIT)}* · {size}{shape} · {alt}"
    block: dict[str, Any] = {"type": "section", "text": mrkdwn_object(text)}
    if removable:
        block["accessory"] = {
            "type": "button",
            "text": {"type": "plain_text", "text": "Remove", "emoji": True},
            "action_id": ACTION_REMOVE_IMAGE,
            "value": remove_value(item.draft_key, item.revision, image.sha256),
        }
    return block


ALT_FIELD = "alt_"  # an Edit modal's alt text field: `alt_<first 16 hex of the image's hash>`
ALT_INPUT_LIMIT = 1500  # Mastodon's, the tightest a platform states


def with_alt_fields(modal: dict[str, Any], images: Sequence[ImageRef]) -> dict[str, Any]:
    """The Edit modal with a field per image for its alt text (docs/design.md §32)."""
    fields = [_alt_field(image) for image in images]
    return modal | {"blocks": [*modal["blocks"], *fields]} if fields else modal


def alts_of(values: dict[str, Any]) -> dict[str, str]:
    """The alt texts an Edit modal was submitted with, by hash prefix."""
    found = {}
    for block_id, actions in values.items():
        if block_id.startswith(ALT_FIELD):
            value = (actions.get("alt") or {}).get("value")
            found[block_id.removeprefix(ALT_FIELD)] = value if isinstance(value, str) else ""
    return found


def _alt_field(image: ImageRef) -> dict[str, Any]:
    element: dict[str, Any] = {
        "type": "plain_text_input",
        "action_id": "alt",
        "multiline": True,
        "max_length": ALT_INPUT_LIMIT,
    }
    if image.alt:
        element["initial_value"] = image.alt
    label = f"Alt text: {image.name}"[:150]  # Slack's limit for a label
    return {
        "type": "input",
        "block_id": f"{ALT_FIELD}{image.sha256[:16]}",
        "optional": True,
        "label": {"type": "plain_text", "text": label, "emoji": True},
        "element": element,
    }
