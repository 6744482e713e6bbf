"""Block Kit for Galley's messages (the review modals are bot/review_modals.py's): pure
functions returning plain dicts, no I/O.

Model output is untrusted (docs/design.md §13): it is escaped before it reaches mrkdwn, so a
draft never pings anyone, and its sections are `verbatim` so Slack links nothing in it.
Every payload stays within Block Kit's limits whatever the input: text is clipped at
the boundary, never through an entity (`&amp;`) or a mention (`<@U…>`)."""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Any

from bot.block_kit import (
    BLOCK_LIMIT,
    DRAFT_TEXT_BUDGET,
    LABEL_LIMIT,
    REASON_LIMIT,
    REVIEW_BLOCK_ID,
    button_value,
    context,
    plain_text,
    section,
)
from bot.image_blocks import image_blocks, text_beside_images
from bot.mrkdwn import SECTION_LIMIT, clip_mrkdwn, escape_mrkdwn, inert, section_spans, unescape
from bot.mrkdwn import split_for_sections as split_for_sections
from bot.version_blocks import is_set, set_blocks
from core.policies import Backpressure, Refusal
from core.ports import ApprovalProgress, BackpressureNotice, ReviewItem
from core.post_body import PostBody
from core.review.queue import ReviewAnswer
from core.states import DraftState

ACTION_APPROVE = "galley_approve"
ACTION_UNAPPROVE = "galley_unapprove"
ACTION_REJECT = "galley_reject"
ACTION_EDIT = "galley_edit"
ACTION_REDRAFT = "galley_redraft"
ACTION_ALERT_PUBLISHED = "galley_mark_published"
ACTION_ALERT_RETRY = "galley_retry"
ACTION_ALERT_CANCEL = "galley_cancel"
ACTION_ALERT_SKIP = "galley_skip"
DRAFT_EVENT_TYPE = "galley_draft"

FALLBACK_SNIPPET = 150

_USER_ID = re.compile(r"[UW][A-Z0-9]+")


def draft_metadata(draft_key: str, revision: int) -> dict[str, Any]:
    """Message metadata that lets a post whose outcome was unknown be found again."""
    return {
        "event_type": DRAFT_EVENT_TYPE,
        "event_payload": {"draft_key": draft_key, "revision": revision},
    }


def parse_button_value(value: str) -> tuple[str, int]:
    """The (draft key, revision) of `button_value`; ValueError for anything else."""
    try:
        decoded = json.loads(value)
        key, rev = decoded["key"], decoded["rev"]
    except (TypeError, KeyError, IndexError, json.JSONDecodeError):
        key = rev = None
    if not isinstance(key, str) or not isinstance(rev, int) or isinstance(rev, bool):
        raise ValueError(f"not a Galley button value: {value[:80]!r}")
    return key, rev


def draft_message(
    item: ReviewItem, facts: tuple[str, ...] = ()
) -> tuple[str, list[dict[str, Any]]]:
    """The review message for a draft in its current state: buttons while it waits, who
    decided and when once it is decided. `facts` are Galley's own mrkdwn lines."""
    if item.state in (DraftState.READY, DraftState.CLAIMED):
        return review_message(item, facts)
    return decided_message(item, facts)


def review_message(
    item: ReviewItem, facts: tuple[str, ...] = ()
) -> tuple[str, list[dict[str, Any]]]:
    """(fallback text, blocks) of a draft waiting for review, with its four buttons; a
    decision_reason on a waiting draft says why it is back for review."""
    _require_aware(item.slot_at, "slot_at")
    item = text_beside_images(item)
    value = button_value(item.draft_key, item.revision)
    actions = {
        "type": "actions",
        "block_id": REVIEW_BLOCK_ID,
        "elements": [
            _button("Approve", ACTION_APPROVE, value, style="primary"),
            _button("Reject", ACTION_REJECT, value, style="danger"),
            _button("Edit", ACTION_EDIT, value),
            _button("Redraft", ACTION_REDRAFT, value),  # docs/design.md §22
        ],
    }
    notice = item.decision_reason if item.state == DraftState.READY else None
    pictures = image_blocks(item, removable=True)  # docs/design.md §32
    trailing = 2 + (1 if notice else 0) + len(facts) + len(pictures)
    blocks = [*_draft_blocks(item, trailing=trailing), _details(item)]
    if notice:
        blocks.append(context(f":leftwards_arrow_with_hook: {escape_mrkdwn(notice)}"))
    blocks += [context(fact) for fact in facts]  # right above the buttons
    blocks += pictures
    return "Draft for review: " + _snippet(item.text), [*blocks, actions]


def decided_message(
    item: ReviewItem, facts: tuple[str, ...] = ()
) -> tuple[str, list[dict[str, Any]]]:
    """The review message once decided: the buttons give way to who decided and when.
    ValueError for a draft that is not decided."""
    _require_aware(item.slot_at, "slot_at")
    item = text_beside_images(item)
    line, verdict = _decision_line(item)
    outcome = context(line, block_id="galley_decision")
    waiting = unapprove_actions(item)  # approved ahead of its slot (docs/design.md §23)
    blocks = [*_draft_blocks(item, trailing=2 + len(facts) + len(waiting)), _details(item), outcome]
    blocks += [context(fact) for fact in facts]  # where it was published, once it was
    blocks += waiting
    return f"Draft {verdict}: " + _snippet(item.text), blocks


def unapprove_actions(item: ReviewItem) -> list[dict[str, Any]]:
    """**Unapprove**, while an approved draft waits for its publication time."""
    if item.state != DraftState.APPROVED or item.publishes is None:
        return []
    value = button_value(item.draft_key, item.revision)
    button = _button("Unapprove", ACTION_UNAPPROVE, value)
    return [{"type": "actions", "block_id": REVIEW_BLOCK_ID, "elements": [button]}]


def notice_blocks(text: str) -> list[dict[str, Any]]:
    """One section for Galley's own mrkdwn (already safe), cut to fit if it must be."""
    return [section(clip_mrkdwn(text, SECTION_LIMIT) or " ")]


def backpressure_text(notice: BackpressureNotice) -> str:
    """A backpressure notice as mrkdwn, for the review channel."""
    recipe = f"*{inert(notice.recipe, LABEL_LIMIT)}*"
    if notice.kind == Backpressure.RESUMED:
        return f"Drafting resumed for {recipe}."
    drafts = "1 draft" if notice.waiting == 1 else f"{notice.waiting} drafts"
    of_limit = f" (limit {notice.limit})" if notice.limit is not None else ""
    return (
        f"Drafting paused for {recipe}: {drafts} waiting for review{of_limit}. "
        "It resumes by itself once people catch up."
    )


def help_text() -> str:
    """The `/galley` usage as mrkdwn, already escaped."""
    commands = [
        ("help", "this list", False),
        ("status", "recipes, drafts waiting for review, next slots", False),
        ("run <recipe>", "draft the latest due slot now", True),
        ("bump <recipe> [reason]", "new recipe version, so a drafted slot can be redone", True),
        ("pause <recipe|all> [reason]", "stop drafting", True),
        ("resume <recipe|all>", "start drafting again", True),
        ("runs [state]", "recent runs, optionally only those in one state", False),
        ("resolve <run> published|absent", "settle an uncertain run after checking", True),
        ("retry <run>", "try a failed or uncertain run again", True),
        ("cancel <run>", "stop a run; effects already done are listed", True),
        ("post [recipe]", "write a post yourself: reviewed, then published at its time", True),
    ]
    lines = ["*Galley* commands (_admin_ = admins only):"]
    for usage, meaning, admin in commands:
        suffix = " · _admin_" if admin else ""
        lines.append(f"`/galley {escape_mrkdwn(usage)}` — {meaning}{suffix}")
    return "\n".join(lines)


def _require_aware(moment: datetime, name: str) -> None:
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError(f"{name} must be timezone-aware, got {moment.isoformat()}")


def _draft_blocks(view: ReviewItem, trailing: int) -> list[dict[str, Any]]:
    """The heading and the draft's sections, leaving room for `trailing` blocks; a set of
    versions or thread parts as bot/version_blocks.py lays it out."""
    if is_set(view.text):
        return set_blocks(view, trailing)
    heading = section(
        f"*Draft for review* · {inert(view.recipe, LABEL_LIMIT)} · "
        f"{inert(view.platform, LABEL_LIMIT)}"
    )
    escaped = escape_mrkdwn(view.text)
    if not escaped:
        return [heading, section(" ")]
    spans = section_spans(escaped, SECTION_LIMIT)
    room = BLOCK_LIMIT - 1 - trailing
    shown, used = 0, 0
    for start, end in spans:
        notice = 1 if shown + 1 < len(spans) else 0  # room for the truncation notice
        if shown + 1 + notice > room or used + end - start > DRAFT_TEXT_BUDGET:
            break
        shown, used = shown + 1, used + end - start
    shown_spans = spans[:shown]
    blocks = [heading, *(section(escaped[start:end]) for start, end in shown_spans)]
    if shown < len(spans):
        hidden = len(unescape(escaped[spans[shown][0] :]))
        note = f"_… draft truncated here: {hidden:,} more characters; open Edit to see it all_"
        blocks.append(section(note))
    return blocks


def _details(view: ReviewItem) -> dict[str, Any]:
    model = [inert(view.model, LABEL_LIMIT)] if view.model else []
    tokens = f"{view.input_tokens:,} in / {view.output_tokens:,} out tokens"
    recipe, platform = inert(view.recipe, LABEL_LIMIT), inert(view.platform, LABEL_LIMIT)
    parts = [recipe, platform, slack_date(view.slot_at), f"v{view.version}", *model, tokens]
    return context(" · ".join(parts))


_APPROVED_STATES = frozenset({DraftState.APPROVED, DraftState.PUBLISHED})


def _approved_at_each_stage(progress: ApprovalProgress) -> str:
    """`editor <@U0ANA>; legal <@U0CAL>`: who approved at every stage, the first too."""
    stages = [*progress.earlier, (progress.stage, progress.approvers)]
    return "; ".join(
        f"{escape_mrkdwn(stage)} " + " and ".join(mention_user(person) for person in people)
        for stage, people in stages
        if people
    )


def _decision_line(item: ReviewItem) -> tuple[str, str]:
    """The line that replaces the buttons, and the verdict for the fallback text."""
    at = item.decided_at or item.slot_at
    _require_aware(at, "decided_at")
    when = slack_date(at)
    who = f" by {mention_user(item.decided_by)}" if item.decided_by else ""
    approvers = item.approvals.approvers if item.approvals else ()
    if len(approvers) > 1:  # approvals_required people decided together (docs/design.md §22)
        who = " by " + " and ".join(mention_user(person) for person in approvers)
    if item.approvals and item.approvals.earlier and item.state in _APPROVED_STATES:
        who = " by " + _approved_at_each_stage(item.approvals)
    match item.state:
        case DraftState.APPROVED if item.publishes:
            return f"✅ Approved{who} · publishes {escape_mrkdwn(item.publishes)}", item.state
        case DraftState.APPROVED | DraftState.PUBLISHED:
            return f"✅ Approved{who} {when}", DraftState.APPROVED
        case DraftState.REJECTED:
            line = f"❌ Rejected{who} {when}"
            if item.decision_reason:
                line += f" — reason: {inert(item.decision_reason, REASON_LIMIT)}"
            return line, DraftState.REJECTED
        case DraftState.EXPIRED if item.missed_slot:
            why = f": {inert(item.decision_reason, REASON_LIMIT)}" if item.decision_reason else ""
            return f"⌛ Expired unapproved: it missed its slot{why}", DraftState.EXPIRED
        case DraftState.EXPIRED:
            return f"⌛ Expired unreviewed (review window passed) {when}", DraftState.EXPIRED
        case DraftState.SUPERSEDED:
            return f"↪️ Superseded by a newer version {when}", DraftState.SUPERSEDED
        case DraftState.CANCELLED:
            return f"🚫 Cancelled{who} {when}: not published", DraftState.CANCELLED
    raise ValueError(f"a {item.state} draft has no decision to show")


def review_reply(answer: ReviewAnswer) -> str:
    """A refused click's answer as mrkdwn: whoever decided first is mentioned."""
    item = answer.item
    if answer.refusal == Refusal.DECIDED and item is not None and item.decided_by:
        return f"Already {item.state} by {mention_user(item.decided_by)}."
    return escape_mrkdwn(answer.message)


def mention_user(user_id: str) -> str:
    """`<@U…>` for a real user id; anything else is shown as inert text."""
    if _USER_ID.fullmatch(user_id) and len(user_id) <= LABEL_LIMIT:
        return f"<@{user_id}>"
    return inert(user_id, LABEL_LIMIT)


def slack_date(moment: datetime) -> str:
    """Shown in each reader's own zone; the fallback is the wall time where it was set."""
    fallback = moment.isoformat(timespec="minutes")
    return f"<!date^{int(moment.timestamp())}^{{date_short_pretty}} {{time}}|{fallback}>"


def _snippet(text: str) -> str:
    """Clipped raw, then escaped, so no entity is cut in half; a set as its plain parts."""
    readable = PostBody.parse(text).readable()
    return escape_mrkdwn(_clip(" ".join(readable.split()), FALLBACK_SNIPPET))


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit].rstrip() + "…"


def _button(text: str, action_id: str, value: str, style: str | None = None) -> dict[str, Any]:
    button = {"type": "button", "text": plain_text(text), "action_id": action_id, "value": value}
    return button | ({"style": style} if style else {})
