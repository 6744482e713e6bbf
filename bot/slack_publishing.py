"""Slack as a destination (`publish = { to = "slack", channel = … }`) and as the alert
channel. Publications carry metadata with their effect key, so a post whose outcome was
unknown is found in the channel history before anything is sent again. A thread's later
parts are replies in the first message's thread (docs/design.md §31).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from bot.alert_blocks import (
    PUBLISH_EVENT_TYPE,
    MessageTooLong,
    alert_message,
    publication_message,
)
from bot.block_kit import DRAFT_TEXT_BUDGET
from bot.mrkdwn import escape_mrkdwn
from bot.slack_images import image_blocks, upload_file
from bot.slack_surface import SlackChannels
from core.errors import EffectNotSent, LookupUnavailable, ReadRefused
from core.policies import ThreadStyle
from core.ports import (
    Fit,
    ImageBytes,
    MessageRef,
    PostCounts,
    PostFound,
    PostGone,
    PostQuery,
    PostRead,
    PostUnknown,
    Publication,
    RunAlert,
    UploadedMedia,
)

alert_log = logging.getLogger("galley.alert")


class SlackChannelPublisher:
    # a thread's later parts are replies in the first message's thread, each its own
    # effect and receipt, found again by its key among the thread's replies
    thread_style = ThreadStyle.PART_BY_PART

    def __init__(self, channels: SlackChannels, channel: str) -> None:
        self.channels = channels
        self.channel = channel

    @property
    def target(self) -> str:
        return f"slack:{self.channel}"

    def publish(self, publication: Publication) -> str:
        try:
            message = publication_message(publication.text, publication.effect_key)
        except MessageTooLong as exc:  # refused before sending: repeating cannot help
            raise EffectNotSent(str(exc), permanent=True) from exc
        place = publication.reply_to
        if place is not None:
            message["thread_ts"] = place.root
        if publication.media:  # the files uploaded for it (docs/design.md §32)
            message["blocks"] = [*message["blocks"], *image_blocks(publication.media)]
        return self.channels.post(self.channel, **message).ts

    def upload_image(self, image: ImageBytes) -> UploadedMedia:
        """The image as a file of the app's, shown by the post's image block."""
        return upload_file(self.channels.client, image)

    def lookup(self, query: PostQuery) -> str | None:
        if query.reply_to is not None:
            thread = MessageRef(self.channel, query.reply_to.root)
            found = self.channels.find_in_thread(
                thread, PUBLISH_EVENT_TYPE, "effect_key", query.effect_key
            )
        else:
            found = self.channels.find(
                self.channel, PUBLISH_EVENT_TYPE, "effect_key", query.effect_key
            )
        return None if found is None else found.ts

    def link(self, external_id: str) -> str | None:
        """The message's permalink, from the channel and ts (the workspace URL is asked once)."""
        return self.channels.permalink(MessageRef(self.channel, external_id))

    def fit(self, text: str) -> Fit:
        """Slack counts the escaped text: `&`, `<` and `>` become entities."""
        return Fit(self.target, "Slack", len(escape_mrkdwn(text)), DRAFT_TEXT_BUDGET)

    # --- read back (docs/design.md §28) ---

    counts_per_request = 1  # conversations.history reads one message at its ts

    def read_post(self, external_id: str, effect_key: str) -> PostRead:
        """The message at its ts: absent from the channel's history is gone (deleted)."""
        try:
            found = self.channels.message_at(self.channel, external_id)
        except LookupUnavailable as exc:
            return PostUnknown(str(exc))
        return PostFound() if found is not None else PostGone(404, "message_not_found")

    def read_counts(self, external_ids: Sequence[str]) -> dict[str, PostCounts]:
        """Reactions (every emoji counts as a like) and thread replies of each message."""
        counts = {}
        for ts in external_ids:
            try:
                found = self.channels.message_at(self.channel, ts)
            except LookupUnavailable as exc:
                raise ReadRefused(str(exc)) from exc
            if found is not None:
                reactions = found.get("reactions") or []
                likes = sum(int(r.get("count") or 0) for r in reactions)
                counts[ts] = PostCounts(likes=likes, replies=int(found.get("reply_count") or 0))
        return counts


class SlackAlerter:
    def __init__(self, channels: SlackChannels, channel: str) -> None:
        self.channels = channels
        self.channel = channel

    def alert(self, alert: RunAlert) -> MessageRef:
        ref = self.channels.post(self.channel, **alert_message(alert))
        fields = {"event": "alert", "run_id": alert.run_id, "recipe": alert.recipe}
        fields |= {"headline": alert.headline, "channel": ref.channel, "ts": ref.ts}
        alert_log.warning(
            "alert for %s posted to %s: %s",
            alert.run_id,
            ref.channel,
            alert.headline,
            extra={"galley": fields},
        )
        return ref

    def settle(self, ref: MessageRef, alert: RunAlert) -> None:
        self.channels.update(ref, **alert_message(alert, actionable=False))
