"""The Slack side of the review loop: posting, finding and updating review messages.

Implements `core.ports.ReviewSurface` and `Directory` on the real `slack_sdk` client.
`chat.postMessage` is never re-sent blindly: a refused call (429, an error answer,
a refused connection) is known not to have happened; a timeout or a dropped answer
is reported as unknown, and the outbox looks the message up before trying again.
"""

from __future__ import annotations

import http.client
import threading
import time
import urllib.error
from typing import Any

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bot.alert_blocks import mention
from bot.blocks import (
    DRAFT_EVENT_TYPE,
    backpressure_text,
    draft_message,
    draft_metadata,
    notice_blocks,
)
from bot.review_facts import Permalink, fact_lines
from core.errors import EffectNotSent, EffectOutcomeUnknown, LookupUnavailable, MessageGone
from core.http_calls import never_sent, retry_after_seconds
from core.ports import BackpressureNotice, MessageRef, ReviewItem, ReviewReminder
from core.spoken import spoken_duration
from core.telemetry import observe

POSTS_PER_CHANNEL_SECONDS = 1.05  # Slack allows about one message per second per channel;
# the margin absorbs jitter that would otherwise turn an on-time post into a 429
MAX_RATE_LIMIT_WAITS = 30
HISTORY_PAGES = 5  # how far back a lookup reads: 5 pages of 200 messages
GONE_ERRORS = ("message_not_found",)  # chat.update on a message deleted in the channel


class CountedWebClient(WebClient):
    """The Web API client whose every call, by anyone (Galley, Bolt's listeners), is
    counted in `galley_slack_calls_total` by method and outcome, 429s included."""

    def api_call(self, api_method: str, *args: Any, **kwargs: Any) -> Any:
        try:
            response = super().api_call(api_method, *args, **kwargs)
        except SlackApiError as exc:
            status = exc.response.status_code
            observe.slack_counted(api_method, "rate_limited" if status == 429 else "refused")
            raise
        except urllib.error.URLError as exc:
            sent = not never_sent(exc)
            observe.slack_counted(api_method, "no_answer" if sent else "unreachable")
            raise
        except (TimeoutError, ConnectionError, http.client.HTTPException):
            observe.slack_counted(api_method, "no_answer")
            raise
        observe.slack_counted(api_method, "ok")
        return response


class ChannelPacer:
    """Spaces posts to one channel; a 429's Retry-After pushes the next slot back."""

    def __init__(self, interval: float = POSTS_PER_CHANNEL_SECONDS) -> None:
        self.interval = interval
        self._next: dict[str, float] = {}
        self._lock = threading.Lock()

    def wait_turn(self, channel: str) -> None:
        with self._lock:
            now = time.monotonic()
            turn = max(now, self._next.get(channel, now))
            self._next[channel] = turn + self.interval
        time.sleep(max(0.0, turn - now))

    def back_off(self, channel: str, seconds: float) -> None:
        with self._lock:
            self._next[channel] = max(self._next.get(channel, 0.0), time.monotonic() + seconds)


def render(
    item: ReviewItem, permalink: Permalink | None = None
) -> tuple[str, list[dict[str, Any]]]:
    """The message for a draft in its current state, with its fact lines."""
    return draft_message(item, fact_lines(item, permalink))


class SlackChannels:
    """Posting to and reading channels under Galley's rules: paced, no blind re-sends."""

    def __init__(self, client: WebClient, pacer: ChannelPacer | None = None) -> None:
        self.client = client
        self.pacer = pacer or ChannelPacer()
        self._workspace_url: str | None = None

    def permalink(self, ref: MessageRef) -> str | None:
        """A link to a message, from the workspace's URL (`auth.test`, asked once); None
        while Slack cannot say, so a message goes out without the link, never later."""
        if self._workspace_url is None:
            try:
                self._workspace_url = str(self.client.auth_test().get("url") or "") or None
            except (SlackApiError, urllib.error.URLError, OSError, http.client.HTTPException):
                return None
        if self._workspace_url is None:
            return None
        base = self._workspace_url.rstrip("/")
        return f"{base}/archives/{ref.channel}/p{ref.ts.replace('.', '')}"

    def post(self, channel: str, **fields: Any) -> MessageRef:
        answer = self.call(self.client.chat_postMessage, channel=channel, **fields)
        return MessageRef(str(answer["channel"]), str(answer["ts"]))

    def update(self, ref: MessageRef, **fields: Any) -> None:
        self.call(self.client.chat_update, channel=ref.channel, ts=ref.ts, **fields)

    def find(self, channel: str, event_type: str, field: str, value: str) -> MessageRef | None:
        """The newest message carrying this metadata; None if clearly absent."""
        cursor: str | None = None
        try:
            for _ in range(HISTORY_PAGES):
                page = self.client.conversations_history(
                    channel=channel, limit=200, include_all_metadata=True, cursor=cursor
                )
                messages: list[dict[str, Any]] = page.get("messages") or []
                for message in messages:
                    if _carries(message, event_type, field, value):
                        return MessageRef(channel, str(message["ts"]))
                cursor = (page.get("response_metadata") or {}).get("next_cursor") or None
                if not cursor:
                    return None
        except (SlackApiError, urllib.error.URLError, OSError, http.client.HTTPException) as exc:
            raise LookupUnavailable(f"conversations.history failed: {exc}") from exc
        raise LookupUnavailable(f"not in the newest {HISTORY_PAGES * 200} messages")

    def find_in_thread(
        self, ref: MessageRef, event_type: str, field: str, value: str
    ) -> MessageRef | None:
        """A reply in `ref`'s thread carrying this metadata (`conversations.replies`: the
        parent, then the replies oldest first); None if clearly absent."""
        cursor: str | None = None
        try:
            for _ in range(HISTORY_PAGES):
                page = self.client.conversations_replies(
                    channel=ref.channel,
                    ts=ref.ts,
                    limit=200,
                    include_all_metadata=True,
                    cursor=cursor,
                )
                messages: list[dict[str, Any]] = page.get("messages") or []
                for message in messages:
                    if _carries(message, event_type, field, value):
                        return MessageRef(ref.channel, str(message["ts"]))
                cursor = (page.get("response_metadata") or {}).get("next_cursor") or None
                if not cursor:
                    return None
        except (SlackApiError, urllib.error.URLError, OSError, http.client.HTTPException) as exc:
            raise LookupUnavailable(f"conversations.replies failed: {exc}") from exc
        raise LookupUnavailable(f"not in the first {HISTORY_PAGES * 200} replies")

    def message_at(self, channel: str, ts: str) -> dict[str, Any] | None:
        """The message posted at `ts` (with its reactions and reply count); None when the
        channel no longer holds it (deleted). LookupUnavailable when Slack cannot say."""
        try:
            page = self.client.conversations_history(
                channel=channel, latest=ts, oldest=ts, inclusive=True, limit=1
            )
        except (SlackApiError, urllib.error.URLError, OSError, http.client.HTTPException) as exc:
            raise LookupUnavailable(f"conversations.history failed: {exc}") from exc
        messages: list[dict[str, Any]] = page.get("messages") or []
        return next((m for m in messages if str(m.get("ts")) == ts), None)

    def call(self, method: Any, *, channel: str, **fields: Any) -> dict[str, Any]:
        """One Web API call; only a 429 (a refusal, so nothing happened) is repeated.
        Posts and updates are logged with their outcome (CountedWebClient counts them)."""
        name = api_method(method)
        for _ in range(MAX_RATE_LIMIT_WAITS):
            self.pacer.wait_turn(channel)
            try:
                answer = dict(method(channel=channel, **fields).data)
            except SlackApiError as exc:
                if exc.response.status_code != 429:
                    observe.slack_logged(name, "refused", channel=channel, error=_error(exc))
                    raise _classify_answer(exc) from exc
                observe.slack_logged(name, "rate_limited", channel=channel)
                self.pacer.back_off(channel, _retry_after(exc))
            except urllib.error.URLError as exc:
                if never_sent(exc):
                    observe.slack_logged(name, "unreachable", channel=channel)
                    raise EffectNotSent(f"Slack unreachable: {exc.reason}") from exc
                observe.slack_logged(name, "no_answer", channel=channel)
                raise EffectOutcomeUnknown(f"no answer from Slack: {exc.reason}") from exc
            except (TimeoutError, ConnectionError, http.client.HTTPException) as exc:
                observe.slack_logged(name, "no_answer", channel=channel)
                raise EffectOutcomeUnknown(f"no complete answer from Slack: {exc!r}") from exc
            else:
                observe.slack_logged(name, "ok", channel=channel, ts=answer.get("ts"))
                return answer
        raise EffectNotSent(f"still rate limited after {MAX_RATE_LIMIT_WAITS} waits")


class SlackReviewSurface:
    """`core.ports.ReviewSurface`: review messages in the review channel."""

    def __init__(self, channels: SlackChannels, channel: str) -> None:
        self.channels = channels
        self.channel = channel

    def post_review(self, item: ReviewItem) -> MessageRef:
        text, blocks = render(item, self.channels.permalink)
        return self.channels.post(
            self.channel,
            text=text,
            blocks=blocks,
            metadata=draft_metadata(item.draft_key, item.revision),
            unfurl_links=False,
            unfurl_media=False,
        )

    def announce(self, notice: BackpressureNotice) -> MessageRef:
        text = backpressure_text(notice)
        return self.channels.post(self.channel, text=text, blocks=notice_blocks(text))

    def update_review(self, ref: MessageRef, item: ReviewItem) -> None:
        text, blocks = render(item, self.channels.permalink)
        self.channels.update(
            ref, text=text, blocks=blocks, metadata=draft_metadata(item.draft_key, item.revision)
        )

    def find_review(self, draft_key: str) -> MessageRef | None:
        return self.channels.find(self.channel, DRAFT_EVENT_TYPE, "draft_key", draft_key)

    def remind(self, reminder: ReviewReminder) -> MessageRef:
        """`core.ports.ReviewThread`: a reply in the review message's thread."""
        text = reminder_text(reminder)
        ref = reminder.thread
        return self.channels.post(ref.channel, text=text, thread_ts=ref.ts, unfurl_links=False)


def reminder_text(reminder: ReviewReminder) -> str:
    """`Still waiting for review after 4 hours: <@U…> <!subteam^S…>`."""
    waited = spoken_duration(reminder.waiting)
    who = " ".join(mention(slack_id) for slack_id in reminder.mentions)
    head = "Waiting for review too long" if reminder.escalated else "Still waiting for review"
    return f"{head} after {waited} (revision {reminder.revision}). {who}".rstrip()


def api_method(bound: Any) -> str:
    """`client.chat_postMessage` → "chat.postMessage", the name Slack documents."""
    return str(getattr(bound, "__name__", "unknown")).replace("_", ".")


def _error(exc: SlackApiError) -> str:
    data = exc.response.data
    return str(data.get("error")) if isinstance(data, dict) else str(exc.response.status_code)


def _classify_answer(exc: SlackApiError) -> EffectNotSent | EffectOutcomeUnknown:
    status = exc.response.status_code
    error = exc.response.get("error") if isinstance(exc.response.data, dict) else None
    if status >= 500:
        return EffectOutcomeUnknown(f"Slack answered HTTP {status} ({error})")
    if error in GONE_ERRORS:
        return MessageGone(f"Slack refused: {error} (the message was deleted)")
    return EffectNotSent(f"Slack refused: {error or status}")


def _retry_after(exc: SlackApiError) -> float:
    """A 429's Retry-After in seconds (a number or an HTTP date); 1 s when there is none."""
    seconds = retry_after_seconds(exc.response.headers.get("Retry-After"))
    return 1.0 if seconds is None else seconds


def _carries(message: dict[str, Any], event_type: str, field: str, value: str) -> bool:
    metadata = message.get("metadata") or {}
    payload = metadata.get("event_payload") or {}
    return bool(metadata.get("event_type") == event_type and payload.get(field) == value)


class SlackDirectory:
    """User group members from `usergroups.users.list`, cached for `ttl` seconds."""

    def __init__(self, client: WebClient, ttl: float = 60.0) -> None:
        self.client, self.ttl = client, ttl
        self._cache: dict[str, tuple[float, frozenset[str]]] = {}
        self._lock = threading.Lock()

    def group_members(self, group_id: str) -> frozenset[str]:
        with self._lock:
            cached = self._cache.get(group_id)
            if cached and time.monotonic() - cached[0] < self.ttl:
                return cached[1]
        try:
            users = frozenset(self.client.usergroups_users_list(usergroup=group_id)["users"])
        except SlackApiError:
            users = frozenset()  # an unknown group grants nothing
        with self._lock:
            self._cache[group_id] = (time.monotonic(), users)
        return users
