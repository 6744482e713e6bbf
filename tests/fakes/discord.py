"""A local fake of Discord's REST API (v10) for a bot, served over real HTTP, for an `httpx`
client pointed at ``fake.api`` (the target's `api` base URL).

It answers as Discord documents (Create Message, Get Channel Messages, rate limits, JSON
error codes) where it matters to Galley: `Authorization: Bot <token>` or `401
{"message": "401: Unauthorized", "code": 0}`; a channel the bot cannot see is `403
Missing Access` (50001), an unknown one `404 Unknown Channel` (10003); `content` over
2,000 characters or a `nonce` over 25 is `400 Invalid Form Body` (50035) with the field
under `errors`; with `enforce_nonce` a nonce the same author used within the nonce window
(`nonce_seconds`, a few minutes) returns that message (200) and makes none, checked before
the insert, so two concurrent sends both post (script `slow` to widen the window); a 429
carries `{"message", "retry_after", "global"}` and `Retry-After`, `X-RateLimit-*`
headers; message ids are snowflakes (milliseconds since 2015 << 22), so `after=` a
snowflake made from a time lists the messages since; `GET …/messages` answers at most
100 (`limit`), newest first. Each message records whom Discord would have notified
(`notified`: @everyone/@here, users, roles), after `allowed_mentions`.

In-process: ``with FakeDiscord() as fake: fake.script("create", accept_then_drop())``.
Separate process (first stdout line is the URL)::

    python -m tests.fakes.discord --port 0 --state-file PATH
"""

from __future__ import annotations

import itertools
import json
import math
import re
import time
from datetime import UTC, datetime
from typing import Any

from tests.fakes import server, social
from tests.fakes.discord_messages import (
    EVERYONE,
    ROLE,
    USER,
    attachments_of,
    error,
    form_error,
    notified,
    public,
)
from tests.fakes.mastodon_media import parse_multipart
from tests.fakes.social import Action, Call, Reply, Route

TOKEN = "discord-bot-token-galley"
BOT_ID = "1300000000000000001"
BOT_NAME = "galley"
PERSON_ID = "1300000000000000002"  # a person who writes in the channel too
GUILD_ID = "1200000000000000001"
CHANNEL_ID = "1250000000000000001"
HIDDEN_CHANNEL = "1250000000000000009"  # exists, the bot lacks View Channel
MAX_CONTENT = 2000
MAX_NONCE = 25
NONCE_SECONDS = 300.0  # Discord: "checked for uniqueness in the past few minutes"
MAX_LIMIT = 100
DISCORD_EPOCH_MS = 1_420_070_400_000
API = "/api/v10"


def rate_limited(retry_after: float = 64.57, *, is_global: bool = False) -> Action:
    """429 as Discord answers it: the body's `retry_after` in seconds with decimals,
    `Retry-After` rounded up, the bucket's `X-RateLimit-*` headers."""
    headers = {
        "Retry-After": str(math.ceil(retry_after)),
        "X-RateLimit-Limit": "5",
        "X-RateLimit-Remaining": "0",
        "X-RateLimit-Reset": f"{time.time() + retry_after:.3f}",
        "X-RateLimit-Reset-After": f"{retry_after:.3f}",
        "X-RateLimit-Bucket": "80c17d2f203122d936070c88c8d10f33",
        "X-RateLimit-Scope": "global" if is_global else "user",
    }
    if is_global:
        headers["X-RateLimit-Global"] = "true"
    body = {
        "message": "You are being rate limited.",
        "retry_after": retry_after,
        "global": is_global,
    }
    return social.status(429, body, headers)


def snowflake(at: float, sequence: int) -> str:
    return str(((int(at * 1000) - DISCORD_EPOCH_MS) << 22) | (sequence & 0xFFF))


class FakeDiscord(social.SocialFake):
    """One guild with one channel the bot can post in (`CHANNEL_ID`) and one it cannot
    see; bots by token (`bots`: token -> user id)."""

    def __init__(
        self,
        *,
        state_file: server.StrPath | None = None,
        port: int = 0,
        nonce_seconds: float = NONCE_SECONDS,
    ) -> None:
        super().__init__(state_file=state_file, port=port)
        self.bots = {TOKEN: BOT_ID}
        self.nonce_seconds = nonce_seconds
        self._sequence = itertools.count(1)

    @property
    def api(self) -> str:
        return self.url + API

    # --- what tests use ---

    def messages(self, author: str = BOT_ID) -> list[dict[str, Any]]:
        return self.posts_of(author)

    def post_as(self, author: str, content: str, *, at: float | None = None) -> dict[str, Any]:
        """A message someone else (a person, another bot) writes in the channel."""
        user = {"id": author, "username": f"user{author[-3:]}", "bot": False}
        return self._create(user, {"content": content}, held=False, parent=None, at=at)

    def set_reactions(self, message_id: str, **by_emoji: int) -> None:
        """Reactions on a message from now on: `set_reactions(id, thumbsup=3, tada=1)`."""
        self.set_counts(lambda post: post["id"] == message_id, **by_emoji)

    # --- routes ---

    def route(self, method: str, path: str) -> tuple[str, Route] | None:
        path = path.rstrip("/").removeprefix(API)
        if (method, path) == ("GET", "/users/@me"):
            return "me", self._me
        channel = re.fullmatch(r"/channels/(\d+)", path)
        if method == "GET" and channel:
            return "channel", lambda call: self._channel(call, channel.group(1))
        messages = re.fullmatch(r"/channels/(\d+)/messages", path)
        if messages and method == "POST":
            return "create", lambda call: self._post_message(call, messages.group(1))
        if messages and method == "GET":
            return "read", lambda call: self._list(call, messages.group(1))
        one = re.fullmatch(r"/channels/(\d+)/messages/(\d+)", path)
        if one and method == "GET":
            return "message", lambda call: self._message(call, one.group(1), one.group(2))
        return None

    def parse_body(self, raw: bytes, headers: dict[str, str]) -> Any:
        content_type = headers.get("content-type", "")
        if content_type.startswith("multipart/form-data"):
            return parse_multipart(raw, content_type)
        return super().parse_body(raw, headers)

    def error_body(self, code: int, message: str | None = None) -> Any:
        words = {
            400: "400: Bad Request",
            401: "401: Unauthorized",
            403: "Missing Access",
            404: "404: Not Found",
            500: "500: Internal Server Error",
            502: "502: Bad Gateway",
            503: "503: Service Unavailable",
        }
        return error(0, message or words.get(code, f"{code}"))

    def _bot(self, call: Call) -> dict[str, Any] | Reply:
        auth = call.headers.get("authorization", "")
        bot_id = self.bots.get(auth.removeprefix("Bot ")) if auth.startswith("Bot ") else None
        if bot_id is None:
            return 401, error(0, "401: Unauthorized"), {}
        return {"id": bot_id, "username": BOT_NAME, "discriminator": "0", "bot": True}

    def _visible_channel(self, call: Call, channel_id: str) -> dict[str, Any] | Reply:
        bot = self._bot(call)
        if isinstance(bot, tuple):
            return bot
        if channel_id == HIDDEN_CHANNEL:
            return 403, error(50001, "Missing Access"), {}
        if channel_id != CHANNEL_ID:
            return 404, error(10003, "Unknown Channel"), {}
        return bot

    def _me(self, call: Call) -> Reply:
        bot = self._bot(call)
        if isinstance(bot, tuple):
            return bot
        return 200, {**bot, "global_name": None, "avatar": None, "flags": 0, "verified": True}, {}

    def _channel(self, call: Call, channel_id: str) -> Reply:
        bot = self._visible_channel(call, channel_id)
        if isinstance(bot, tuple):
            return bot
        return 200, {"id": channel_id, "type": 0, "guild_id": GUILD_ID, "name": "news"}, {}

    def _post_message(self, call: Call, channel_id: str) -> Reply:
        bot = self._visible_channel(call, channel_id)
        if isinstance(bot, tuple):
            return bot
        body = call.body if isinstance(call.body, dict) else {}
        files: list[dict[str, Any]] = []
        if "payload_json" in body:  # multipart: the JSON body, and files[n] beside it
            files = [body[k] for k in sorted(body) if k.startswith("files[")]
            body = json.loads(body["payload_json"])
        attached = attachments_of(body.get("attachments") or [], files)
        if isinstance(attached, tuple):
            return attached
        body["attachments"] = attached
        content = str(body.get("content") or "")
        nonce = body.get("nonce")
        if nonce is not None and len(str(nonce)) > MAX_NONCE:
            return (
                400,
                form_error("nonce", "BASE_TYPE_MAX_LENGTH", "Must be 25 or fewer in length."),
                {},
            )
        if len(content.encode("utf-16-le")) // 2 > MAX_CONTENT:
            message = f"Must be {MAX_CONTENT} or fewer in length."
            return 400, form_error("content", "BASE_TYPE_MAX_LENGTH", message), {}
        if not content.strip():
            return 400, error(50006, "Cannot send an empty message"), {}
        if body.get("enforce_nonce") and nonce is not None:
            earlier = self._by_nonce(bot["id"], str(nonce))
            if earlier is not None:
                return 200, public(earlier, with_nonce=True), {}
        parent = self._reference(body.get("message_reference"), channel_id)
        if isinstance(parent, tuple):
            return parent
        call.pause()  # the window between the nonce check and the insert
        created = self._create(bot, body, held=call.held, parent=parent)
        return 200, public(created, with_nonce=True), {}

    def _by_nonce(self, author: str, nonce: str) -> dict[str, Any] | None:
        window = float(self._setting("nonce_seconds", self.nonce_seconds))
        since = time.time() - window
        return self._any(
            lambda p: p["owner"] == author and p.get("nonce") == nonce and p["at"] >= since
        )

    def _reference(self, reference: Any, channel_id: str) -> dict[str, Any] | Reply | None:
        """The message replied to; an unknown one refused as Discord does (with
        `fail_if_not_exists`, its default)."""
        if not isinstance(reference, dict) or not reference.get("message_id"):
            return None
        wanted = str(reference["message_id"])
        found = self._any(lambda p: p["id"] == wanted and p["channel_id"] == channel_id)
        if found is None and reference.get("fail_if_not_exists", True):
            unknown = form_error("message_reference", "REPLIES_UNKNOWN_MESSAGE", "Unknown message")
            return 400, unknown, {}
        return found

    def _create(
        self,
        author: dict[str, Any],
        body: dict[str, Any],
        *,
        held: bool,
        parent: dict[str, Any] | None,
        at: float | None = None,
    ) -> dict[str, Any]:
        now = time.time() if at is None else at
        content = str(body.get("content") or "")
        message = {
            "id": snowflake(now, next(self._sequence)),
            "type": 0 if parent is None else 19,
            "channel_id": CHANNEL_ID,
            "author": author,
            "content": content,
            "timestamp": datetime.fromtimestamp(now, UTC).isoformat(),
            "edited_timestamp": None,
            "tts": False,
            "mention_everyone": bool(EVERYONE.search(content)),
            "mentions": [{"id": u} for u in USER.findall(content)],
            "mention_roles": ROLE.findall(content),
            "attachments": [
                {**a, "id": snowflake(now, next(self._sequence))} for a in body["attachments"]
            ]
            if body.get("attachments")
            else [],
            "embeds": [],
            "pinned": False,
            "flags": 0,
        }
        if parent is not None:
            message["message_reference"] = {
                "type": 0,
                "message_id": parent["id"],
                "channel_id": parent["channel_id"],
                "guild_id": GUILD_ID,
            }
        stored = {
            **message,
            "owner": author["id"],
            "nonce": None if body.get("nonce") is None else str(body["nonce"]),
            "notified": notified(content, body.get("allowed_mentions")),
        }
        added = self._add_post(stored, held=held)
        if at is not None:  # an earlier message: its nonce window counted from then
            with self._lock:
                self._posts[-1]["at"] = at
                self._persist()
            added["at"] = at
        return added

    def _list(self, call: Call, channel_id: str) -> Reply:
        bot = self._visible_channel(call, channel_id)
        if isinstance(bot, tuple):
            return bot
        params = call.params()
        limit = int(params.get("limit") or 50)
        if not 1 <= limit <= MAX_LIMIT:
            return 400, form_error("limit", "NUMBER_TYPE_MAX", "int value should be <= 100."), {}
        mine = self._visible(lambda p: p["channel_id"] == channel_id)
        if params.get("after"):
            after = int(params["after"])
            page = sorted((p for p in mine if int(p["id"]) > after), key=lambda p: int(p["id"]))
            page = page[:limit]
        else:
            before = int(params.get("before") or 1 << 80)
            page = sorted((p for p in mine if int(p["id"]) < before), key=lambda p: -int(p["id"]))
            page = page[:limit]
        newest_first = sorted(page, key=lambda p: -int(p["id"]))
        return 200, [self._shown(p) for p in newest_first], {}

    def _message(self, call: Call, channel_id: str, message_id: str) -> Reply:
        bot = self._visible_channel(call, channel_id)
        if isinstance(bot, tuple):
            return bot
        [found] = self._visible(lambda p: p["id"] == message_id) or [None]
        if found is None:
            return 404, error(10008, "Unknown Message"), {}
        return 200, self._shown(found), {}

    def _shown(self, post: dict[str, Any]) -> dict[str, Any]:
        """A message as a read shows it: no nonce (only the create's answer echoes it), the
        message replied to inlined as `referenced_message`."""
        shown = public(post, with_nonce=False)
        reference = post.get("message_reference")
        if reference:
            parent = self._any(lambda p: p["id"] == reference["message_id"])
            shown["referenced_message"] = (
                None if parent is None else public(parent, with_nonce=False)
            )
        return shown


def main(argv: list[str] | None = None) -> None:
    server.serve_main(FakeDiscord, argv, server.arg_parser("Fake Discord REST API"))


if __name__ == "__main__":
    main()
