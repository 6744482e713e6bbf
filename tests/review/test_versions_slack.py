"""A set reviewed in Slack (docs/design.md §30), through signed interactions against a real
`Bot` and the fake Slack and Anthropic APIs: a 25-part thread's message stays within Block
Kit's limits with **Show all** opening the whole set, and Edit's per-part fields saved
as one new revision of the whole set. Both backends."""

from __future__ import annotations

import json
from typing import Any

import pytest

from bot.block_kit import BLOCK_LIMIT
from bot.version_blocks import ACTION_SHOW_ALL
from core.post_body import PostBody
from tests.fakes.anthropic_api import ok
from tests.harness.slack_harness import EDIT, PEOPLE, Harness, StartBot, eventually
from tests.harness.slack_requests import text_input, view_submission

BLUESKY = (
    'publish = { to = "bluesky", handle = "acme.bsky.social", service = "http://127.0.0.1:9" }'
)
PARTS = [f"Part {n}: " + "a week of shipping, " * 14 for n in range(1, 26)]  # 25 parts of ~290


def opened_view(h: Harness, action_id: str) -> dict[str, Any]:
    before = len(h.calls("views.open"))
    assert h.click(action_id, "U0EDITOR").status_code == 200
    opened = eventually(lambda: h.calls("views.open")[before:], f"the modal of {action_id}")
    view: dict[str, Any] = opened[0].params["view"]
    return view


def test_a_long_thread_shows_all_in_a_modal_and_one_edited_part_saves_the_whole_set(
    start_bot: StartBot, db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GALLEY_BLUESKY_PASSWORD", "app-pass")  # else the bot refuses to start
    h = start_bot(db_url, slack=PEOPLE, publish=BLUESKY, defaults="thread = 25")
    h.anthropic.script(ok(text=json.dumps({"versions": {"*": PARTS}})))
    key, message = h.draft_and_post()
    assert len(message["blocks"]) <= BLOCK_LIMIT
    assert ACTION_SHOW_ALL in json.dumps(message["blocks"])

    shown = json.dumps(opened_view(h, ACTION_SHOW_ALL)["blocks"], ensure_ascii=False)
    assert all(part.strip() in shown for part in PARTS) and "25/25" in shown

    view = opened_view(h, EDIT)
    fields = [b for b in view["blocks"] if b["type"] == "input"]
    assert len(fields) == 25
    values = {
        f["block_id"]: {"text": text_input(f["element"].get("initial_value"))} for f in fields
    }
    values["version|*|3|0"] = {"text": text_input("Part 3, edited.")}
    submitted = view_submission(
        user="U0EDITOR",
        callback_id=view["callback_id"],
        private_metadata=view["private_metadata"],
        values=values,
    )
    assert h.sender.interactive(submitted).status_code == 200
    eventually(lambda: h.draft_row(key).revision == 2, "revision 2")
    parts = PostBody.parse(h.draft_row(key).text or "").versions["*"]
    assert parts == (
        *[p.strip() for p in PARTS[:2]],
        "Part 3, edited.",
        *[p.strip() for p in PARTS[3:]],
    )
