"""What the Bluesky, Mastodon and LinkedIn fakes share (stdlib only): one fault script per
route, the posts each account has (kept across restarts with a state file), and posts
held back from reads until released, as a lagging read replica would.

Routes are the fake's own names for its calls: "create" (the call that posts), "read"
(the calls a look-up makes), "session", "instance". Each request of a route consumes one
scripted `Action`, from the in-memory queue first, then from the state file's
``{"scripts": {route: [...]}}``; with none left it behaves normally.
"""

from __future__ import annotations

import json
import os
import time
from collections import defaultdict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl

from tests.fakes import server
from tests.fakes.server import RecordedRequest

POSTS_SUFFIX = ".posts.json"  # every post, visible or held, kept across restarts
Reply = tuple[int, Any, dict[str, str]]  # status, JSON body (or raw text), headers
StrPath = str | os.PathLike[str]


@dataclass(frozen=True)
class Action(server.ScriptedAction):
    """One scripted outcome for one request of a route. Build with the functions below."""

    # "accept" | "status" | "hang_before" | "drop" | "accept_then_hang" | "accept_then_drop"
    # | "hold" | "hold_then_drop" | "slow"
    kind: str
    code: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: Any = None  # for "status": the JSON answered (else the platform's own error shape)
    seconds: float = 0.0


def accept() -> Action:
    """Behave normally (a placeholder to script a fault for a later request)."""
    return Action("accept")


def status(code: int, body: Any = None, headers: dict[str, str] | None = None) -> Action:
    """Answer `code` with `body` (default: the platform's error shape) and `headers`; no effect."""
    return Action("status", code=code, body=body, headers=dict(headers or {}))


def hang_before(seconds: float = 30.0) -> Action:
    """No effect; send nothing for `seconds` (or until stop), then close."""
    return Action("hang_before", seconds=seconds)


def drop() -> Action:
    """No effect; close the socket without an answer (the request was read)."""
    return Action("drop")


def accept_then_hang(seconds: float = 30.0) -> Action:
    """Act (post), then send nothing for `seconds` (or until stop) and close."""
    return Action("accept_then_hang", seconds=seconds)


def hold_then_drop() -> Action:
    """Act, the post held back from reads until released (a lagging read replica), and
    close the connection without answering: a lost answer during the read delay."""
    return Action("hold_then_drop")


def accept_then_drop() -> Action:
    """Act (post), then close the socket without an answer: the answer is lost."""
    return Action("accept_then_drop")


def hold() -> Action:
    """Act (post) and answer normally, but reads do not see the post until `release()`."""
    return Action("hold")


def slow(seconds: float) -> Action:
    """Wait `seconds` after the request arrives, then behave normally: widens the window
    in which two requests race (a platform's check-then-act)."""
    return Action("slow", seconds=seconds)


def write_state(path: StrPath, **kwargs: Any) -> None:
    """Replace the given keys of the state file: `scripts` ({route: [Action, ...]}), `release`
    (true: held posts become visible at the next request) and each fake's own settings."""
    if "scripts" in kwargs:
        kwargs["scripts"] = {
            route: [a.to_json() if isinstance(a, Action) else a for a in actions]
            for route, actions in kwargs["scripts"].items()
        }
    server.update_state(path, kwargs)


def read_requests(path: StrPath) -> list[dict[str, Any]]:
    """Requests logged by a fake using this state file: method, path, headers, body, at."""
    return server.read_log(path)


def read_posts(path: StrPath) -> list[dict[str, Any]]:
    """Every post as last persisted (held ones too, with "visible": false)."""
    return list(server.read_saved(path, POSTS_SUFFIX).get("posts", []))


class SocialHandler(server.Handler["SocialFake"]):
    """Routes each request to the fake's `routes` and applies the scripted fault around it."""

    def do_GET(self) -> None:  # noqa: N802
        self._serve("GET", None)

    def do_POST(self) -> None:  # noqa: N802
        self._serve("POST", self._read_body())

    def do_PUT(self) -> None:  # noqa: N802
        self._serve("PUT", self._read_body())

    def _serve(self, method: str, raw: bytes | None) -> None:
        fake = self.server.fake
        path, _, query = self.path.partition("?")
        headers = self._lower_headers()
        body = fake.parse_body(raw, headers) if raw is not None else query
        fake._record(RecordedRequest(method, self.path, headers, body, time.time()))
        found = fake.route(method, path)
        if found is None:
            self._send_reply((404, fake.error_body(404, f"no route {method} {path}"), {}))
            return
        route, serve = found
        action = fake._next_action(route)
        fake._apply_release()
        if action.kind == "status":
            reply_body = action.body if action.body is not None else fake.error_body(action.code)
            self._send_reply((action.code, reply_body, dict(action.headers)))
            return
        if action.kind in ("hang_before", "drop"):
            self._close_after(action.seconds)
            return
        pause = action.seconds if action.kind == "slow" else 0.0
        held = action.kind in ("hold", "hold_then_drop")
        reply = serve(Call(method, path, query, headers, body, held, pause, fake))
        if action.kind in ("accept_then_hang", "accept_then_drop", "hold_then_drop"):
            self._close_after(action.seconds)
            return
        self._send_reply(reply)

    def _send_reply(self, reply: Reply) -> None:
        code, body, headers = reply
        self._send_json(code, body, headers.items())


@dataclass
class Call:
    """One request as a route sees it."""

    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: Any
    held: bool  # scripted `hold`: a post made now is not visible to reads until released
    pause_seconds: float  # scripted `slow`: the route waits this long where its race is
    fake: SocialFake

    def pause(self) -> None:
        """Wait out a scripted `slow` (at once otherwise). Each route calls it where the
        platform's own window is: between its check and its write, if it has one."""
        self.fake._wait(self.pause_seconds)

    def params(self) -> dict[str, str]:
        """The query string's parameters (the last value of each)."""
        return dict(parse_qsl(self.query))

    @property
    def bearer(self) -> str | None:
        auth = self.headers.get("authorization", "")
        return auth.removeprefix("Bearer ") if auth.startswith("Bearer ") else None


Route = Callable[[Call], Reply]


class SocialFake(server.FakeServer):
    """Base of the three platform fakes: scripts, posts per account, held posts."""

    handler_class = SocialHandler
    backlog = 64

    def __init__(self, *, state_file: StrPath | None = None, port: int = 0) -> None:
        super().__init__(state_file=state_file, port=port)
        self._queues: dict[str, deque[Action]] = defaultdict(deque)
        self._posts: list[dict[str, Any]] = []
        if self.state_file is not None:
            self._posts = read_posts(self.state_file)

    # --- what tests use ---

    def script(self, route: str, *actions: Action) -> None:
        """Append to `route`'s FIFO queue; each request of that route consumes one."""
        with self._lock:
            self._queues[route].extend(actions)

    def pending(self, route: str) -> int:
        with self._lock:
            return len(self._queues[route])

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._records)

    def requests_to(self, path_suffix: str, method: str | None = None) -> list[RecordedRequest]:
        """Recorded requests whose path (without the query) ends with `path_suffix`."""
        return [
            r
            for r in self.requests
            if r.path.partition("?")[0].rstrip("/").endswith(path_suffix)
            and method in (None, r.method)
        ]

    @property
    def posts(self) -> list[dict[str, Any]]:
        """Every post made, visible or held, oldest first."""
        with self._lock:
            return [dict(p) for p in self._posts]

    def posts_of(self, owner: str) -> list[dict[str, Any]]:
        """The posts of one account (its DID, account id or author URN), held ones too."""
        return [p for p in self.posts if p["owner"] == owner]

    def release(self) -> None:
        """Held posts become visible to reads."""
        with self._lock:
            for post in self._posts:
                post["visible"] = True
            self._persist()

    def delete(self, predicate: Callable[[dict[str, Any]], bool]) -> int:
        """Posts matching `predicate` deleted, as their author would: gone from every read."""
        with self._lock:
            kept = [p for p in self._posts if not predicate(p)]
            deleted = len(self._posts) - len(kept)
            self._posts = kept
            self._persist()
            return deleted

    def set_counts(self, predicate: Callable[[dict[str, Any]], bool], **counts: int) -> None:
        """Engagement of the matching posts from now on (likes, reposts, replies, quotes,
        impressions, in the platform's own words where it names them otherwise)."""
        with self._lock:
            for post in self._posts:
                if predicate(post):
                    post["counts"] = {**post.get("counts", {}), **counts}
            self._persist()

    # --- what each platform's fake provides ---

    def route(self, method: str, path: str) -> tuple[str, Route] | None:
        """The route name and handler for a request; None: 404."""
        raise NotImplementedError

    def parse_body(self, raw: bytes, headers: dict[str, str]) -> Any:
        try:
            return json.loads(raw)
        except ValueError:
            return raw.decode("utf-8", "replace")

    def error_body(self, code: int, message: str | None = None) -> Any:
        return {"error": message or f"fake {code}"}

    # --- used by the routes ---

    def _add_post(self, post: dict[str, Any], *, held: bool) -> dict[str, Any]:
        with self._lock:
            stored = {**post, "visible": not held, "at": time.time()}
            self._posts.append(stored)
            self._persist()
            return dict(stored)

    def _visible(self, predicate: Callable[[dict[str, Any]], bool]) -> list[dict[str, Any]]:
        with self._lock:
            return [dict(p) for p in self._posts if p["visible"] and predicate(p)]

    def _any(self, predicate: Callable[[dict[str, Any]], bool]) -> dict[str, Any] | None:
        with self._lock:
            return next((dict(p) for p in self._posts if predicate(p)), None)

    def _persist(self) -> None:
        self._save(POSTS_SUFFIX, {"posts": self._posts})

    def _next_action(self, route: str) -> Action:
        action, _ = self._next_scripted(self._queues[route], Action, "scripts", route)
        return action or accept()

    def _apply_release(self) -> None:
        if self.state_file is None:
            return
        with server.file_lock(self.state_file):
            state = server.read_state(self.state_file)
            if not state.get("release"):
                return
            state["release"] = False
            server.write_state(self.state_file, state)
        self.release()

    def _setting(self, name: str, default: Any) -> Any:
        """A setting from the state file (re-read on each request), else `default`."""
        if self.state_file is None:
            return default
        return server.read_state(self.state_file).get(name, default)
