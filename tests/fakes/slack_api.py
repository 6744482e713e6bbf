"""A local fake of the Slack Web API, served over real HTTP (stdlib only).

In-process (note the trailing slash in base_url)::

    with FakeSlack() as fake:
        fake.script("chat.postMessage", rate_limited(2), accept_then_hang(5))
        client = WebClient(token="xoxb-test", base_url=fake.url + "/api/", retry_handlers=[])

Separate process (first stdout line is the URL; serves until killed)::

    python -m tests.fakes.slack_api --port 0 --state-file PATH

``write_state(PATH, script={...}, usergroups={...}, rate_limit=1.0)`` configures it,
``read_calls(PATH)`` returns the calls logged (JSON lines) to ``PATH + ".log"`` and
``read_messages(PATH)`` the channel history kept in ``PATH + ".messages.json"``, which a
restarted server loads again.
"""

from __future__ import annotations

import base64
import copy
import itertools
import json
import math
import os
import time
from collections import defaultdict, deque
from contextlib import suppress
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any
from urllib.parse import parse_qsl

from tests.fakes import server

FILES_PATH = "/files-pri/"  # where a shared file's bytes are downloaded
UPLOAD_PATH = "/upload/v1/"  # where files.getUploadURLExternal sends a file's bytes
RESPONSE_URL = "response_url"  # the method name recorded for POSTs to /response/<name>
JSON_FIELDS = ("blocks", "metadata", "view", "attachments")  # form fields carrying JSON
BOT = {"user": "UBOT", "bot_id": "BBOT", "team": "T1"}
Reply = tuple[int, dict[str, Any], dict[str, str]]
MESSAGES_SUFFIX = ".messages.json"  # the channel history, kept across restarts


@dataclass(frozen=True)
class Action(server.ScriptedAction):
    """One scripted outcome for one call of a method. Build with the functions below."""

    kind: str  # "normal" | "rate_limited" | "error" | "drop" | "hang_before" | "accept_then_hang"
    seconds: float = 0.0  # hang length, or Retry-After for rate_limited
    error: str = ""
    status: int = 200


def normal() -> Action:
    """Behave normally (a placeholder to script a fault for a later call)."""
    return Action("normal")


def rate_limited(retry_after: int = 1) -> Action:
    """HTTP 429, `Retry-After: N`, {"ok": false, "error": "ratelimited"}; no effect."""
    return Action("rate_limited", seconds=retry_after, error="ratelimited", status=429)


def error(name: str, status: int = 200) -> Action:
    """{"ok": false, "error": name} with HTTP `status`; no effect."""
    return Action("error", error=name, status=status)


def drop() -> Action:
    """Record the call, then close the socket without a response; no effect."""
    return Action("drop")


def hang_before(seconds: float = 30.0) -> Action:
    """Record the call but do not perform it; send nothing for `seconds`, then close."""
    return Action("hang_before", seconds=seconds)


def accept_then_hang(seconds: float = 30.0) -> Action:
    """Perform the call normally (e.g. store the message), then send nothing for `seconds`
    and close: the effect happened but the client cannot know."""
    return Action("accept_then_hang", seconds=seconds)


@dataclass(frozen=True)
class RecordedCall:
    method: str  # the Slack method, e.g. "chat.postMessage", or "response_url"
    path: str
    params: dict[str, Any]  # query string + body merged; JSON-string form fields decoded
    headers: dict[str, str]  # keys lower-cased
    at: float = field(default_factory=time.time)


# --- cross-process state file -------------------------------------------------------------


def write_state(path: str | os.PathLike[str], **kwargs: Any) -> None:
    """Replace the given keys of the state file: `script` ({method: [Action, ...]}),
    `usergroups` ({id: [user, ...]}) and `rate_limit` (seconds per channel, or None)."""
    if "script" in kwargs:
        kwargs["script"] = {
            m: [a.to_json() if isinstance(a, Action) else a for a in acts]
            for m, acts in kwargs["script"].items()
        }
    server.update_state(path, kwargs)


def read_calls(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Calls logged by a server using this state file: method, path, params, headers, at."""
    return server.read_log(path)


def read_messages(path: str | os.PathLike[str]) -> dict[str, list[dict[str, Any]]]:
    """Stored messages by channel (oldest first) as last persisted by the server."""
    return server.read_saved(path, MESSAGES_SUFFIX)


# --- server -------------------------------------------------------------------------------


def _truthy(value: Any) -> bool:
    return value is True or str(value).lower() in ("1", "true")


def _top_level(message: dict[str, Any]) -> bool:
    thread_ts = message.get("thread_ts")
    return (
        not thread_ts or thread_ts == message["ts"] or message.get("subtype") == "thread_broadcast"
    )


def _with_thread(message: dict[str, Any], stored: list[dict[str, Any]]) -> dict[str, Any]:
    """A thread's parent as Slack shows it: thread_ts, reply_count, latest_reply."""
    replies = [m for m in stored if m.get("thread_ts") == message["ts"] and m is not message]
    if not replies:
        return message
    users = list(dict.fromkeys(str(m.get("user")) for m in replies))
    thread = {"thread_ts": message["ts"], "reply_count": len(replies), "reply_users": users}
    return {**message, **thread, "latest_reply": max((m["ts"] for m in replies), key=Decimal)}


def _parse(query: str, raw: bytes, content_type: str) -> dict[str, Any]:
    params: dict[str, Any] = dict(parse_qsl(query, keep_blank_values=True))
    text = raw.decode("utf-8", "replace")
    if "json" in content_type:
        try:
            body = json.loads(text) if text else {}
        except ValueError:
            body = {"_raw": text}
        params.update(body if isinstance(body, dict) else {"_raw": body})
    elif "form-urlencoded" in content_type or not content_type:
        params.update(parse_qsl(text, keep_blank_values=True))
    elif text:
        params["_raw"] = text
    for key in JSON_FIELDS:
        if isinstance(params.get(key), str):
            with suppress(ValueError):
                params[key] = json.loads(params[key])
    return params


class _Handler(server.Handler["FakeSlack"]):
    def do_GET(self) -> None:  # noqa: N802
        self.do_POST()  # Slack takes a read method's arguments in the query string too

    def do_POST(self) -> None:  # noqa: N802
        fake = self.server.fake
        path, _, query = self.path.partition("?")
        if path.startswith(FILES_PATH):
            self._send_file(fake, path)
            return
        if path.startswith(UPLOAD_PATH):  # files.getUploadURLExternal's upload_url
            fake._record(RecordedCall("upload", path, {}, self._lower_headers()))
            stored = fake.receive_upload(path.removeprefix(UPLOAD_PATH), self._read_body())
            self._send_json(200 if stored else 404, f"OK - {stored}" if stored else "Not found")
            return
        params = _parse(query, self._read_body(), self.headers.get("Content-Type", ""))
        if path.startswith("/api/"):
            method = path.removeprefix("/api/")
        elif path.startswith("/response/"):
            method = RESPONSE_URL
        else:
            method = ""
        headers = self._lower_headers()
        fake._record(RecordedCall(method or path, path, params, headers))
        if not method:
            self._send_json(404, {"ok": False, "error": "not_found"})
            return
        action, state = fake._next_action(method)
        if action.kind in ("drop", "hang_before"):  # no response; hang ends early on stop
            self._close_after(action.seconds if action.kind == "hang_before" else 0)
            return
        if action.kind == "rate_limited":
            retry = [("Retry-After", str(int(action.seconds)))]
            self._send_json(429, {"ok": False, "error": "ratelimited"}, retry)
            return
        if action.kind == "error":
            self._send_json(action.status, {"ok": False, "error": action.error})
            return
        code, payload, extra = fake._perform(method, params, headers, state)
        if action.kind == "accept_then_hang":
            self._close_after(action.seconds)
            return
        self._send_json(code, payload, extra.items())

    def _send_file(self, fake: FakeSlack, path: str) -> None:
        """A file's `url_private_download`: its bytes for a bot token; without one Slack
        answers 200 with its sign-in page, as it does, never an error."""
        headers = self._lower_headers()
        fake._record(RecordedCall("files-pri", path, {}, headers))
        file_id = path.removeprefix(FILES_PATH).split("/", 1)[0].rpartition("-")[2]
        moved_to = fake.file_redirects.get(file_id)
        if moved_to is not None:  # as a CDN might answer: elsewhere, for whoever follows
            self.send_response(302)
            self.send_header("Location", moved_to)
            self.send_header("Content-Length", "0")
            self.end_headers()
            self.wfile.flush()
            return
        found = fake.files.get(file_id)
        authorised = headers.get("authorization", "").startswith("Bearer xoxb-")
        if found is None or not authorised:
            page = b"<!DOCTYPE html><html><title>Slack</title><body>Sign in</body></html>"
            data, mimetype = page, "text/html; charset=utf-8"
        else:
            data, mimetype = found
        self.send_response(200)
        self.send_header("Content-Type", mimetype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()


class FakeSlack(server.FakeServer):
    """The fake server. Use as a context manager, or call start()/stop()."""

    handler_class = _Handler
    backlog = 128  # socketserver's default 5 stalls bursts of connects for ~1s

    def __init__(self, *, state_file: str | os.PathLike[str] | None = None, port: int = 0):
        super().__init__(state_file=state_file, port=port)
        self.usergroups: dict[str, list[str]] = {}  # usergroup id -> user ids
        self._queues: dict[str, deque[Action]] = defaultdict(deque)
        self._messages: dict[str, list[dict[str, Any]]] = defaultdict(list)
        self._view_ids = itertools.count(1)
        self._rate_limit: float | None = None
        self._last_post: dict[str, float] = {}  # channel -> monotonic time of last accepted post
        self._last_us = 0
        self.home_views: dict[str, dict[str, Any]] = {}  # user -> the last published Home
        self.users: dict[str, dict[str, Any]] = {}  # user id -> users.info's "user"
        self.socket_mode: Any = None  # a tests.fakes.socket_mode.FakeSocketMode, once attached
        self.files: dict[str, tuple[bytes, str]] = {}  # file id -> (bytes, mimetype)
        self.file_redirects: dict[str, str] = {}  # file id -> where its download redirects
        # external uploads: file id -> {"name", "length", "alt_txt", "received", "complete"}
        self.uploads: dict[str, dict[str, Any]] = {}
        self._file_ids = itertools.count(1)
        if self.state_file is not None:
            for channel, msgs in read_messages(self.state_file).items():
                self._messages[channel] = msgs
                for m in msgs:
                    self._last_us = max(self._last_us, int(Decimal(m["ts"]) * 1_000_000))

    def response_url(self, name: str = "x") -> str:
        """A response_url (as Bolt's respond() posts to) served by this fake."""
        return f"{self.url}/response/{name}"

    def script(self, method: str, *actions: Action) -> None:
        """Append actions to `method`'s FIFO queue; each call of that method consumes one."""
        with self._lock:
            self._queues[method].extend(actions)

    def pending(self, method: str) -> int:
        with self._lock:
            return len(self._queues[method])

    def enforce_rate_limit(self, per_channel_seconds: float | None = 1.0) -> None:
        """429 a chat.postMessage sent sooner than this after the channel's last accepted
        post (Retry-After = remaining seconds rounded up, at least 1). None or 0: off."""
        with self._lock:
            self._rate_limit = per_channel_seconds or None

    def calls(self, method: str | None = None) -> list[RecordedCall]:
        with self._lock:
            return [c for c in self._records if method is None or c.method == method]

    def messages(self, channel: str) -> list[dict[str, Any]]:
        """Stored messages in `channel`, oldest first (copies)."""
        with self._lock:
            return copy.deepcopy(self._messages.get(channel, []))

    def add_message(self, channel: str, text: str = "", *, user: str = "U1", **fields: Any) -> str:
        """Seed the history (e.g. a human's message); returns its ts (`ts=` sets it)."""
        with self._lock:
            ts = str(fields.pop("ts", None) or self._next_ts())
            message = {"type": "message", "user": user, "ts": ts, "text": text, "blocks": []}
            self._messages[channel].append({**message, **fields})
            self._persist()
            return ts

    def add_reply(
        self, channel: str, parent_ts: str, text: str = "", *, user: str = "U1", **fields: Any
    ) -> str:
        """Seed a reply in the thread of `parent_ts`; returns its ts."""
        return self.add_message(
            channel, text, user=user, thread_ts=parent_ts, parent_user_id=user, **fields
        )

    def add_file(self, file_id: str, name: str, data: bytes, mimetype: str) -> dict[str, Any]:
        """A file someone shared: its bytes served at its `url_private_download`, and the
        file object a `message` event carries."""
        self.files[file_id] = (data, mimetype)
        url = f"{self.url}{FILES_PATH}T1-{file_id}/download/{name}"
        return {
            "id": file_id,
            "name": name,
            "title": name,
            "mimetype": mimetype,
            "filetype": mimetype.rpartition("/")[2],
            "size": len(data),
            "url_private": url.replace("/download/", "/"),
            "url_private_download": url,
            "mode": "hosted",
        }

    def add_user(self, user_id: str, real_name: str, display_name: str = "") -> None:
        """A person users.info knows, shaped as Slack's user object."""
        profile = {"real_name": real_name, "display_name": display_name, "team": "T1"}
        with self._lock:
            self.users[user_id] = {
                "id": user_id,
                "team_id": "T1",
                "name": (display_name or real_name).lower().replace(" ", "."),
                "real_name": real_name,
                "deleted": False,
                "is_bot": False,
                "profile": profile,
            }

    def edit_message(self, channel: str, ts: str, **fields: Any) -> None:
        """Change a stored message as people would (`reactions`, `reply_count`)."""
        with self._lock:
            for message in self._messages.get(channel, []):
                if message["ts"] == ts:
                    message.update(fields)
            self._persist()

    def delete_message(self, channel: str, ts: str) -> None:
        """A person deletes the message: gone from the channel's history."""
        with self._lock:
            self._messages[channel] = [m for m in self._messages[channel] if m["ts"] != ts]
            self._persist()

    def receive_upload(self, file_id: str, data: bytes) -> int:
        """The bytes POSTed to an upload URL: their size, or 0 for an unknown URL."""
        with self._lock:
            upload = self.uploads.get(file_id)
            if upload is None:
                return 0
            upload["received"] = len(data)
            return len(data)

    # --- used by the handler ---

    def _next_action(self, method: str) -> tuple[Action, dict[str, Any]]:
        """The in-memory queue first, then the state file's; also the file's settings."""
        with self._lock:
            queue = self._queues[method]
        action, state = self._next_scripted(queue, Action, "script", method)
        return action or normal(), state

    def _next_ts(self) -> str:
        self._last_us = max(int(time.time() * 1_000_000), self._last_us + 1)
        return f"{self._last_us // 1_000_000}.{self._last_us % 1_000_000:06d}"

    def _persist(self) -> None:
        self._save(MESSAGES_SUFFIX, dict(self._messages))

    def _perform(
        self, method: str, params: dict[str, Any], headers: dict[str, str], state: dict[str, Any]
    ) -> Reply:
        if method == RESPONSE_URL:
            return 200, {"ok": True}, {}
        handler = _METHODS.get(method)
        if handler is None:
            return 200, {"ok": False, "error": "unknown_method"}, {}
        if not headers.get("authorization", "").startswith("Bearer ") and not params.get("token"):
            return 200, {"ok": False, "error": "not_authed"}, {}
        bearer = headers.get("authorization", "").removeprefix("Bearer ")
        try:
            with self._lock:
                result = handler(self, {**params, "_bearer": bearer}, state)
        except (ValueError, TypeError, KeyError, ArithmeticError):  # e.g. limit=abc, oldest=x
            return 200, {"ok": False, "error": "invalid_arguments"}, {}
        return result if isinstance(result, tuple) else (200, result, {})

    # --- Slack methods (called with self._lock held) ---

    def _auth_test(self, p: dict[str, Any], state: dict[str, Any]) -> dict[str, Any]:
        ids = {"team_id": "T1", "user_id": "UBOT", "bot_id": "BBOT"}
        return {"ok": True, "url": "https://galley-test.slack.com/", "user": "galley", **ids}

    def _post_message(self, p: dict[str, Any], state: dict[str, Any]) -> dict[str, Any] | Reply:
        channel = p.get("channel")
        if not channel:
            return {"ok": False, "error": "channel_not_found"}
        if not p.get("text") and not p.get("blocks"):
            return {"ok": False, "error": "no_text"}
        limit, now = state.get("rate_limit", self._rate_limit), time.monotonic()
        elapsed = now - self._last_post.get(channel, -math.inf)
        if limit and elapsed < limit:
            retry = str(max(1, math.ceil(limit - elapsed)))
            return 429, {"ok": False, "error": "ratelimited"}, {"Retry-After": retry}
        self._last_post[channel] = now
        message = {"type": "message", **BOT, "ts": self._next_ts(), "text": p.get("text") or ""}
        message["blocks"] = p.get("blocks") or []
        message.update({k: p[k] for k in ("metadata", "thread_ts") if p.get(k)})
        self._messages[channel].append(message)
        self._persist()
        return {"ok": True, "channel": channel, "ts": message["ts"], "message": dict(message)}

    def _update(self, p: dict[str, Any], state: dict[str, Any]) -> dict[str, Any]:
        found = [m for m in self._messages.get(str(p.get("channel")), []) if m["ts"] == p.get("ts")]
        if not found:
            return {"ok": False, "error": "message_not_found"}
        message = found[0]
        for key, empty in (("text", ""), ("blocks", []), ("metadata", None)):
            if key in p:
                message[key] = p[key] or empty
        message["edited"] = {"user": "UBOT", "ts": self._next_ts()}
        self._persist()
        reply = {"channel": p["channel"], "ts": p["ts"], "text": message["text"]}
        return {"ok": True, **reply, "message": dict(message)}

    def _post_ephemeral(self, p: dict[str, Any], state: dict[str, Any]) -> dict[str, Any]:
        if not p.get("channel") or not p.get("user"):
            missing = "user" if p.get("channel") else "channel"
            return {"ok": False, "error": f"{missing}_not_found"}
        return {"ok": True, "message_ts": self._next_ts()}  # the call record is the record

    def _history(self, p: dict[str, Any], state: dict[str, Any]) -> dict[str, Any]:
        """Top-level messages newest first, as Slack gives them: a thread's replies are
        left out (unless also sent to the channel), its parent carries reply_count."""
        if not p.get("channel"):
            return {"ok": False, "error": "channel_not_found"}
        stored = self._messages.get(p["channel"], [])
        newest_first = sorted(stored, key=lambda m: Decimal(m["ts"]), reverse=True)
        top = [_with_thread(m, stored) for m in newest_first if _top_level(m)]
        return self._page(top, p, newest_first=True)

    def _replies(self, p: dict[str, Any], state: dict[str, Any]) -> dict[str, Any]:
        """A thread: its parent first, then its replies oldest first (the parent is kept
        whatever oldest/latest say, as Slack does)."""
        stored = self._messages.get(str(p.get("channel")), [])
        parent = next((m for m in stored if m["ts"] == p.get("ts")), None)
        if parent is None:
            return {"ok": False, "error": "thread_not_found"}
        replies = sorted(
            (m for m in stored if m.get("thread_ts") == parent["ts"] and m is not parent),
            key=lambda m: Decimal(m["ts"]),
        )
        answer = self._page(replies, p, newest_first=False)
        if "cursor" not in p or not p["cursor"]:
            answer["messages"].insert(0, _with_thread(parent, stored))
        return answer

    def _page(
        self, msgs: list[dict[str, Any]], p: dict[str, Any], *, newest_first: bool
    ) -> dict[str, Any]:
        """One page of `msgs` in oldest/latest (exclusive unless inclusive), by cursor."""
        inclusive, lo = _truthy(p.get("inclusive")), Decimal(str(p.get("oldest") or 0))
        hi = Decimal(str(p["latest"])) if p.get("latest") else Decimal("Infinity")
        after = None  # the cursor: the ts of the last message already returned
        if p.get("cursor"):
            try:
                after = Decimal(base64.b64decode(str(p["cursor"])).decode().removeprefix("next:"))
            except (ValueError, ArithmeticError):
                return {"ok": False, "error": "invalid_cursor"}
        msgs = [
            m
            for m in msgs
            if (lo < (ts := Decimal(m["ts"])) < hi or (inclusive and ts in (lo, hi)))
            and (after is None or (ts < after if newest_first else ts > after))
        ]
        limit = int(p.get("limit") or 100)
        page, has_more = msgs[:limit], len(msgs) > limit
        with_metadata = _truthy(p.get("include_all_metadata"))
        out = [{k: v for k, v in m.items() if with_metadata or k != "metadata"} for m in page]
        cursor = base64.b64encode(f"next:{page[-1]['ts']}".encode()).decode() if has_more else ""
        meta = {"next_cursor": cursor}
        return {"ok": True, "messages": out, "has_more": has_more, "response_metadata": meta}

    def _users_info(self, p: dict[str, Any], state: dict[str, Any]) -> dict[str, Any]:
        user = self.users.get(str(p.get("user")))
        return (
            {"ok": True, "user": copy.deepcopy(user)}
            if user
            else {"ok": False, "error": "user_not_found"}
        )

    def _usergroup_users(self, p: dict[str, Any], state: dict[str, Any]) -> dict[str, Any]:
        groups = {**self.usergroups, **(state.get("usergroups") or {})}
        if p.get("usergroup") not in groups:
            return {"ok": False, "error": "no_such_subteam"}
        return {"ok": True, "users": list(groups[p["usergroup"]])}

    def _view(self, p: dict[str, Any], state: dict[str, Any]) -> dict[str, Any]:
        if not isinstance(p.get("view"), dict):
            return {"ok": False, "error": "invalid_arguments"}
        view_id = str(p.get("view_id") or f"V{next(self._view_ids):08d}")
        return {"ok": True, "view": {**p["view"], "id": view_id}}

    def _not_allowed(self, p: dict[str, Any], state: dict[str, Any]) -> dict[str, Any]:
        return {"ok": False, "error": "not_allowed_in_fake"}

    def _connections_open(self, p: dict[str, Any], state: dict[str, Any]) -> dict[str, Any]:
        """A Socket Mode URL for the app token only (Slack refuses a bot token here)."""
        if self.socket_mode is None:
            return {"ok": False, "error": "not_allowed_in_fake"}
        token = str(p.get("_bearer") or p.get("token") or "")
        if not token.startswith("xapp-"):
            return {"ok": False, "error": "not_allowed_token_type"}
        url = self.socket_mode.issue_url(token)
        return {"ok": True, "url": url} if url else {"ok": False, "error": "invalid_auth"}

    def _views_publish(self, p: dict[str, Any], state: dict[str, Any]) -> dict[str, Any]:
        """The Home tab: one view per user, replaced on each publish."""
        view = p.get("view")
        if not isinstance(view, dict) or view.get("type") != "home" or not p.get("user_id"):
            return {"ok": False, "error": "invalid_arguments"}
        if len(view.get("blocks") or []) > 100:
            return {"ok": False, "error": "invalid_blocks"}
        self.home_views[str(p["user_id"])] = view
        return {"ok": True, "view": {**view, "id": f"V{next(self._view_ids):08d}"}}


def _get_upload_url(fake: FakeSlack, p: dict[str, Any], state: dict[str, Any]) -> dict[str, Any]:
    """files.getUploadURLExternal: a file id and where to POST its bytes."""
    if not p.get("filename") or int(p.get("length") or 0) <= 0:
        return {"ok": False, "error": "invalid_arguments"}
    file_id = f"F0UP{next(fake._file_ids):06d}"
    fake.uploads[file_id] = {
        "name": p["filename"],
        "length": int(p["length"]),
        "alt_txt": p.get("alt_txt"),
        "received": 0,
        "complete": False,
    }
    return {"ok": True, "file_id": file_id, "upload_url": f"{fake.url}{UPLOAD_PATH}{file_id}"}


def _complete_upload(fake: FakeSlack, p: dict[str, Any], state: dict[str, Any]) -> dict[str, Any]:
    """files.completeUploadExternal: each file's bytes must have arrived, all of them."""
    files = p["files"] if isinstance(p.get("files"), list) else json.loads(str(p.get("files")))
    done = []
    for entry in files:
        upload = fake.uploads.get(str(entry.get("id")))
        if upload is None or upload["received"] != upload["length"]:
            return {"ok": False, "error": "file_not_found"}
        upload["complete"] = True
        done.append({"id": entry["id"], "title": entry.get("title") or upload["name"]})
    return {"ok": True, "files": done}


_METHODS: dict[str, Any] = {
    "files.getUploadURLExternal": _get_upload_url,
    "files.completeUploadExternal": _complete_upload,
    "auth.test": FakeSlack._auth_test,
    "chat.postMessage": FakeSlack._post_message,
    "chat.update": FakeSlack._update,
    "chat.postEphemeral": FakeSlack._post_ephemeral,
    "conversations.history": FakeSlack._history,
    "conversations.replies": FakeSlack._replies,
    "users.info": FakeSlack._users_info,
    "usergroups.users.list": FakeSlack._usergroup_users,
    "views.open": FakeSlack._view,
    "views.update": FakeSlack._view,
    "views.push": FakeSlack._view,
    "apps.connections.open": FakeSlack._connections_open,
    "views.publish": FakeSlack._views_publish,
}


def main(argv: list[str] | None = None) -> None:
    server.serve_main(FakeSlack, argv, server.arg_parser("Fake Slack Web API"))


if __name__ == "__main__":
    main()
