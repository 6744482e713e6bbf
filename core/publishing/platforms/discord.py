"""Discord as a destination (`publish = { to = "discord", channel = … }`): a bot's message
in one channel, over `httpx` (Discord's REST API needs no client library), one `POST
/channels/{channel}/messages` per publish.

Each message is created under a `nonce` derived from the effect key with `enforce_nonce`:
within Discord's nonce window (a few minutes) a resend returns the message the first send
made instead of a second one. After an unknown answer the channel's messages since the
receipt's first send (`after=` the snowflake of that time) are read, and only the bot's own
message with the text (or the nonce) the receipt was sent with is taken, under the
look-up proof rules (docs/design.md §24). `allowed_mentions` parses nothing, so
`@everyone`, `@here`, a role or a user in model text is shown and pings nobody. A thread
is posted part after part, each a reply (`message_reference`) to the part before; images
go with the first part as attachments of the same request, each with its alt text.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any

import httpx

from core.egress.bodies import read_bounded
from core.errors import (
    EffectNotSent,
    EffectOutcomeUnknown,
    LookupUnavailable,
    MissingSecret,
    NotFetched,
    ReadRefused,
)
from core.http_calls import never_sent
from core.identity import discord_nonce
from core.policies import ThreadStyle
from core.ports import (
    Fit,
    ImageBytes,
    PostCounts,
    PostQuery,
    PostRead,
    PostUnknown,
    Publication,
)
from core.publishing.platforms.discord_answers import (
    REACTIONS_COUNTED,
    error_of,
    is_global_limit,
    reactions_of,
    snowflake_at,
    snowflake_time,
    wait_of,
)
from core.publishing.platforms.http_publisher import HttpPublisher
from core.publishing.platforms.post_text import comparable, discord_length
from core.publishing.platforms.read_back import read_back
from core.setup.publish_targets import DiscordTarget

CHARACTER_LIMIT = 2000
PAGE = 100  # messages per GET /channels/{channel}/messages, Discord's maximum
MAX_PAGES = 10  # a look-up reads at most 1,000 messages, then says it cannot tell
MAX_ANSWER = 2_000_000  # bytes of one answer: a page of 100 messages is far less
PERMANENT = frozenset({400, 404, 405, 413})
_CANNOT_SEND = (httpx.UnsupportedProtocol, httpx.LocalProtocolError, httpx.InvalidURL)


class Answer:
    """One HTTP answer read under MAX_ANSWER: its status, headers and parsed body."""

    def __init__(self, response: httpx.Response, body: bytes) -> None:
        headers = {
            k: v
            for k, v in response.headers.items()
            if k.lower() not in ("content-encoding", "content-length", "transfer-encoding")
        }
        self.response = httpx.Response(response.status_code, headers=headers, content=body)
        self.status = response.status_code

    def json(self) -> Any:
        try:
            return self.response.json()
        except ValueError:
            return None


class DiscordPublisher(HttpPublisher[DiscordTarget]):
    """Posts plain text as one bot in one channel; shared by every worker."""

    thread_style = ThreadStyle.PART_BY_PART  # each part its own message, key and receipt
    takes_attachments = True  # images ride in the message's own request (AttachmentTaker)
    counts_per_request = 1  # reactions are read message by message

    def __init__(
        self,
        target: DiscordTarget,
        timeout: timedelta,
        environ: Mapping[str, str] | None = None,
        client: httpx.Client | None = None,
    ) -> None:
        super().__init__(target, timeout, environ, client)
        self._lock = threading.Lock()
        self._bot_id: str | None = None  # GET /users/@me, once
        self._guild: str | None = None  # GET /channels/{channel}, once ("@me": a DM)

    # --- the port ---

    def publish(self, publication: Publication) -> str:
        count = discord_length(publication.text)
        if count > CHARACTER_LIMIT:
            refused = f"Discord takes {CHARACTER_LIMIT:,} characters; this draft has {count:,}"
            raise EffectNotSent(refused, permanent=True)
        if len(publication.attachments) != len(publication.images):  # never posted without them
            raise EffectNotSent("the draft's images were not read for Discord", permanent=True)
        body: dict[str, Any] = {
            "content": publication.text,
            "nonce": discord_nonce(publication.effect_key),
            "enforce_nonce": True,
            "allowed_mentions": {"parse": [], "replied_user": False},  # model text pings nobody
        }
        if publication.reply_to is not None:  # a thread's later part: a reply to the one before
            body["message_reference"] = {
                "message_id": publication.reply_to.parent,
                "channel_id": self.config.channel,
                "fail_if_not_exists": True,
            }
        answer = self._send(body, publication.attachments)
        if 200 <= answer.status < 300:
            message = answer.json()
            if not isinstance(message, dict) or not message.get("id"):
                raise EffectOutcomeUnknown(f"Discord answered {answer.status} without a message id")
            return str(message["id"])
        raise self._refused(answer)

    def _send(self, body: dict[str, Any], images: Sequence[ImageBytes]) -> Answer:
        """The message as JSON, or with its images as multipart: `payload_json` and
        `files[n]`, each `attachments[n]` naming its file and its alt text."""
        url = f"{self.config.api}/channels/{self.config.channel}/messages"
        content: dict[str, Any] = {"json": body}
        if images:
            body = body | {"attachments": [_attachment(n, i) for n, i in enumerate(images)]}
            files = [
                (f"files[{n}]", (_file_name(n, image), image.data, image.media_type))
                for n, image in enumerate(images)
            ]
            content = {"data": {"payload_json": json.dumps(body)}, "files": files}
        try:
            request = self._client.build_request(
                "POST", url, headers=self._headers(), timeout=self._timeout, **content
            )
            response = self._client.send(request, stream=True, follow_redirects=False)
        except _CANNOT_SEND as exc:
            raise EffectNotSent(f"Discord request invalid: {exc}", permanent=True) from exc
        except httpx.HTTPError as exc:
            if never_sent(exc):
                raise EffectNotSent(f"Discord unreachable: {_describe(exc)}") from exc
            lost = f"Discord gave no complete answer: {_describe(exc)}"
            raise EffectOutcomeUnknown(lost) from exc
        try:
            return Answer(response, read_bounded(response, MAX_ANSWER, "Discord"))
        except (httpx.HTTPError, NotFetched) as exc:
            raise EffectOutcomeUnknown(f"Discord's answer was lost: {_describe(exc)}") from exc
        finally:
            response.close()

    def lookup(self, query: PostQuery) -> str | None:
        try:
            bot = self._me()
        except (EffectNotSent, MissingSecret) as exc:
            raise LookupUnavailable(f"Discord look-up failed: {exc}") from exc
        wanted, nonce = comparable(query.text), discord_nonce(query.effect_key)
        after = snowflake_at(query.since)  # the receipt's first send, less the skew already
        for _ in range(MAX_PAGES):
            page = self._page(after)
            for message in sorted(page, key=lambda m: int(m["id"])):
                if _ours(message, bot, wanted, nonce, query):
                    return str(message["id"])
            if len(page) < PAGE:
                return None
            after = str(max(int(m["id"]) for m in page))
        many = PAGE * MAX_PAGES
        raise LookupUnavailable(
            f"over {many} messages since {query.since:%Y-%m-%d %H:%M}: a person must check"
        )

    def _page(self, after: str) -> list[dict[str, Any]]:
        path = f"/channels/{self.config.channel}/messages?after={after}&limit={PAGE}"
        try:
            answer = self._get(path)
        except (httpx.HTTPError, NotFetched, MissingSecret) as exc:
            raise LookupUnavailable(f"Discord look-up failed: {_describe(exc)}") from exc
        messages = answer.json()
        if answer.status != 200 or not isinstance(messages, list):
            said = error_of(answer.response)
            raise LookupUnavailable(f"Discord look-up answered {answer.status}: {said}")
        return [m for m in messages if isinstance(m, dict) and str(m.get("id", "")).isdigit()]

    def link(self, external_id: str) -> str | None:
        """`https://discord.com/channels/{guild}/{channel}/{message}` (`@me` for a DM);
        None while the channel's guild cannot be read."""
        if not external_id.isdigit():
            return None
        guild = self._guild_of_channel()
        if guild is None:
            return None
        return f"https://discord.com/channels/{guild}/{self.config.channel}/{external_id}"

    def fit(self, text: str) -> Fit:
        return Fit(self.target, "Discord", discord_length(text), CHARACTER_LIMIT)

    # --- read back (docs/design.md §28) ---

    def read_post(self, external_id: str, effect_key: str) -> PostRead:
        """The message itself: 404 (`Unknown Message`) is gone, anything else but 200
        cannot tell."""
        try:
            answer = self._get(f"/channels/{self.config.channel}/messages/{external_id}")
        except (httpx.HTTPError, NotFetched, MissingSecret) as exc:
            return PostUnknown(f"Discord message read failed: {_describe(exc)}")
        retry_after = answer.response.headers.get("Retry-After")
        return read_back(answer.status, retry_after, error_of(answer.response), "Discord")

    def read_counts(self, external_ids: Sequence[str]) -> dict[str, PostCounts]:
        """Reactions of each message (`reactions[].count`, every emoji) as its likes: the
        only engagement a bot can read of a message. A deleted message is left out."""
        counts = {}
        for external_id in external_ids:
            try:
                answer = self._get(f"/channels/{self.config.channel}/messages/{external_id}")
            except (httpx.HTTPError, NotFetched, MissingSecret) as exc:
                raise ReadRefused(f"Discord message read failed: {_describe(exc)}") from exc
            message = answer.json()
            if answer.status == 200 and isinstance(message, dict):
                likes = reactions_of(message)
                counts[external_id] = PostCounts(likes=likes, note=REACTIONS_COUNTED)
            elif answer.status != 404:
                said = f"Discord message read answered {answer.status}: {error_of(answer.response)}"
                raise ReadRefused(said, wait_of(answer.response) if answer.status == 429 else None)
        return counts

    # --- `galley check --online` ---

    def prove_credentials(self) -> str:
        """`GET /users/@me` (the token is a bot's), then the channel (the bot can see it),
        without posting."""
        me = self._users_me()
        if not me.get("bot"):
            raise EffectNotSent(f"{self.config.secret_env} is not a bot's token", auth=True)
        self._bot_id = str(me["id"])
        channel = self._get(f"/channels/{self.config.channel}")
        if channel.status != 200:
            raise self._refused(channel)
        return f"token accepted for bot {me.get('username', me['id'])}, channel readable"

    # --- HTTP ---

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bot {self.config.secret(self._environ)}"}

    def _get(self, path: str) -> Answer:
        request = self._client.build_request(
            "GET", self.config.api + path, headers=self._headers(), timeout=self._timeout
        )
        response = self._client.send(request, stream=True, follow_redirects=False)
        try:
            return Answer(response, read_bounded(response, MAX_ANSWER, "Discord"))
        finally:
            response.close()

    def _users_me(self) -> dict[str, Any]:
        """`GET /users/@me`: the token's user, with its id; EffectNotSent when Discord
        cannot be reached or refuses the token."""
        try:
            answer = self._get("/users/@me")
        except (httpx.HTTPError, NotFetched) as exc:
            raise EffectNotSent(f"Discord unreachable: {_describe(exc)}") from exc
        me = answer.json()
        if answer.status != 200 or not isinstance(me, dict) or not me.get("id"):
            raise self._refused(answer)
        return me

    def _me(self) -> str:
        with self._lock:
            if self._bot_id is not None:
                return self._bot_id
        me = self._users_me()
        with self._lock:
            self._bot_id = str(me["id"])
            return self._bot_id

    def _guild_of_channel(self) -> str | None:
        with self._lock:
            if self._guild is not None:
                return self._guild
        try:
            answer = self._get(f"/channels/{self.config.channel}")
        except (httpx.HTTPError, NotFetched, MissingSecret):
            return None
        channel = answer.json()
        if answer.status != 200 or not isinstance(channel, dict):
            return None
        with self._lock:
            self._guild = str(channel.get("guild_id") or "@me")
            return self._guild

    # --- classification (docs/design.md §8) ---

    def _refused(self, answer: Answer) -> EffectNotSent | EffectOutcomeUnknown:
        status = answer.status
        said = f"Discord answered {status}: {error_of(answer.response)}"
        if status in (401, 403):
            var = self.config.secret_env
            need = "a bot token" if status == 401 else "View Channel and Send Messages"
            return EffectNotSent(f"{said} (check {var}: {need})", auth=True)
        if status == 429:
            wait = wait_of(answer.response)
            scope = "global " if is_global_limit(answer.response) else ""
            hint = f" ({scope}retry after {wait:.1f}s)" if wait is not None else ""
            return EffectNotSent(said + hint, retry_after=wait)
        if status in PERMANENT:
            return EffectNotSent(said, permanent=True)
        return EffectOutcomeUnknown(said)  # 500, 502, 503, 504, redirects: it may have posted


def _attachment(n: int, image: ImageBytes) -> dict[str, Any]:
    return {"id": n, "filename": _file_name(n, image), "description": image.alt}


def _file_name(n: int, image: ImageBytes) -> str:
    """A name Discord keeps as given: the image's own, reduced to safe characters."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", image.name).strip("._") or f"image-{n + 1}"
    return name[:100]


def _ours(message: dict[str, Any], bot: str, wanted: str, nonce: str, query: PostQuery) -> bool:
    """A listed message is this receipt's: the bot's own, made since the receipt's first
    send, with its nonce (where Discord echoes it) or the text it was sent with, in its
    place in a thread, and not already the proof of another receipt."""
    author = message.get("author") or {}
    if str(author.get("id", "")) != bot:
        return False
    if snowflake_time(str(message["id"])) < query.since:
        return False
    sent_nonce = message.get("nonce")
    if sent_nonce is not None and str(sent_nonce) != nonce:
        return False
    if sent_nonce is None and comparable(str(message.get("content") or "")) != wanted:
        return False
    if query.reply_to is not None:
        reference = message.get("message_reference") or {}
        if str(reference.get("message_id") or "") != query.reply_to.parent:
            return False
    return not query.taken(str(message["id"]))


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
