"""A set's review message and modals (docs/design.md §30): each version under its label and
count, a thread's parts numbered, within Block Kit's limits however long the set (the rest
behind **Show all**), and Edit's one field per part saved as one whole set."""

from __future__ import annotations

import json
from typing import Any

from bot.blocks import draft_message, escape_mrkdwn
from bot.review_facts import fit_line
from bot.version_blocks import (
    ACTION_SHOW_ALL,
    edit_set_modal,
    edited_set_text,
    edited_versions,
    show_all_modal,
)
from core.ports import Fit
from core.post_body import PostBody
from tests.bot.test_block_limits import assert_valid_message, assert_valid_modal
from tests.bot.test_blocks import HOSTILE, view

BLUESKY, MASTODON = "bluesky:acme.bsky.social", "mastodon:mastodon.social"


def blocks_text(blocks: list[dict[str, Any]]) -> str:
    return json.dumps(blocks, ensure_ascii=False)


def test_each_version_shows_its_label_count_and_numbered_parts() -> None:
    body = PostBody({BLUESKY: ("one", "x" * 320, "three"), MASTODON: ("toot",)})
    fits = (
        Fit(BLUESKY, "Bluesky, part 1/3", 3, 300),
        Fit(BLUESKY, "Bluesky, part 2/3", 320, 300),
        Fit(BLUESKY, "Bluesky, part 3/3", 5, 300),
        Fit(MASTODON, "Mastodon (mastodon.social)", 4, 500),
    )
    text, blocks = draft_message(view(body.to_text(), fits=fits))
    shown = blocks_text(blocks)
    assert "*Bluesky* · 2/3 · Bluesky 320/300 ✗" in shown
    assert "*Bluesky* · 1/3 · Bluesky 3/300" in shown
    assert "*Mastodon (mastodon.social)* · Mastodon (mastodon.social) 4/500" in shown
    assert ACTION_SHOW_ALL not in shown  # a short set is shown whole
    assert text.startswith("Draft for review: one") and "galley-post" not in text
    assert_valid_message(text, blocks, set())


def test_a_long_set_stays_within_the_limits_and_shows_all_in_a_modal() -> None:
    body = PostBody(
        {
            BLUESKY: tuple(f"{n} {HOSTILE} " + "b" * 150 for n in range(12)),
            MASTODON: tuple(f"{n} {HOSTILE} " + "m" * 400 for n in range(12)),
            "slack:C0ANNOUNCE": tuple(f"{n} " + "s" * 2500 for n in range(6)),
        }
    )
    item = view(body.to_text())
    text, blocks = draft_message(item)
    assert_valid_message(text, blocks, set())
    assert ACTION_SHOW_ALL in blocks_text(blocks)
    modal = show_all_modal(item)
    assert_valid_modal(modal)
    shown = blocks_text(modal["blocks"])
    assert all(escape_mrkdwn(part) in shown for _, part in body.labelled_parts())
    assert "12/12" in shown and "6/6" in shown


def test_edit_has_a_field_per_part_and_saves_the_whole_set() -> None:
    body = PostBody({BLUESKY: ("one", "two"), MASTODON: ("toot " * 700,)})  # 3,500: two boxes
    item = view(body.to_text())
    modal = edit_set_modal(item, revision=2)
    assert_valid_modal(modal)
    fields = [b for b in modal["blocks"] if b["type"] == "input"]
    assert len(fields) == 4
    values = {
        f["block_id"]: {
            "text": {"type": "plain_text_input", "value": f["element"].get("initial_value", "")}
        }
        for f in fields
    }
    values[f"version|{BLUESKY}|2|0"]["text"]["value"] = "two, edited"
    versions = edited_versions(values)
    assert versions == {BLUESKY: ["one", "two, edited"], MASTODON: ["toot " * 700]}
    assert edited_set_text(item.text, versions) == body.with_versions(versions).to_text()

    values[f"version|{BLUESKY}|1|0"]["text"]["value"] = ""
    values[f"version|{BLUESKY}|2|0"]["text"]["value"] = " "
    emptied = edited_versions(values)
    assert emptied is not None and edited_set_text(item.text, emptied) is None
    assert edited_versions({"part_0": {"text": {"value": "plain"}}}) is None


def test_a_threads_fit_line_names_the_parts_over_a_limit_and_counts_the_rest() -> None:
    counts = [320 if n == 7 else 200 for n in range(1, 26)]
    fits = [Fit(BLUESKY, f"Bluesky, part {n}/25", c, 300) for n, c in enumerate(counts, 1)]
    assert fit_line(fits) == "Bluesky, part 7/25 320/300 ✗ · 24 of 25 parts fit"
    one_each = [Fit(BLUESKY, "Bluesky", 287, 300), Fit(MASTODON, "Mastodon", 512, 500)]
    assert fit_line(one_each) == "Bluesky 287/300 · Mastodon 512/500 ✗"
