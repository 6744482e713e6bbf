"""Block Kit for what leaves the review loop: published posts and alerts to people.
Pure functions; model text is escaped before it reaches mrkdwn.
"""

from __future__ import annotations

import json
from typing import Any

from bot.blocks import (
    ACTION_ALERT_CANCEL,
    ACTION_ALERT_PUBLISHED,
    ACTION_ALERT_RETRY,
    ACTION_ALERT_SKIP,
    BLOCK_LIMIT,
    escape_mrkdwn,
    split_for_sections,
)
from core.policies import AlertKind
from core.ports import RunAlert

PUBLISH_EVENT_TYPE = "galley_publish"
ALERT_EVENT_TYPE = "galley_alert"


def publication_message(text: str, effect_key: str) -> dict[str, Any]:
    """`chat.postMessage` fields for an approved draft, findable by its effect key."""
    chunks = split_for_sections(text)[:BLOCK_LIMIT]
    return {
        "text": escape_mrkdwn(text)[:3000],
        "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": c}} for c in chunks],
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
    blocks: list[dict[str, Any]] = [
        {"type": "section", "text": {"type": "mrkdwn", "text": f":warning: {headline}"}},
        {"type": "section", "text": {"type": "mrkdwn", "text": facts[:3000] or " "}},
    ]
    if actionable and BUTTONS[alert.kind]:
        blocks.append(alert_actions(alert.run_id, alert.kind))
    return {
        "text": f"Galley needs a person: run {alert.run_id}",
        "blocks": blocks,
        "metadata": {"event_type": ALERT_EVENT_TYPE, "event_payload": {"run": alert.run_id}},
    }


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
    AlertKind.REVIEW_POST: [],
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


def resolved_blocks(blocks: list[dict[str, Any]], outcome: str) -> list[dict[str, Any]]:
    """The alert's blocks with its buttons replaced by what a person decided."""
    kept = [b for b in blocks if b.get("type") != "actions"]
    note = {"type": "context", "elements": [{"type": "mrkdwn", "text": outcome}]}
    return [*kept, note]
