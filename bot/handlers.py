"""Bolt listeners: each acknowledges first, then parses, calls one core operation and
renders the answer. No listener waits on the model: drafting runs on its own pool.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from slack_bolt import Ack, App, Respond
from slack_sdk import WebClient

from bot.alert_blocks import alert_run_id, resolved_blocks
from bot.app_home import command_words
from bot.blocks import (
    ACTION_ALERT_CANCEL,
    ACTION_ALERT_PUBLISHED,
    ACTION_ALERT_RETRY,
    ACTION_ALERT_SKIP,
    ACTION_APPROVE,
    ACTION_EDIT,
    ACTION_REDRAFT,
    ACTION_REJECT,
    ACTION_UNAPPROVE,
    EDIT_MODAL,
    REDRAFT_MODAL,
    REJECT_MODAL,
    edit_modal,
    edited_text,
    parse_button_value,
    redraft_modal,
    redraft_note,
    reject_modal,
    reject_reason,
    review_reply,
)
from bot.commands import CommandContext, StartDraft, answer, retry_run
from bot.home_tab import HomeTab
from bot.slack_surface import SlackChannels
from core.acting import Desk, People
from core.errors import GalleyError
from core.operator import Galley
from core.outbox import ReviewOutbox
from core.permissions import may_administer
from core.policies import Finding, FollowUp, Verdict
from core.ports import Directory, MessageRef
from core.redraft_claims import RedraftClaim
from core.review import ReviewAnswer, load_item
from core.states import DraftState

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class BotDeps:
    galley: Galley
    outbox: ReviewOutbox
    directory: Directory
    channels: SlackChannels  # paced, classified Web API calls (alert rewrites go here)
    start_draft: StartDraft  # hands a manual run to the drafting pool
    publish_soon: Callable[[str], None]  # hands a run id to the publishing pool
    home: HomeTab | None = None  # the App Home tab, when the bot publishes one
    # hands a claimed redraft to the drafting pool, with how to tell the reviewer
    redraft_soon: Callable[[RedraftClaim, Callable[[str], object] | None], None] | None = None


def register(app: App, deps: BotDeps) -> None:
    """Attach every Galley listener to the Bolt app."""
    galley, slack = deps.galley, deps.galley.config.slack
    # Slack names the person; the same desk as the notebook's checks who may decide
    desk = Desk(
        galley.store,
        galley.config,
        galley.clock,
        People(slack, deps.directory, None, as_person=False),
        galley.fits,
    )

    def settle(result: ReviewAnswer, tell: Callable[[str], object]) -> None:
        if result.item is not None:
            deps.outbox.show_now(result.item)  # shows the decision, or refreshes a stale message
        if not result.accepted:
            tell(review_reply(result))
        elif result.follow_up == FollowUp.PUBLISH and result.item is not None:
            deps.publish_soon(result.item.run_id)

    def decide_as(
        user: str, button: str, verdict: Verdict, reason: str | None = None
    ) -> ReviewAnswer:
        key, revision = parse_button_value(button)
        return desk.decide(key, revision, verdict, user=user, reason=reason)

    @app.action(ACTION_APPROVE)
    def on_approve(ack: Ack, body: dict[str, Any], respond: Respond) -> None:
        ack()
        result = decide_as(body["user"]["id"], body["actions"][0]["value"], Verdict.APPROVED)
        settle(
            result, lambda text: respond(text, response_type="ephemeral", replace_original=False)
        )

    @app.action(ACTION_UNAPPROVE)
    def on_unapprove(ack: Ack, body: dict[str, Any], respond: Respond) -> None:
        ack()
        key, revision = parse_button_value(body["actions"][0]["value"])
        result = desk.unapprove(key, revision, user=body["user"]["id"])
        settle(
            result, lambda text: respond(text, response_type="ephemeral", replace_original=False)
        )

    @app.action(ACTION_REJECT)
    def on_reject(ack: Ack, body: dict[str, Any], client: WebClient) -> None:
        ack()
        key, revision = parse_button_value(body["actions"][0]["value"])
        client.views_open(trigger_id=body["trigger_id"], view=reject_modal(key, revision))

    @app.view(REJECT_MODAL)
    def on_reject_submitted(ack: Ack, body: dict[str, Any], client: WebClient) -> None:
        ack()
        view, user = body["view"], body["user"]["id"]
        reason = reject_reason(view["state"]["values"])
        result = decide_as(user, view["private_metadata"], Verdict.REJECTED, reason)
        settle(result, lambda text: _ephemeral(client, slack.review_channel, user, text))

    @app.action(ACTION_EDIT)
    def on_edit(ack: Ack, body: dict[str, Any], client: WebClient, respond: Respond) -> None:
        ack()
        key, revision = parse_button_value(body["actions"][0]["value"])
        item = load_item(galley.store, key)
        if item is None or item.state != DraftState.READY:
            respond(
                "This draft can no longer be edited.",
                response_type="ephemeral",
                replace_original=False,
            )
            return
        client.views_open(trigger_id=body["trigger_id"], view=edit_modal(key, revision, item.text))

    @app.view(EDIT_MODAL)
    def on_edit_submitted(ack: Ack, body: dict[str, Any], client: WebClient) -> None:
        view, user = body["view"], body["user"]["id"]
        text = edited_text(view["state"]["values"])
        if not text.strip():
            ack(
                response_action="errors", errors={"part_0": "Empty text: reject the draft instead."}
            )
            return
        ack()
        key, revision = parse_button_value(view["private_metadata"])
        result = desk.edit(key, text, revision, user=user)
        settle(result, lambda reply: _ephemeral(client, slack.review_channel, user, reply))

    @app.action(ACTION_REDRAFT)
    def on_redraft(ack: Ack, body: dict[str, Any], client: WebClient) -> None:
        ack()
        key, revision = parse_button_value(body["actions"][0]["value"])
        client.views_open(trigger_id=body["trigger_id"], view=redraft_modal(key, revision))

    @app.view(REDRAFT_MODAL)
    def on_redraft_submitted(ack: Ack, body: dict[str, Any], client: WebClient) -> None:
        """Acknowledged at once; the claim is taken here, the model called on the
        drafting pool. A redelivered submission finds the claim and calls nothing."""
        view, user = body["view"], body["user"]["id"]
        note = redraft_note(view["state"]["values"])
        if not note:
            ack(response_action="errors", errors={"note": "Say what the model should change."})
            return
        ack()
        key, revision = parse_button_value(view["private_metadata"])
        tell = lambda reply: _ephemeral(client, slack.review_channel, user, reply)  # noqa: E731
        claimed = desk.ask_redraft(galley.redrafting, key, revision, note, user=user)
        if isinstance(claimed, ReviewAnswer):
            settle(claimed, tell)
        elif deps.redraft_soon is not None:
            deps.redraft_soon(claimed, tell)

    def on_alert_button(resolve: Callable[[str, str, Respond], str]) -> Callable[..., None]:
        def listener(ack: Ack, body: dict[str, Any], respond: Respond) -> None:
            ack()
            user = body["user"]["id"]
            if not may_administer(slack, deps.directory, user):
                respond(
                    "Only Galley's admins may settle runs.",
                    response_type="ephemeral",
                    replace_original=False,
                )
                return
            run_id = alert_run_id(body["actions"][0]["value"])
            outcome = resolve(run_id, user, respond)
            deps.publish_soon(run_id)
            message = body["message"]
            alert = MessageRef(body["container"]["channel_id"], message["ts"])
            blocks = resolved_blocks(message.get("blocks", []), outcome, by=user)
            try:
                deps.channels.update(alert, text=message.get("text", ""), blocks=blocks)
            except GalleyError as exc:  # the alert pass rewrites it once the run moves on
                log.warning("alert %s not rewritten after %s: %s", alert.ts, outcome, exc)

        return listener

    def retry(run: str, user: str, respond: Respond) -> str:
        def tell(text: str) -> object:
            return respond(text, response_type="ephemeral", replace_original=False)

        return retry_run(run, galley, deps.start_draft, user, tell)

    app.action(ACTION_ALERT_PUBLISHED)(
        on_alert_button(lambda run, user, _: galley.resolve(run, Finding.PUBLISHED, actor=user))
    )
    app.action(ACTION_ALERT_RETRY)(on_alert_button(retry))
    app.action(ACTION_ALERT_CANCEL)(
        on_alert_button(lambda run, user, _: galley.cancel(run, actor=user))
    )
    app.action(ACTION_ALERT_SKIP)(
        on_alert_button(lambda run, user, _: galley.skip(run, actor=user))
    )

    @app.command("/galley")
    def on_command(ack: Ack, command: dict[str, Any], respond: Respond) -> None:
        ack()

        def tell(text: str) -> object:
            return respond(text, response_type="ephemeral")

        context = CommandContext(galley, deps.directory, command["user_id"], deps.start_draft, tell)
        tell(answer(command.get("text", ""), context))

    @app.event("app_home_opened")
    def on_home_opened(event: dict[str, Any]) -> None:
        if deps.home is not None and event.get("tab") == "home":
            deps.home.opened(event["user"])

    @app.error
    def on_error(error: Exception, body: dict[str, Any], respond: Respond | None) -> None:
        """The last resort: a listener that raised still answers the person who clicked
        or typed, with what went wrong; the state Galley shows is what holds."""
        log.error("listener failed on %s: %s", body.get("type", "?"), error, exc_info=error)
        text = last_resort_reply(error)
        user = (body.get("user") or {}).get("id") or body.get("user_id")
        try:
            if respond is not None and respond.response_url:
                respond(text, response_type="ephemeral", replace_original=False)
            elif isinstance(user, str) and body.get("type") == "view_submission":
                _ephemeral(app.client, slack.review_channel, user, text)
        except Exception as exc:  # nothing is left to tell them; keep the log
            log.error("could not tell %s what failed: %s", user, exc)

    @app.action(re.compile(r"^galley_home_"))
    def on_home_button(ack: Ack, body: dict[str, Any]) -> None:
        """A Home button is its `/galley` command: the same checks, the answer on Home."""
        ack()
        home, user, action = deps.home, body["user"]["id"], body["actions"][0]
        if home is None:
            return
        text = command_words(action["action_id"], action["value"])
        tell = lambda reply: home.publish(user, notice=reply)  # noqa: E731
        context = CommandContext(galley, deps.directory, user, deps.start_draft, tell)
        home.publish(user, notice=answer(text, context))


def last_resort_reply(error: Exception) -> str:
    """What a person is told when their click or command failed unexpectedly."""
    return (
        f"Galley could not finish that: {error}. It is in the bot's log; "
        "the review message and `/galley status` show where things stand."
    )


def _ephemeral(client: WebClient, channel: str, user: str, text: str) -> None:
    client.chat_postEphemeral(channel=channel, user=user, text=text)
