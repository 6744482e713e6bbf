"""Block Kit for what leaves the review loop: published posts and alerts to people.
Pure functions; model text is escaped before it reaches mrkdwn.
"""

from __future__ import annotations

import json
from typing import Any

from bot.block_kit import BLOCK_LIMIT, DRAFT_TEXT_BUDGET, context, section
from bot.blocks import (
    ACTION_ALERT_CANCEL,
    ACTION_ALERT_PUBLISHED,
    ACTION_ALERT_RETRY,
    ACTION_ALERT_SKIP,
    mention_user,
)
from bot.mrkdwn import SECTION_LIMIT, clip_mrkdwn, escape_mrkdwn, inert, split_for_sections
from core.identity import CLI_ACTOR
from core.policies import AlertKind
from core.ports import RunAlert

PUBLISH_EVENT_TYPE = "galley_publish"
ALERT_EVENT_TYPE = "galley_alert"
FALLBACK_LIMIT = 3000  # characters of a message's notification text
OUTCOME_LIMIT = 2000  # characters of a person's decision shown under an alert


class MessageTooLong(ValueError):
    """The text does not fit one Slack message; it is refused, never cut silently."""


def publication_message(text: str, effect_key: str) -> dict[str, Any]:
    """`chat.postMessage` fields for an approved draft, findable by its effect key.

    The text must fit the same budget as the review message (the one people approved
    showed all of it only when it fit); `MessageTooLong` otherwise."""
    chunks = split_for_sections(text)
    if len(chunks) > BLOCK_LIMIT or sum(len(c) for c in chunks) > DRAFT_TEXT_BUDGET:
        raise MessageTooLong(
            f"a draft of {len(text):,} characters is too long for one Slack message "
            f"({DRAFT_TEXT_BUDGET:,} characters after escaping, {BLOCK_LIMIT} blocks)"
        )
    return {
        "text": inert(" ".join(text.split()), FALLBACK_LIMIT) or " ",
        "blocks": [section(chunk) for chunk in chunks],
        "metadata": {"event_type": PUBLISH_EVENT_TYPE, "event_payload": {"effect_key": effect_key}},
        "unfurl_links": False,
        "unfurl_media": False,
    }


def mention(slack_id: str) -> str:
    """Users are `<@U…>`; user groups are `<!subteam^S…>`."""
    return f"<!subteam^{slack_id}>" if slack_id.startswith("S") else f"<@{slack_id}>"


def alert_message(alert: RunAlert, *, actionable: bool = True) -> dict[str, Any]:
    """`chat.postMessage` fields for an alert about one run."""
    mentions = " ".join(mention(m) for m in alert.mentions)
    headline = f"{mentions} {escape_mrkdwn(alert.headline)}".strip()
    facts = "\n".join(f"• {escape_mrkdwn(fact)}" for fact in alert.facts)
    if alert.settled_by is not None:
        facts = f"• {settled_by_words(alert.settled_by)}\n{facts}"
    blocks: list[dict[str, Any]] = [
        section(clip_mrkdwn(f":warning: {headline}", SECTION_LIMIT)),
        section(clip_mrkdwn(facts, SECTION_LIMIT) or " "),
    ]
    if actionable and BUTTONS[alert.kind]:
        blocks.append(alert_actions(alert.run_id, alert.kind))
    return {
        "text": inert(f"Galley needs a person: {_subject(alert)}", FALLBACK_LIMIT),
        "blocks": blocks,
        "metadata": {"event_type": ALERT_EVENT_TYPE, "event_payload": {"run": alert.run_id}},
    }


def settled_by_words(actor: str) -> str:
    """Who moved a settled alert's run on: a person (mentioned), a person at the command
    line who named nobody, or Galley itself ("")."""
    if actor == CLI_ACTOR:
        return "Settled from the command line"
    return f"Settled by {mention_user(actor)}" if actor else "Settled by Galley"


def _subject(alert: RunAlert) -> str:
    """What the alert is about: its run, or an items recipe whose polls fail (no run)."""
    return f"run {alert.run_id}" if alert.run_id else f"recipe {alert.recipe}"


# The buttons that fit what an alert asks people to settle.
BUTTONS: dict[AlertKind, list[tuple[str, str, str | None]]] = {
    AlertKind.PUBLISH: [
        ("Mark published", ACTION_ALERT_PUBLISHED, "primary"),
        ("Retry", ACTION_ALERT_RETRY, None),
        ("Cancel", ACTION_ALERT_CANCEL, "danger"),
    ],
    AlertKind.DRAFTING: [
        ("Retry draft", ACTION_ALERT_RETRY, "primary"),
        ("Skip", ACTION_ALERT_SKIP, "danger"),
    ],
    AlertKind.STRANDED: [("Cancel", ACTION_ALERT_CANCEL, "danger")],
    AlertKind.MISSED: [
        ("Retry", ACTION_ALERT_RETRY, "primary"),
        ("Cancel", ACTION_ALERT_CANCEL, "danger"),
    ],
    AlertKind.REVIEW_POST: [],
    AlertKind.POST_GONE: [],  # published, then gone: nothing Galley may do about it
    AlertKind.POLL_FAILING: [],  # a source to fix: no run to act on
    AlertKind.CREDENTIALS: [],  # a secret to set: no run to act on
}


def alert_actions(run_id: str, kind: AlertKind = AlertKind.PUBLISH) -> dict[str, Any]:
    value = json.dumps({"run": run_id})
    elements = []
    for label, action_id, style in BUTTONS[kind]:
        button: dict[str, Any] = {
            "type": "button",
            "text": {"type": "plain_text", "text": label},
            "action_id": action_id,
            "value": value,
        }
        if style:
            button["style"] = style
        elements.append(button)
    return {"type": "actions", "block_id": "galley_alert", "elements": elements}


def alert_run_id(value: str) -> str:
    run = json.loads(value).get("run")
    if not isinstance(run, str):
        raise ValueError("not a Galley alert button")
    return run


def resolved_blocks(blocks: list[dict[str, Any]], outcome: str, *, by: str) -> list[dict[str, Any]]:
    """The alert's blocks with its buttons replaced by what a person decided. The
    outcome may quote a destination's answer (an external id): it is escaped and clipped."""
    kept = [b for b in blocks if b.get("type") != "actions"][: BLOCK_LIMIT - 1]
    return [*kept, context(f"{mention_user(by)}: {inert(outcome, OUTCOME_LIMIT)}")]
