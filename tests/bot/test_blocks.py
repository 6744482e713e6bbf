"""Block Kit rendering: untrusted text stays inert and every payload fits Slack's limits."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.alert_blocks import alert_message
from bot.block_kit import BLOCK_LIMIT, EDIT_MODAL, button_value
from bot.blocks import (
    ACTION_APPROVE,
    ACTION_EDIT,
    ACTION_REDRAFT,
    ACTION_REJECT,
    DRAFT_EVENT_TYPE,
    SECTION_LIMIT,
    decided_message,
    draft_metadata,
    escape_mrkdwn,
    help_text,
    notice_blocks,
    parse_button_value,
    review_message,
    split_for_sections,
)
from bot.review_facts import fact_lines
from bot.review_modals import REJECT_MODAL, edit_modal, edited_text, reject_modal, reject_reason
from core.ports import BasisItem, DraftBasis, ReviewItem, RunAlert, ShownImage
from core.states import DraftState

SLOT = datetime(2026, 10, 20, 9, 0, tzinfo=timezone(timedelta(hours=1)))
DECIDED_AT = datetime(2026, 10, 20, 10, 30, tzinfo=UTC)
KEY = "linkedin|weekly-update@2026-10-20T09:00|v3"
SEPARATORS = ("\n\n", "\n", " ", "")
HOSTILE = (
    "Hi <!channel> and <!here>, ping <!subteam^S1> and <@U1>: <https://evil.example|click> & go"
)


def view(text: str = "Hello world", **changes: Any) -> ReviewItem:
    """A draft waiting for review, as core hands it to the bot."""
    fields: dict[str, Any] = {
        "draft_key": KEY,
        "run_id": "weekly-update@2026-10-20T09:00",
        "state": DraftState.READY,
        "revision": 2,
        "text": text,
        "recipe": "weekly-update",
        "platform": "linkedin",
        "slot_at": SLOT,
        "version": 3,
        "model": "claude-sonnet-5-5",
        "input_tokens": 12,
        "output_tokens": 34,
        "decided_by": None,
        "decided_at": None,
        "decision_reason": None,
    }
    fields.update(changes)
    return ReviewItem(**fields)


def decided(
    state: DraftState, by: str | None, reason: str | None = None, text: str = "Hello world"
) -> ReviewItem:
    """The same draft once decided (or expired, or superseded) at DECIDED_AT."""
    return view(text, state=state, decided_by=by, decided_at=DECIDED_AT, decision_reason=reason)


def section_texts(blocks: list[dict[str, Any]]) -> list[str]:
    return [b["text"]["text"] for b in blocks if b["type"] == "section"]


def context_texts(blocks: list[dict[str, Any]]) -> list[str]:
    return [e["text"] for b in blocks if b["type"] == "context" for e in b["elements"]]


def live_tokens(payload: Any) -> list[str]:
    """Every `<!…`, `<@…`, `<#…` or `<http…` opening in the JSON of a payload."""
    return re.findall(r"<[!@#]\w*|<http", json.dumps(payload, ensure_ascii=False))


def assert_fits(blocks: list[dict[str, Any]]) -> None:
    assert len(blocks) <= BLOCK_LIMIT
    for text in section_texts(blocks) + context_texts(blocks):
        assert 0 < len(text) <= SECTION_LIMIT


def modal_state(modal: dict[str, Any]) -> dict[str, Any]:
    """What Slack would send back in view["state"]["values"] for an untouched modal."""
    values: dict[str, Any] = {}
    for block in modal["blocks"]:
        if block["type"] == "input":
            element = block["element"]
            values[block["block_id"]] = {
                element["action_id"]: {
                    "type": "plain_text_input",
                    "value": element.get("initial_value"),
                }
            }
    return values


def recoverable(escaped: str, chunks: list[str]) -> bool:
    """True when escaped == chunk0 + sep0 + chunk1 + … with each sep in SEPARATORS."""
    positions = {0}
    for index, chunk in enumerate(chunks):
        after = {p + len(chunk) for p in positions if escaped.startswith(chunk, p)}
        if index == len(chunks) - 1:
            return len(escaped) in after
        positions = {p + len(s) for p in after for s in SEPARATORS if escaped.startswith(s, p)}
    return False


def assert_whole_entities(chunk: str) -> None:
    for match in re.finditer("&", chunk):
        assert re.match("&(amp|lt|gt);", chunk[match.start() :]), chunk


# Escaping


@pytest.mark.parametrize(
    "hostile",
    ["<!channel>", "<!here>", "<!everyone>", "<!subteam^S1>", "<@U1>", "<#C1>", "<https://x|y>"],
)
def test_escaping_makes_every_special_sequence_inert(hostile: str) -> None:
    escaped = escape_mrkdwn(hostile)
    assert "<" not in escaped and ">" not in escaped
    assert escaped == hostile.replace("<", "&lt;").replace(">", "&gt;")


def test_escaping_changes_only_amp_lt_gt_and_amp_first() -> None:
    assert escape_mrkdwn("a & b < c > d *bold* _it_ `code` ~s~ 🎉") == (
        "a &amp; b &lt; c &gt; d *bold* _it_ `code` ~s~ 🎉"
    )
    assert escape_mrkdwn("&lt;") == "&amp;lt;"  # text that looks escaped stays literal


def test_review_message_for_a_hostile_draft_has_no_live_mention_or_link() -> None:
    fallback, blocks = review_message(view(HOSTILE, recipe="<!channel>", model="<@U2>"))
    # The only control sequence Galley itself writes is the slot's date token.
    assert live_tokens(blocks) == ["<!date"]
    assert live_tokens(fallback) == []


def test_decided_message_for_a_hostile_draft_and_reason_mentions_only_the_decider() -> None:
    draft = decided(DraftState.REJECTED, "U0EDITOR", "<!here> <@U9> bad", text=HOSTILE)
    fallback, blocks = decided_message(draft)
    assert sorted(live_tokens(blocks)) == ["<!date", "<!date", "<@U0EDITOR"]
    assert live_tokens(fallback) == []
    assert "reason: &lt;!here&gt; &lt;@U9&gt; bad" in context_texts(blocks)[-1]


def test_a_decider_that_is_not_a_user_id_is_shown_inert() -> None:
    _, blocks = decided_message(decided(DraftState.APPROVED, "<!channel>"))
    assert live_tokens(blocks) == ["<!date", "<!date"]


# Splitting


def test_split_of_empty_text_is_one_non_empty_chunk() -> None:
    assert split_for_sections("") == [" "]


def test_split_keeps_short_text_whole_and_escaped() -> None:
    assert split_for_sections("a < b\n\nc") == ["a &lt; b\n\nc"]


def test_split_prefers_a_paragraph_break_then_a_line_break_then_a_space() -> None:
    assert split_for_sections("aaaaaa\n\nbb\ncc dd", limit=12) == ["aaaaaa", "bb\ncc dd"]
    assert split_for_sections("aaaaaa\nbb cc dd", limit=12) == ["aaaaaa", "bb cc dd"]
    assert split_for_sections("aaaaaa bbbbbbbb", limit=12) == ["aaaaaa", "bbbbbbbb"]


def test_split_ignores_breaks_in_the_first_half_of_the_window() -> None:
    # A break this early would spend a whole block on two characters.
    assert split_for_sections("a\n\nbbbbbbbbbbbbbbbb", limit=10) == ["a\n\nbbbbbbb", "bbbbbbbbb"]


def test_a_hard_cut_backs_off_before_an_entity_instead_of_splitting_it() -> None:
    chunks = split_for_sections("abcdefgh&xyz", limit=10)
    assert chunks == ["abcdefgh", "&amp;xyz"]


def test_a_cut_never_leaves_an_empty_chunk_for_a_trailing_separator() -> None:
    chunks = split_for_sections("a" * 10 + "\n\n", limit=10)
    assert all(chunks)
    assert recoverable(escape_mrkdwn("a" * 10 + "\n\n"), chunks)


@settings(max_examples=300, deadline=None)
@given(
    text=st.text(alphabet="ab&<>\n ", max_size=600),
    limit=st.integers(min_value=5, max_value=60),
)
def test_split_never_cuts_an_entity_and_the_escaped_text_is_recoverable(
    text: str, limit: int
) -> None:
    chunks = split_for_sections(text, limit)
    escaped = escape_mrkdwn(text)
    for chunk in chunks:
        assert 0 < len(chunk) <= limit
        assert_whole_entities(chunk)  # no chunk ends inside an entity …
        assert not re.match("(amp|mp|p|lt|gt|t)?;", chunk)  # … or starts in one
    if escaped:
        assert recoverable(escaped, chunks)
    else:
        assert chunks == [" "]


def test_split_rejects_a_limit_too_small_for_an_entity() -> None:
    with pytest.raises(ValueError, match="at least 5"):
        split_for_sections("&&&&&&", limit=4)


# Size limits of the review message


def test_a_ten_thousand_character_draft_is_shown_whole_within_limits() -> None:
    text = ("Galley drafts posts. " * 500)[:10_000]
    fallback, blocks = review_message(view(text))
    assert_fits(blocks)
    draft = "".join(section_texts(blocks)[1:])
    assert len(draft) >= len(text) - len(section_texts(blocks))  # only dropped spaces
    assert "truncated" not in json.dumps(blocks)
    assert fallback.startswith("Draft for review: Galley drafts posts.")
    assert len(fallback) < 200


@pytest.mark.parametrize("text", ["x" * 200_000, ("word " * 40_000), "&" * 10_000])
def test_huge_or_entity_heavy_drafts_are_truncated_within_limits(text: str) -> None:
    _, blocks = review_message(view(text))
    assert_fits(blocks)
    notice = section_texts(blocks)[-1]
    assert notice.startswith("_… draft truncated here: ")
    assert notice.endswith("more characters; open Edit to see it all_")
    shown = sum(len(t) for t in section_texts(blocks)[1:-1])
    hidden = int(re.search(r"here: ([\d,]+) more", notice).group(1).replace(",", ""))  # type: ignore[union-attr]
    # Counted in the draft's own characters, not in escaped ones.
    per_char = len(escape_mrkdwn(text[:1]))
    assert shown // per_char + hidden <= len(text)
    assert hidden >= len(text) - shown // per_char - len(text) // SECTION_LIMIT


def test_a_decided_huge_draft_stays_within_limits() -> None:
    draft = decided(DraftState.REJECTED, "U1", "<&>" * 2000, text="y" * 200_000)
    _, blocks = decided_message(draft)
    assert_fits(blocks)


# Buttons, metadata and the review message's content


def test_button_values_round_trip() -> None:
    assert parse_button_value(button_value(KEY, 7)) == (KEY, 7)
    assert parse_button_value(button_value("é|ü", 0)) == ("é|ü", 0)


def test_a_long_key_round_trips_and_stays_under_slacks_2000_characters() -> None:
    key = "linkedin|" + "a-very-long-recipe-name" * 80 + "@2026-10-20T09:00|v12"
    value = button_value(key, 123)
    assert len(value) < 2000
    assert parse_button_value(value) == (key, 123)


def test_a_key_too_long_for_a_button_is_refused_not_truncated() -> None:
    with pytest.raises(ValueError, match="too long"):
        button_value("k" * 2000, 1)


@pytest.mark.parametrize(
    "garbage",
    ["", "nope", "[]", '{"key": "k"}', '{"key": 1, "rev": 1}', '{"key": "k", "rev": true}'],
)
def test_parse_button_value_refuses_garbage(garbage: str) -> None:
    with pytest.raises(ValueError):
        parse_button_value(garbage)


def test_draft_metadata_names_the_key_and_revision() -> None:
    assert draft_metadata(KEY, 2) == {
        "event_type": DRAFT_EVENT_TYPE,
        "event_payload": {"draft_key": KEY, "revision": 2},
    }


def test_review_buttons_have_their_styles_action_ids_and_revision() -> None:
    _, blocks = review_message(view())
    actions = [b for b in blocks if b["type"] == "actions"]
    assert len(actions) == 1 and actions[0]["block_id"] == "galley_review"
    buttons = actions[0]["elements"]
    assert [(b["text"]["text"], b["action_id"], b.get("style")) for b in buttons] == [
        ("Approve", ACTION_APPROVE, "primary"),
        ("Reject", ACTION_REJECT, "danger"),
        ("Edit", ACTION_EDIT, None),
        ("Redraft", ACTION_REDRAFT, None),
    ]
    assert {parse_button_value(b["value"]) for b in buttons} == {(KEY, 2)}


def test_review_message_shows_recipe_platform_slot_version_model_and_tokens() -> None:
    _, blocks = review_message(view())
    assert section_texts(blocks)[0] == "*Draft for review* · weekly-update · linkedin"
    assert section_texts(blocks)[1] == "Hello world"
    unix = int(SLOT.timestamp())
    assert context_texts(blocks) == [
        "weekly-update · linkedin · "
        f"<!date^{unix}^{{date_short_pretty}} {{time}}|2026-10-20T09:00+01:00> · v3 · "
        "claude-sonnet-5-5 · 12 in / 34 out tokens"
    ]


def test_an_empty_draft_still_renders_a_non_empty_section() -> None:
    fallback, blocks = review_message(view("", model=None))
    assert section_texts(blocks)[1] == " "
    assert "claude" not in context_texts(blocks)[0]
    assert fallback == "Draft for review: "


def test_naive_datetimes_are_refused() -> None:
    naive = datetime(2026, 10, 20, 9, 0)
    with pytest.raises(ValueError, match="timezone-aware"):
        review_message(view(slot_at=naive))
    with pytest.raises(ValueError, match="timezone-aware"):
        decided_message(view(state=DraftState.APPROVED, decided_by="U1", decided_at=naive))


def test_a_decided_message_takes_the_stored_state_string_and_refuses_undecided_ones() -> None:
    stored: Any = "expired"  # the draft state as the store returns it
    _, blocks = decided_message(view(state=stored, decided_at=DECIDED_AT))
    assert context_texts([blocks[-1]])[0].startswith("⌛ Expired unreviewed")
    _, published = decided_message(decided(DraftState.PUBLISHED, "U1"))
    assert context_texts([published[-1]])[0].startswith("✅ Approved by <@U1>")
    with pytest.raises(ValueError, match="no decision"):
        decided_message(view())


# Decided messages


def test_decided_message_replaces_the_buttons_with_who_decided_and_when() -> None:
    fallback, blocks = decided_message(decided(DraftState.APPROVED, "U0EDITOR"))
    assert not [b for b in blocks if b["type"] == "actions"]
    assert "galley_approve" not in json.dumps(blocks)
    unix = int(DECIDED_AT.timestamp())
    assert blocks[-1]["block_id"] == "galley_decision"
    assert context_texts([blocks[-1]]) == [
        f"✅ Approved by <@U0EDITOR> <!date^{unix}^{{date_short_pretty}} {{time}}"
        "|2026-10-20T10:30+00:00>"
    ]
    assert section_texts(blocks)[1] == "Hello world"
    assert fallback == "Draft approved: Hello world"


@pytest.mark.parametrize(
    ("draft", "start"),
    [
        (decided(DraftState.REJECTED, "U1", "too long"), "❌ Rejected by <@U1> <!date^"),
        (decided(DraftState.EXPIRED, None), "⌛ Expired unreviewed (review window passed)"),
        (decided(DraftState.SUPERSEDED, None), "↪️ Superseded by a newer version <!date^"),
    ],
)
def test_every_verdict_says_what_happened(draft: ReviewItem, start: str) -> None:
    _, blocks = decided_message(draft)
    line = context_texts([blocks[-1]])[0]
    assert line.startswith(start)
    assert ("— reason: too long" in line) == (draft.state == DraftState.REJECTED)


def test_a_rejection_without_reason_shows_no_reason() -> None:
    _, blocks = decided_message(decided(DraftState.REJECTED, "U1"))
    assert "reason" not in context_texts([blocks[-1]])[0]


# Modals


def test_reject_modal_asks_for_an_optional_multiline_reason() -> None:
    modal = reject_modal(KEY, 2)
    assert modal["type"] == "modal" and modal["callback_id"] == REJECT_MODAL
    assert parse_button_value(modal["private_metadata"]) == (KEY, 2)
    assert (modal["title"]["text"], modal["submit"]["text"]) == ("Reject draft", "Reject")
    [block] = modal["blocks"]
    assert (block["block_id"], block["optional"], block["label"]["text"]) == (
        "reason",
        True,
        "Reason (optional)",
    )
    element = block["element"]
    assert (element["type"], element["action_id"], element["multiline"]) == (
        "plain_text_input",
        "reason",
        True,
    )


@pytest.mark.parametrize(
    ("values", "reason"),
    [
        ({"reason": {"reason": {"type": "plain_text_input", "value": "off brand"}}}, "off brand"),
        ({"reason": {"reason": {"type": "plain_text_input", "value": ""}}}, None),
        ({"reason": {"reason": {"type": "plain_text_input", "value": "  \n"}}}, None),
        ({"reason": {"reason": {"type": "plain_text_input", "value": None}}}, None),
        ({}, None),
    ],
)
def test_reject_reason_reads_none_for_an_empty_reason(
    values: dict[str, Any], reason: str | None
) -> None:
    assert reject_reason(values) == reason


def test_edit_modal_splits_seven_thousand_characters_into_three_parts_and_one_empty() -> None:
    text = ("The quick brown fox jumps over the lazy dog.\n" * 200)[:7000]
    modal = edit_modal(KEY, 2, text)
    assert modal["callback_id"] == EDIT_MODAL
    assert parse_button_value(modal["private_metadata"]) == (KEY, 2)
    assert (modal["title"]["text"], modal["submit"]["text"]) == ("Edit draft", "Save")
    inputs = [b for b in modal["blocks"] if b["type"] == "input"]
    assert [b["block_id"] for b in inputs] == ["part_0", "part_1", "part_2", "add_more"]
    assert "new paragraph" in inputs[3]["hint"]["text"]
    parts = [b["element"].get("initial_value") for b in inputs]
    assert all(0 < len(p) <= 3000 for p in parts[:3]) and parts[3] is None
    assert all(b["element"]["action_id"] == "text" and b["element"]["multiline"] for b in inputs)
    assert edited_text(modal_state(modal)) == text


def test_edit_modal_parts_never_begin_or_end_with_whitespace_a_trim_could_lose() -> None:
    text = "word " * 2000
    inputs = [b for b in edit_modal(KEY, 1, text)["blocks"] if b["type"] == "input"]
    parts = [b["element"]["initial_value"] for b in inputs[:-1]]
    assert len(parts) == 4
    # The last part ends where the text does; every other one is a cut.
    assert all(p[0] != " " for p in parts)
    assert all(p[-1] != " " for p in parts[:-1])
    assert "".join(parts) == text


@pytest.mark.parametrize("text", ["", "short", "<!channel> & raw", "x" * 3000, "y" * 3001])
def test_edit_modal_holds_the_raw_text_and_gives_it_back_exactly(text: str) -> None:
    modal = edit_modal(KEY, 1, text)
    assert edited_text(modal_state(modal)) == text
    assert len(modal["blocks"]) <= 100


def test_edited_text_joins_parts_in_numeric_order_and_skips_empty_ones() -> None:
    values = {
        f"part_{i}": {"text": {"type": "plain_text_input", "value": v}}
        for i, v in [(10, "K"), (2, "B"), (0, "A"), (3, None), (4, "")]
    }
    values["reason"] = {"reason": {"type": "plain_text_input", "value": "ignored"}}
    assert edited_text(values) == "ABK"
    assert edited_text({}) == ""


def test_text_added_in_add_more_is_a_paragraph_of_its_own() -> None:
    modal = edit_modal(KEY, 1, "Galley ships Widget 2.0.")
    state = modal_state(modal)
    state["add_more"]["text"]["value"] = "A second paragraph."
    assert edited_text(state) == "Galley ships Widget 2.0.\n\nA second paragraph."


@pytest.mark.parametrize(
    ("draft", "added", "text"),
    [
        ("One.\n", "  Two.\n", "One.\n\nTwo."),
        ("One.", "   ", "One."),
        ("  ", "Two.", "Two."),
    ],
)
def test_add_more_drops_blank_ends_and_blank_sides(draft: str, added: str, text: str) -> None:
    state = modal_state(edit_modal(KEY, 1, draft))
    state["add_more"]["text"]["value"] = added
    assert edited_text(state) == text


def test_a_draft_too_long_for_one_modal_is_refused() -> None:
    with pytest.raises(ValueError, match="too long to edit"):
        edit_modal(KEY, 1, "z" * 300_000)


# Notices and help


def test_notice_is_one_mrkdwn_section() -> None:
    text = "Drafting paused for *weekly-update*: 3 drafts waiting for review (limit 3)."
    assert notice_blocks(text) == [
        {"type": "section", "text": {"type": "mrkdwn", "text": text, "verbatim": True}}
    ]
    assert_fits(notice_blocks("n" * 5000))


def test_help_lists_every_subcommand_once_and_marks_admin_ones() -> None:
    lines = help_text().splitlines()[1:]
    names = [re.match(r"`/galley (\w+)", line).group(1) for line in lines]  # type: ignore[union-attr]
    assert names == [
        "help",
        "status",
        "run",
        "bump",
        "pause",
        "resume",
        "runs",
        "resolve",
        "retry",
        "cancel",
        "post",
    ]
    open_to_all = {n for n, line in zip(names, lines, strict=True) if "_admin_" not in line}
    assert open_to_all == {"help", "status", "runs"}
    assert "<" not in help_text() and ">" not in help_text()
    assert "`/galley pause &lt;recipe|all&gt; [reason]`" in help_text()


def test_the_redraft_modal_asks_for_a_note_and_carries_the_revision() -> None:
    from bot.review_modals import REDRAFT_MODAL, redraft_modal, redraft_note

    modal = redraft_modal(KEY, 2)

    assert modal["callback_id"] == REDRAFT_MODAL
    assert parse_button_value(modal["private_metadata"]) == (KEY, 2)
    [note] = [b for b in modal["blocks"] if b["type"] == "input"]
    assert note["optional"] is False and note["element"]["max_length"] == 1000
    assert redraft_note({"note": {"note": {"value": "  shorter \n"}}}) == "shorter"
    assert redraft_note({}) == ""


# Outside text anywhere in a message (docs/design.md §34)

BARE = "@channel @here #general https://evil.example"  # Slack parses these unless verbatim


def mrkdwn_objects(payload: Any) -> list[dict[str, Any]]:
    """Every mrkdwn text object in a payload, however deep."""
    if isinstance(payload, list):
        return [found for element in payload for found in mrkdwn_objects(element)]
    if not isinstance(payload, dict):
        return []
    own = [payload] if payload.get("type") == "mrkdwn" else []
    return own + [found for value in payload.values() for found in mrkdwn_objects(value)]


def test_titles_alt_texts_notes_and_destination_answers_reach_slack_inert() -> None:
    outside = f"{HOSTILE} {BARE}"
    basis = DraftBasis(
        items=(BasisItem(outside, "https://example.org/a"), BasisItem(outside, None)),
        left_out=(outside,),
        image_notes=(outside,),
    )
    image = ShownImage("ab" * 32, outside, outside, 1000, 10, 10)
    item = view(basis=basis, images=(image,), image_problems=(outside,), gone=(outside,))
    _, review = review_message(item, fact_lines(item))
    alert = RunAlert("weekly-update@x", "weekly-update", f"Bluesky said {outside}", [outside], [])
    alerted = alert_message(alert)["blocks"]
    for blocks in (review, alerted):
        # nothing from outside is live: the one link is the item's, written by Galley
        assert set(live_tokens(blocks)) <= {"<!date", "<http"}
        assert "<https://evil" not in json.dumps(blocks)
        texts = mrkdwn_objects(blocks)
        assert texts and all(text.get("verbatim") is True for text in texts)
    assert "&lt;!channel&gt;" in json.dumps(review) and "&lt;!here&gt;" in json.dumps(alerted)
