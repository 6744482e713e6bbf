"""A local fake of the Telegram Bot API (`/bot<token>/<method>`), served over real HTTP, for
an `httpx` client pointed at ``fake.url`` (the target's `api` base URL).

It answers as the Bot API does where it matters to Galley: every answer is
``{"ok": true, "result": …}`` or ``{"ok": false, "error_code": N, "description": "…"}``; a
token it does not know is ``401 Unauthorized``; a chat the bot is not a member of is ``403
Forbidden: bot is not a member of the channel chat``; an unknown chat ``400 Bad Request:
chat not found``; a flood wait is ``429 Too Many Requests: retry after N`` with
``parameters.retry_after``; text over 4,096 UTF-16 units is ``400 Bad Request: message is
too long``; a reply to a message the chat does not have is ``400 Bad Request: message to
be replied not found``. No idempotency key, and no method lists a chat's messages to a
bot. With no `parse_mode` the text is plain, but Telegram still links `@username` as a
`mention` entity (which in a group notifies that member): the fake records the entities
it would make on each post.

In-process: ``with FakeTelegram() as fake: fake.script("create", accept_then_drop())``.
Separate process (first stdout line is the URL)::

    python -m tests.fakes.telegram --port 0 --state-file PATH
"""

from __future__ import annotations

import re
import time
from typing import Any

from tests.fakes import server, social
from tests.fakes.social import Action, Call, Reply, Route

TOKEN = "7350012345:AAFgalleyFakeTokenForTestsOnly-xyz_987"
BOT = {"id": 7350012345, "is_bot": True, "first_name": "Galley", "username": "galley_bot"}
CHANNEL = "@galleynews"  # public: the bot is an administrator
CHANNEL_ID = -1001234567890
PRIVATE_ID = -1009876543210  # a private channel (no username): the bot is an administrator
ELSEWHERE = "@elsewhere"  # a public channel the bot was never added to
TEXT_LIMIT = 4096
METHODS = {"sendMessage": "create", "getMe": "session", "getChat": "read"}
_MENTION = re.compile(r"(?<![\w@])@([A-Za-z][A-Za-z0-9_]{4,31})\b")  # usernames: 5-32


def failed(code: int, description: str, parameters: dict[str, Any] | None = None) -> Reply:
    """The Bot API's error answer."""
    body: dict[str, Any] = {"ok": False, "error_code": code, "description": description}
    if parameters:
        body["parameters"] = parameters
    return code, body, {}


def flood_wait(seconds: int) -> Action:
    """429 as the Bot API answers a flood: the wait in the body's parameters."""
    _, body, _ = failed(429, f"Too Many Requests: retry after {seconds}", {"retry_after": seconds})
    return social.status(429, body)


def server_error(code: int = 500) -> Action:
    return social.status(code, failed(code, "Internal Server Error")[1])


def utf16_length(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


class FakeTelegram(social.SocialFake):
    """The Bot API for one bot (`TOKEN`) in two channels it administers."""

    def __init__(self, *, state_file: server.StrPath | None = None, port: int = 0) -> None:
        super().__init__(state_file=state_file, port=port)
        public = {"id": CHANNEL_ID, "type": "channel", "title": "Galley", "username": "galleynews"}
        private = {"id": PRIVATE_ID, "type": "channel", "title": "Galley staff"}
        self.chats = {CHANNEL: public, str(CHANNEL_ID): public, str(PRIVATE_ID): private}
        self.outside = {ELSEWHERE}

    # --- routes ---

    def route(self, method: str, path: str) -> tuple[str, Route] | None:
        found = re.fullmatch(r"/bot([^/]+)/([A-Za-z]+)", path)
        if found is None:
            return None
        token, name = found.groups()
        route = METHODS.get(name)
        if route is None:
            return "other", lambda call: failed(404, "Not Found")
        serve = {"create": self._send_message, "session": self._get_me, "read": self._get_chat}
        return route, lambda call: self._authorized(call, token, serve[route])

    def error_body(self, code: int, message: str | None = None) -> Any:
        return failed(code, message or f"fake {code}")[1]

    def _authorized(self, call: Call, token: str, serve: Route) -> Reply:
        if token != TOKEN:
            return failed(401, "Unauthorized")
        return serve(call)

    def _chat(self, call: Call) -> dict[str, Any] | Reply:
        """The chat a call names, or the Bot API's refusal."""
        params = call.body if isinstance(call.body, dict) else call.params()
        chat_id = str(params.get("chat_id", ""))
        if not chat_id:
            return failed(400, "Bad Request: chat_id is empty")
        if chat_id in self.outside:
            return failed(403, "Forbidden: bot is not a member of the channel chat")
        chat = self.chats.get(chat_id)
        if chat is None:
            return failed(400, "Bad Request: chat not found")
        return chat

    def _get_me(self, call: Call) -> Reply:
        return 200, {"ok": True, "result": BOT}, {}

    def _get_chat(self, call: Call) -> Reply:
        chat = self._chat(call)
        if isinstance(chat, tuple):
            return chat
        return 200, {"ok": True, "result": chat}, {}

    def _send_message(self, call: Call) -> Reply:
        chat = self._chat(call)
        if isinstance(chat, tuple):
            return chat
        body = call.body if isinstance(call.body, dict) else {}
        text = body.get("text")
        if not isinstance(text, str) or not text.strip():
            return failed(400, "Bad Request: message text is empty")
        if utf16_length(text) > TEXT_LIMIT:
            return failed(400, "Bad Request: message is too long")
        if body.get("parse_mode") or body.get("entities"):
            return failed(400, "Bad Request: the fake takes plain text only")
        reply_to = (body.get("reply_parameters") or {}).get("message_id")
        owner = str(chat["id"])
        call.pause()
        with self._lock:
            mine = [p for p in self._posts if p["owner"] == owner]
            if reply_to is not None and not any(p["message_id"] == reply_to for p in mine):
                return failed(400, "Bad Request: message to be replied not found")
            message = {
                "message_id": len(mine) + 1,
                "sender_chat": chat,
                "chat": chat,
                "date": int(time.time()),
                "text": text,
            }
            entities = [
                {"type": "mention", "offset": m.start(), "length": m.end() - m.start()}
                for m in _MENTION.finditer(text)
            ]
            if entities:
                message["entities"] = entities
            if reply_to is not None:
                message["reply_to_message"] = {"message_id": reply_to, "chat": chat}
            self._add_post({**message, "owner": owner, "mentions": entities}, held=call.held)
        return 200, {"ok": True, "result": message}, {}


def main(argv: list[str] | None = None) -> None:
    server.serve_main(FakeTelegram, argv, server.arg_parser("Fake Telegram Bot API"))


if __name__ == "__main__":
    main()
