"""Bolt listeners: each acknowledges first, then parses, calls one core operation and
renders the answer. No listener waits on the model or a destination: what it starts is
named by `bot/work.py` `Work` and runs on the pool named after it.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable
from functools import partial
from types import MethodType
from typing import Any

from slack_bolt import Ack, App, Respond
from slack_sdk import WebClient

from bot.alert_listeners import AlertListeners
from bot.app_home import command_words
from bot.block_kit import EDIT_MODAL
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
    parse_button_value,
    review_reply,
)
from bot.commands import CommandContext, answer
from bot.home_tab import HomeTab
from bot.image_blocks import ACTION_REMOVE_IMAGE, alts_of, parse_remove_value, with_alt_fields
from bot.image_drops import Drop, drops_in, take_drop
from bot.mrkdwn import escape_mrkdwn
from bot.post_modal import POST_MODAL, TEXT_BLOCK, post_modal, read_post
from bot.replies import ephemeral, ephemeral_in_thread, in_thread, last_resort_reply
from bot.review_modals import (
    REDRAFT_MODAL,
    REJECT_MODAL,
    edit_modal,
    edited_text,
    redraft_modal,
    redraft_note,
    reject_modal,
    reject_reason,
)
from bot.slack_files import SlackFiles, file_origin
from bot.version_blocks import (
    ACTION_SHOW_ALL,
    edit_set_modal,
    edited_set_text,
    edited_versions,
    is_set,
    show_all_modal,
)
from bot.work import Work
from core.api.desk import Desk
from core.api.draft_images import DraftImages
from core.api.posts import PostDraft, write_post
from core.api.services import Services
from core.errors import GalleyError
from core.policies import FollowUp, Verdict
from core.post_body import PostBody
from core.review.queue import ReviewAnswer, load_item
from core.states import DraftState

log = logging.getLogger(__name__)


def register(app: App, work: Work, home: HomeTab | None = None) -> Listeners:
    """Attach every Galley listener to the Bolt app, from `LISTENERS`."""
    listeners = Listeners(app, work, home)
    for on, matcher, method in LISTENERS:
        on(app, matcher)(MethodType(method, listeners))
    app.error(listeners.on_error)
    return listeners


class Listeners(AlertListeners):
    """Bolt's listeners for one app: each acks, parses, calls one core operation and
    renders the answer. Slack names the person; the same desk as the notebook's checks
    who may decide."""

    def __init__(self, app: App, work: Work, home: HomeTab | None = None) -> None:
        self.app = app
        self.work: Work = work  # what a listener may start, each by its name
        self.home: HomeTab | None = home  # when the bot publishes one
        self.core: Services = work.services.core
        self.slack = self.core.config.slack
        self.desk: Desk = self.core.desk()
        self.images = DraftImages(self.core.store, self.core.config, self.core.images, self.desk)

    # --- review buttons and modals --------------------------------------------------------

    def settle(self, result: ReviewAnswer, tell: Callable[[str], object]) -> None:
        if result.item is not None:  # shows the decision, or refreshes a stale message
            self.work.show_review(result.item)
        if not result.accepted:
            tell(review_reply(result))
        elif result.follow_up == FollowUp.PUBLISH and result.item is not None:
            self.work.publish_soon(result.item.run_id)

    def decide_as(
        self, user: str, button: str, verdict: Verdict, reason: str | None = None
    ) -> ReviewAnswer:
        key, revision = parse_button_value(button)
        return self.desk.decide(key, revision, verdict, user=user, reason=reason)

    def on_approve(self, ack: Ack, body: dict[str, Any], respond: Respond) -> None:
        ack()
        result = self.decide_as(body["user"]["id"], body["actions"][0]["value"], Verdict.APPROVED)
        self.settle(result, in_thread(respond))

    def on_unapprove(self, ack: Ack, body: dict[str, Any], respond: Respond) -> None:
        ack()
        key, revision = parse_button_value(body["actions"][0]["value"])
        result = self.desk.unapprove(key, revision, user=body["user"]["id"])
        self.settle(result, in_thread(respond))

    # --- images (docs/design.md §32) ------------------------------------------------------

    def on_message(self, event: dict[str, Any], client: WebClient) -> None:
        """Image files shared in a review message's thread, each added to its draft."""
        for drop in drops_in(event, self.slack.review_channel, self.images):
            tell = ephemeral_in_thread(client, drop.channel, drop.thread_ts, drop.user)
            self.work.take_image_soon(partial(self._take_drop, drop, tell, client))

    def _take_drop(self, drop: Drop, tell: Callable[[str], object], client: WebClient) -> None:
        files = SlackFiles(str(client.token), file_origin(client.base_url))
        answer = take_drop(drop, self.images, files, tell, self.core.alt_texts)
        if answer is not None:
            self.settle(answer, tell)

    def on_remove_image(self, ack: Ack, body: dict[str, Any], respond: Respond) -> None:
        ack()
        key, revision, sha256 = parse_remove_value(body["actions"][0]["value"])
        result = self.images.remove(key, revision, sha256, user=body["user"]["id"])
        self.settle(result, in_thread(respond))

    def on_reject(self, ack: Ack, body: dict[str, Any], client: WebClient) -> None:
        ack()
        key, revision = parse_button_value(body["actions"][0]["value"])
        client.views_open(trigger_id=body["trigger_id"], view=reject_modal(key, revision))

    def on_reject_submitted(self, ack: Ack, body: dict[str, Any], client: WebClient) -> None:
        ack()
        view, user = body["view"], body["user"]["id"]
        reason = reject_reason(view["state"]["values"])
        result = self.decide_as(user, view["private_metadata"], Verdict.REJECTED, reason)
        self.settle(result, self._ephemeral_to(client, user))

    def on_edit(self, ack: Ack, body: dict[str, Any], client: WebClient, respond: Respond) -> None:
        ack()
        key, revision = parse_button_value(body["actions"][0]["value"])
        item = load_item(self.core.store, key)
        if item is None or item.state != DraftState.READY:
            in_thread(respond)("This draft can no longer be edited.")
            return
        text, images = self.images.editable(item.text)  # one text with images: that text
        modal = edit_set_modal(item, revision) if is_set(text) else edit_modal(key, revision, text)
        client.views_open(trigger_id=body["trigger_id"], view=with_alt_fields(modal, images))

    def on_show_all(
        self, ack: Ack, body: dict[str, Any], client: WebClient, respond: Respond
    ) -> None:
        """A set too long for its message, whole in a modal (docs/design.md §30)."""
        ack()
        key, _ = parse_button_value(body["actions"][0]["value"])
        item = load_item(self.core.store, key)
        if item is None:
            in_thread(respond)("This draft is gone.")
            return
        client.views_open(trigger_id=body["trigger_id"], view=show_all_modal(item))

    def on_edit_submitted(self, ack: Ack, body: dict[str, Any], client: WebClient) -> None:
        view, user = body["view"], body["user"]["id"]
        key, revision = parse_button_value(view["private_metadata"])
        values = view["state"]["values"]
        versions = edited_versions(values)
        if versions is None:  # a plain draft, stored as the plain text typed
            text, first = PostBody.single(edited_text(values)).to_text(), "part_0"
        else:  # a set: every version written whole into one new revision
            item = load_item(self.core.store, key)
            text = (edited_set_text(item.text, versions) if item else None) or ""
            first = next(iter(values), "part_0")
        if not text.strip():
            why = "Every version needs some text: reject the draft instead."
            ack(response_action="errors", errors={first: why})
            return
        ack()
        text = self.images.edited_body(key, text, alts_of(values))  # alt texts as typed
        result = self.desk.edit(key, text, revision, user=user)
        self.settle(result, self._ephemeral_to(client, user))

    def on_redraft(self, ack: Ack, body: dict[str, Any], client: WebClient) -> None:
        ack()
        key, revision = parse_button_value(body["actions"][0]["value"])
        client.views_open(trigger_id=body["trigger_id"], view=redraft_modal(key, revision))

    def on_redraft_submitted(self, ack: Ack, body: dict[str, Any], client: WebClient) -> None:
        """Acknowledged at once; the claim is taken here, the model called on the
        drafting pool. A redelivered submission finds the claim and calls nothing."""
        view, user = body["view"], body["user"]["id"]
        note = redraft_note(view["state"]["values"])
        if not note:
            ack(response_action="errors", errors={"note": "Say what the model should change."})
            return
        ack()
        key, revision = parse_button_value(view["private_metadata"])
        tell = self._ephemeral_to(client, user)
        claimed = self.desk.ask_redraft(self.core.redrafting, key, revision, note, user=user)
        if isinstance(claimed, ReviewAnswer):
            self.settle(claimed, tell)
        else:
            self.work.redraft_soon(claimed, tell)

    # --- /galley, Home --------------------------------------------------------------------

    def on_command(
        self, ack: Ack, command: dict[str, Any], respond: Respond, client: WebClient
    ) -> None:
        ack()

        def tell(text: str) -> object:
            return respond(text, response_type="ephemeral")

        words = command.get("text", "").split()
        if words[:1] == ["post"]:  # a form, not a reply: docs/design.md §37
            refused = self._open_post(client, command, words[1:])
            if refused is not None:
                tell(refused)
            return
        context = CommandContext(self.core, command["user_id"], self.work, tell)
        tell(answer(command.get("text", ""), context))

    # --- a person's own post (docs/design.md §37) -------------------------------------------

    def _open_post(self, client: WebClient, command: dict[str, Any], args: list[str]) -> str | None:
        """`/galley post [recipe]`: the form opened, or why not."""
        if not self.core.may_administer(command["user_id"]):
            return "Only Galley's admins may `post`."
        recipes = list(self.core.config.recipes.values())
        if len(args) > 1 or not recipes:
            return "Usage: `/galley post [recipe]`"
        chosen = self.core.config.recipes.get(args[0]) if args else recipes[0]
        if chosen is None:
            return f"No recipe named {escape_mrkdwn(args[0])}."
        client.views_open(trigger_id=command["trigger_id"], view=post_modal(recipes, chosen))
        return None

    def on_post_submitted(self, ack: Ack, body: dict[str, Any], client: WebClient) -> None:
        """The post written and its review message posted at once; a refusal (over a
        target's limit, a time passed) shown on the form, which stays open."""
        view, user = body["view"], body["user"]["id"]
        form = read_post(view["state"]["values"], view["private_metadata"])
        if not self.core.may_administer(user):
            ack(response_action="errors", errors={TEXT_BLOCK: "Only Galley's admins may post."})
            return
        draft = PostDraft(form.recipe, form.text, form.targets, form.at)
        try:
            written = write_post(self.core, draft, actor=user)
        except GalleyError as exc:
            ack(response_action="errors", errors={TEXT_BLOCK: str(exc)[:500]})
            return
        ack()
        for key in written.drafts:
            item = load_item(self.core.store, key)
            if item is not None:
                self.work.post_review_soon(item)
        said = [f"`{run}` waits for review." for run in written.added]
        said += [f"`{run}` was written already." for run in written.already]
        self._ephemeral_to(client, user)(" ".join(said))

    def on_home_opened(self, event: dict[str, Any]) -> None:
        if self.home is not None and event.get("tab") == "home":
            self.home.opened(event["user"])

    def on_home_button(self, ack: Ack, body: dict[str, Any]) -> None:
        """A Home button is its `/galley` command: the same checks, the answer on Home."""
        ack()
        home, user, action = self.home, body["user"]["id"], body["actions"][0]
        if home is None:
            return
        text = command_words(action["action_id"], action["value"])
        tell = lambda reply: home.publish(user, notice=reply)  # noqa: E731
        context = CommandContext(self.core, user, self.work, tell)
        home.publish(user, notice=answer(text, context))

    def on_error(self, error: Exception, body: dict[str, Any], respond: Respond | None) -> None:
        """The last resort: a listener that raised still answers the person who clicked
        or typed, with what went wrong; the state Galley shows is what holds."""
        log.error("listener failed on %s: %s", body.get("type", "?"), error, exc_info=error)
        # Told from a thread of its own: Bolt answers Slack only once this handler returns,
        # and a call to Slack here could outlast the 3 s Slack waits for that answer.
        threading.Thread(
            target=self._tell_failure, args=(error, body, respond), name="tell-failure"
        ).start()

    def _tell_failure(
        self, error: Exception, body: dict[str, Any], respond: Respond | None
    ) -> None:
        text = last_resort_reply(error)
        user = (body.get("user") or {}).get("id") or body.get("user_id")
        try:
            if respond is not None and respond.response_url:
                respond(text, response_type="ephemeral", replace_original=False)
            elif isinstance(user, str) and body.get("type") == "view_submission":
                ephemeral(self.app.client, self.slack.review_channel, user, text)
        except Exception as exc:  # nothing is left to tell them; keep the log
            log.error("could not tell %s what failed: %s", user, exc)

    def _ephemeral_to(self, client: WebClient, user: str) -> Callable[[str], object]:
        return lambda text: ephemeral(client, self.slack.review_channel, user, text)


# Every listener, one row each as Bolt registers it (`App.action(matcher)(method)`): the
# registration, what Slack sends, and the method answering it.
LISTENERS: tuple[tuple[Callable[..., Any], str | re.Pattern[str], Callable[..., Any]], ...] = (
    (App.action, ACTION_APPROVE, Listeners.on_approve),
    (App.action, ACTION_UNAPPROVE, Listeners.on_unapprove),
    (App.action, ACTION_REJECT, Listeners.on_reject),
    (App.view, REJECT_MODAL, Listeners.on_reject_submitted),
    (App.action, ACTION_EDIT, Listeners.on_edit),
    (App.view, EDIT_MODAL, Listeners.on_edit_submitted),
    (App.action, ACTION_SHOW_ALL, Listeners.on_show_all),
    (App.action, ACTION_REDRAFT, Listeners.on_redraft),
    (App.view, REDRAFT_MODAL, Listeners.on_redraft_submitted),
    (App.action, ACTION_ALERT_PUBLISHED, Listeners.on_alert_published),
    (App.action, ACTION_ALERT_RETRY, Listeners.on_alert_retry),
    (App.action, ACTION_ALERT_CANCEL, Listeners.on_alert_cancel),
    (App.action, ACTION_ALERT_SKIP, Listeners.on_alert_skip),
    (App.command, "/galley", Listeners.on_command),
    (App.view, POST_MODAL, Listeners.on_post_submitted),
    (App.event, "app_home_opened", Listeners.on_home_opened),
    (App.action, re.compile(r"^galley_home_"), Listeners.on_home_button),
    (App.event, "message", Listeners.on_message),  # an image dropped in a review thread
    (App.action, ACTION_REMOVE_IMAGE, Listeners.on_remove_image),
)
