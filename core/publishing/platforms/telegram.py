"""Telegram as a destination (`publish = { to = "telegram", chat = … }`): the Bot API over
`httpx`, one `sendMessage` per post (docs/design.md §24).

Telegram has no idempotency key and a bot cannot read a chat's history back, so there is
no look-up: an answer that never came (a lost connection, a timeout, a 5xx) is
`uncertain` and a person decides, as for a LinkedIn member. The Bot API puts the token in
the request's path (`/bot<token>/sendMessage`): the operator's configured API base is the
one place a secret rides in a URL, so no URL of this module ever reaches an error, a
receipt, an alert or a log line (httpx's own request lines are filtered, its exceptions
rewritten without their cause). Model text goes with no `parse_mode` and no `entities`.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

import httpx

from core.errors import EffectNotSent, EffectOutcomeUnknown, LookupUnavailable
from core.http_calls import never_sent, retry_after_seconds
from core.policies import ThreadStyle
from core.ports import Fit, PostQuery, Publication
from core.publishing.platforms.http_publisher import HttpPublisher
from core.publishing.platforms.post_text import telegram_length, telegram_text
from core.setup.publish_targets import TelegramTarget

TEXT_LIMIT = 4096  # sendMessage: 1-4096 characters after entities parsing (UTF-16 units)
CAPTION_LIMIT = 1024  # sendPhoto's caption, for when photos are sent
UNREADABLE = (
    "Telegram's Bot API cannot read a chat's messages back, so Galley cannot tell whether "
    "this message was posted: a person must check the chat"
)
NO_IMAGES = (
    "Galley sends no images to Telegram: the Bot API has no alt text for a photo, so the "
    "image would go without its description"
)
AUTH_CODES = frozenset({401, 403, 404})  # 404: the API knows no bot by this token's path
TOKEN_IN_PATH = re.compile(r"/bot[^/\s]+/")
HIDDEN = "/bot<token>/"
_CANNOT_SEND = (httpx.UnsupportedProtocol, httpx.LocalProtocolError, httpx.InvalidURL)


class _TokenFilter(logging.Filter):
    """httpx logs every request's URL ("HTTP Request: POST https://…/bot<token>/…"): the
    token is cut out of such a line before any handler sees it."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple) and any("/bot" in str(a) for a in record.args):
            record.args = tuple(_hidden(str(a)) if "/bot" in str(a) else a for a in record.args)
        if isinstance(record.msg, str) and "/bot" in record.msg:
            record.msg = _hidden(record.msg)
        return True


logging.getLogger("httpx").addFilter(_TokenFilter())


class TelegramPublisher(HttpPublisher[TelegramTarget]):
    """Posts plain text to one chat as one bot; shared by every worker."""

    # a thread's later parts are replies to its first message, each its own effect
    thread_style = ThreadStyle.PART_BY_PART
    # no look-up: the receipt marks the moment the call leaves, so a holder killed before
    # it provably sent nothing and the message is sent again (core/store/effects.py)
    marks_send = True

    def __init__(
        self,
        target: TelegramTarget,
        timeout: timedelta,
        environ: Mapping[str, str] | None = None,
        client: httpx.Client | None = None,
    ) -> None:
        super().__init__(target, timeout, environ, client)
        self._lock = threading.Lock()
        self._username: str | None = _public_name(target.chat)  # known for an @channel
        self._asked_chat = self._username is not None

    # --- the port ---

    def publish(self, publication: Publication) -> str:
        if publication.images:  # refused at review (core/images/limits.py): never sent bare
            raise EffectNotSent(NO_IMAGES, permanent=True)
        text = telegram_text(publication.text)
        count = telegram_length(text)
        if count > TEXT_LIMIT:
            refused = f"Telegram takes {TEXT_LIMIT:,} characters; this draft has {count:,}"
            raise EffectNotSent(refused, permanent=True)
        self._learn_username()  # before the send: the link is known once it is made
        body: dict[str, Any] = {"chat_id": self.config.chat, "text": text}
        if publication.reply_to is not None:  # a thread's later part: a reply to the first
            body["reply_parameters"] = {"message_id": int(publication.reply_to.root)}
        try:
            answer = self._send("sendMessage", body)
        except EffectOutcomeUnknown as exc:  # the alert says why nobody can look it up
            raise EffectOutcomeUnknown(f"{exc}. {UNREADABLE}") from None
        try:
            return str(int(answer["message_id"]))
        except (KeyError, TypeError, ValueError):
            raise EffectOutcomeUnknown("Telegram answered ok without a message id") from None

    def lookup(self, query: PostQuery) -> str | None:
        raise LookupUnavailable(UNREADABLE)

    def link(self, external_id: str) -> str | None:
        """`https://t.me/<channel>/<message id>` for a chat with a public username; a
        private chat has no public link. Never a call: the username was asked before
        the send (a post is recorded at once, whatever getChat would say)."""
        if self._username is None or not external_id.isdigit():
            return None
        return f"https://t.me/{self._username}/{external_id}"

    def fit(self, text: str) -> Fit:
        """What Telegram counts: the text as sent (mentions made inert), in UTF-16 units."""
        return Fit(self.target, "Telegram", telegram_length(telegram_text(text)), TEXT_LIMIT)

    def prove_credentials(self) -> str:
        """`getMe` (the token), then `getChat` (the bot can see the chat); posts nothing."""
        me = self._call("getMe", {})
        chat = self._call("getChat", {"chat_id": self.config.chat})
        self._remember(chat)
        where = f"@{self._username}" if self._username else "a private chat (no public links)"
        return f"token is the bot @{me.get('username', '?')}; {self.config.chat} is {where}"

    # --- HTTP ---

    def _learn_username(self) -> None:
        """The chat's public username, asked once (`getChat`); a failure leaves the link
        unknown and is asked again next time, never stopping a post."""
        with self._lock:
            if self._asked_chat:
                return
        try:
            chat = self._call("getChat", {"chat_id": self.config.chat})
        except (EffectNotSent, EffectOutcomeUnknown):
            return
        self._remember(chat)

    def _remember(self, chat: Mapping[str, Any]) -> None:
        username = chat.get("username")
        with self._lock:
            self._username = username if isinstance(username, str) and username else None
            self._asked_chat = True

    def _call(self, method: str, body: dict[str, Any]) -> dict[str, Any]:
        """A read (getMe, getChat): any failure means it is not known, never "uncertain"."""
        try:
            return self._send(method, body)
        except EffectOutcomeUnknown as exc:
            raise EffectNotSent(str(exc)) from None

    def _send(self, method: str, body: dict[str, Any]) -> dict[str, Any]:
        """One Bot API call; its `result` on success. Every failure is told without the
        URL: the token is in its path."""
        token = self.config.secret(self._environ)
        url = f"{self.config.api}/bot{token}/{method}"
        try:
            response = self._client.post(
                url, json=body, timeout=self._timeout, follow_redirects=False
            )
        except _CANNOT_SEND as exc:
            said = f"Telegram request invalid: {_describe(exc, token)}"
            raise EffectNotSent(said, permanent=True) from None
        except httpx.HTTPError as exc:
            if never_sent(exc):
                raise EffectNotSent(f"Telegram unreachable: {_describe(exc, token)}") from None
            said = f"Telegram gave no complete answer to {method}: {_describe(exc, token)}"
            raise EffectOutcomeUnknown(said) from None
        answer = _json(response)
        if response.status_code == 200 and answer.get("ok") is True:
            result = answer.get("result")
            return result if isinstance(result, dict) else {"value": result}
        raise self._refused(method, response, answer)

    def _refused(
        self, method: str, response: httpx.Response, answer: Mapping[str, Any]
    ) -> EffectNotSent | EffectOutcomeUnknown:
        status = int(answer.get("error_code") or response.status_code)
        said = f"Telegram answered {method} with {status}: {_description(response, answer)}"
        if status in AUTH_CODES:
            hint = f" (check {self.config.secret_env} and that the bot may post in the chat)"
            return EffectNotSent(said + hint, auth=True)
        if status == 429:
            wait = _retry_after(response, answer)
            hint = f" (retry after {wait:.0f}s)" if wait is not None else ""
            return EffectNotSent(said + hint, retry_after=wait)
        if 400 <= status < 500:
            return EffectNotSent(said, permanent=True)
        return EffectOutcomeUnknown(said)  # 5xx, redirects: it may have been posted


def _public_name(chat: str) -> str | None:
    return chat.removeprefix("@") if chat.startswith("@") else None


def _json(response: httpx.Response) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def _description(response: httpx.Response, answer: Mapping[str, Any]) -> str:
    if answer.get("description"):
        return _hidden(str(answer["description"]))
    text = _hidden(" ".join(response.text.split()))
    return (text[:200] + "…" if len(text) > 200 else text) or "(empty body)"


def _retry_after(response: httpx.Response, answer: Mapping[str, Any]) -> float | None:
    """The flood wait: the body's `parameters.retry_after`, else a Retry-After header."""
    parameters = answer.get("parameters")
    if isinstance(parameters, dict) and parameters.get("retry_after") is not None:
        return retry_after_seconds(str(parameters["retry_after"]))
    return retry_after_seconds(response.headers.get("retry-after"))


def _hidden(text: str, token: str = "") -> str:
    """`text` with any Bot API path's token, and the token itself, cut out."""
    text = TOKEN_IN_PATH.sub(HIDDEN, text)
    return text.replace(token, "<token>") if token else text


def _describe(exc: BaseException, token: str) -> str:
    """The exception's kind and message with the token cut out (httpx names the URL)."""
    said = _hidden(str(exc), token)
    return f"{type(exc).__name__}: {said}" if said else type(exc).__name__
