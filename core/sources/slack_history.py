"""The `slack` reader: what people wrote in a channel in the window, each message with
its thread and its link (docs/design.md §26). Reads auth.test, conversations.history,
conversations.replies and users.info only; leaves out bots' messages (Galley's own
among them) and never keeps a mention's syntax.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from core.http_calls import retry_after_seconds
from core.sources.fetching import SourceClient, get, source_client, status_error
from core.sources.items import ReadContext, SourceItem, SourceReadError, Window
from core.sources.slack_text import readable_text
from core.sources.specs import SlackSource

SLACK_API = "https://slack.com/api/"
PAGE_SIZE = "200"
MAX_PAGES = 10
TITLE_CHARS = 80
UNKNOWN_PERSON = "someone"
# Messages people write; joins, topic changes and the like are not news.
PEOPLES_SUBTYPES = frozenset((None, "thread_broadcast", "file_share", "me_message"))
# Slack's errors that asking again may cure; every other (not_in_channel, invalid_auth,
# missing_scope, channel_not_found, …) needs a person.
RETRYABLE_ERRORS = frozenset(
    ("ratelimited", "internal_error", "fatal_error", "service_unavailable", "request_timeout")
)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class _SlackReader:
    """One read of one channel: its client, token and the names already looked up."""

    def __init__(self, spec: SlackSource, context: ReadContext, client: SourceClient) -> None:
        self.spec = spec
        self.context = context
        self.client = client
        self.base = (spec.api or context.slack_api or SLACK_API).rstrip("/")
        self._workspace: str | None = None

    def call(self, method: str, params: dict[str, str]) -> dict[str, Any]:
        """One Web API method's answer; SourceReadError unless `ok`."""
        source = self.spec.label
        answer = get(self.client, source, f"{self.base}/{method}", params=params, configured=True)
        if answer.status == 429:
            wait = retry_after_seconds(answer.headers.get("retry-after"))
            after = f" (Retry-After {wait:g}s)" if wait is not None else ""
            raise SourceReadError(source, f"{method}: ratelimited{after}", retryable=True)
        if not answer.ok:
            raise status_error(source, answer)
        try:
            payload = answer.json()
        except ValueError as exc:
            raise SourceReadError(source, f"{method} answered no JSON", retryable=True) from exc
        if not isinstance(payload, dict) or not payload.get("ok"):
            error = str(payload.get("error")) if isinstance(payload, dict) else "no answer"
            raise SourceReadError(source, f"{method}: {error}", retryable=error in RETRYABLE_ERRORS)
        return payload

    def messages(self, window: Window) -> Iterator[dict[str, Any]]:
        """The channel's top-level messages by people in `window`, newest first."""
        params = {"channel": self.spec.channel, "limit": PAGE_SIZE, "inclusive": "true"}
        params["latest"] = slack_ts(window.end)
        if window.start is not None:
            params["oldest"] = slack_ts(window.start)
        for _ in range(MAX_PAGES):
            page = self.call("conversations.history", params)
            yield from (m for m in page.get("messages") or [] if by_people(m))
            cursor = (page.get("response_metadata") or {}).get("next_cursor")
            if not page.get("has_more") or not cursor:
                return
            params["cursor"] = cursor

    def replies(self, parent: dict[str, Any], window: Window) -> list[dict[str, Any]]:
        """The thread's replies by people up to the window's end, oldest first."""
        params = {"channel": self.spec.channel, "ts": str(parent["ts"]), "limit": PAGE_SIZE}
        params |= {"latest": slack_ts(window.end), "inclusive": "true"}
        found: list[dict[str, Any]] = []
        for _ in range(MAX_PAGES):
            page = self.call("conversations.replies", params)
            found += [m for m in page.get("messages") or [] if m.get("ts") != parent["ts"]]
            cursor = (page.get("response_metadata") or {}).get("next_cursor")
            if not page.get("has_more") or not cursor:
                break
            params["cursor"] = cursor
        return [m for m in found if by_people(m)]

    def name_of(self, user_id: str) -> str:
        """The person's display name, looked up once per process (context.user_names)."""
        names = self.context.user_names
        if user_id not in names:
            try:
                user = self.call("users.info", {"user": user_id}).get("user") or {}
            except SourceReadError as exc:
                if exc.retryable:
                    raise
                return UNKNOWN_PERSON  # a deleted or foreign user: not worth failing the read
            profile = user.get("profile") or {}
            name = profile.get("display_name") or profile.get("real_name") or user.get("real_name")
            names[user_id] = str(name or user.get("name") or UNKNOWN_PERSON)
        return names[user_id]

    def permalink(self, ts: str) -> str | None:
        """The message's address in the workspace (auth.test's `url`, asked once), as
        Slack's own "Copy link" gives it; None when the workspace does not say."""
        if self._workspace is None:
            self._workspace = str(self.call("auth.test", {}).get("url") or "").rstrip("/")
        if not self._workspace:
            return None
        return f"{self._workspace}/archives/{self.spec.channel}/p{ts.replace('.', '')}"

    def item(self, message: dict[str, Any], window: Window) -> SourceItem:
        lines = [self.said(message)]
        if int(message.get("reply_count") or 0) > 0:
            lines += [f"  reply: {self.said(reply)}" for reply in self.replies(message, window)]
        first_line = readable_text(str(message.get("text") or ""), self.name_of).split("\n", 1)[0]
        return SourceItem(
            source=self.spec.label,
            item_id=str(message["ts"]),
            title=first_line[:TITLE_CHARS],
            link=self.permalink(str(message["ts"])),
            published_at=ts_moment(str(message["ts"])),
            text="\n".join(lines),
        )

    def said(self, message: dict[str, Any]) -> str:
        who = self.name_of(str(message["user"])) if message.get("user") else UNKNOWN_PERSON
        return f"{who}: {readable_text(str(message.get('text') or ''), self.name_of)}"


def read_slack(spec: SlackSource, window: Window, context: ReadContext) -> list[SourceItem]:
    """The newest `max_items` messages people wrote in the channel in `window`."""
    headers = {"Authorization": f"Bearer {context.slack_token}"} if context.slack_token else {}
    with source_client(context, headers) as client:
        reader = _SlackReader(spec, context, client)
        items = []
        for message in reader.messages(window):
            items.append(reader.item(message, window))
            if len(items) >= spec.max_items:
                break
        return items


def by_people(message: dict[str, Any]) -> bool:
    """Written by a person: not a bot's (ours included), not a join or a topic change."""
    return (
        not message.get("bot_id")
        and message.get("subtype") in PEOPLES_SUBTYPES
        and bool(message.get("ts"))
    )


def slack_ts(moment: datetime) -> str:
    """A moment as Slack's `ts` string: seconds since the epoch, six decimals."""
    micros = (moment - _EPOCH) // timedelta(microseconds=1)
    return f"{micros // 1_000_000}.{micros % 1_000_000:06d}"


def ts_moment(ts: str) -> datetime:
    micros = int(Decimal(ts) * 1_000_000)
    return _EPOCH + timedelta(microseconds=micros)
