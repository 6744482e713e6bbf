"""A local fake of Meta's Threads API (graph.threads.net/v1.0), served over real HTTP, for
an `httpx` client pointed at ``fake.api`` (the target's `api` base URL).

It answers as the Threads API documents (Threads Posts, Troubleshooting, Overview's
rate limiting, Insights, and the Graph API's error handling): a post is two calls,
`POST /{user}/threads` (a TEXT container: `text` at most 500 characters, an emoji counted
as its UTF-8 bytes; `reply_to_id` a post that exists) answering the container's id, then
`POST /{user}/threads_publish` with `creation_id`, answering the new post's id, which is
not the container's. A container publishes once; one not published within 24 hours is
`EXPIRED`; `GET /{container}?fields=status` answers IN_PROGRESS / FINISHED / PUBLISHED /
EXPIRED / ERROR. `threads_publishing_limit` counts the account's posts (250) and replies
(1,000) over the last 24 hours, and the quota is enforced at `threads_publish`. Errors
are Graph bodies (`{"error": {"message", "type", "code", "error_subcode",
"fbtrace_id"}}`), HTTP 400 as the Graph API answers them: 190 for a bad token, 100/33
for an object that does not exist, 4 (with `X-App-Usage`) when throttled. The listings
`/{user}/threads` and `/{user}/replies` are newest first, `since` a Unix time, paged with
`paging.cursors.after` and `paging.next`. An `@username` in text is a mention that
notifies, recorded on the post. Insights give views, likes, replies, reposts, quotes.

Routes: "container" (make one), "create" (threads_publish: the call that posts),
"status" (a container's status), "read" (the listings), "post" (a post by id), "quota",
"insights", "me".

In-process: ``with FakeThreads() as fake: fake.script("create", accept_then_drop())``.
Separate process (first stdout line is the URL)::

    python -m tests.fakes.threads_meta --port 0 --state-file PATH
"""

from __future__ import annotations

import itertools
import json
import re
import time
import unicodedata
from typing import Any
from urllib.parse import parse_qsl

from tests.fakes import server, social
from tests.fakes.social import Action, Call, Reply, Route

TOKEN = "threads-token-galley"
USER = "17841400000000001"
USERNAME = "galley"
MAX_TEXT = 500
POST_QUOTA, REPLY_QUOTA, DAY = 250, 1000, 86400
CONTAINER_LIFE = 86400  # a container not published within 24 hours expires
PAGE_MAX = 100
FIRST_CONTAINER = 17_889_615_691_921_000
FIRST_POST = 18_039_430_466_618_000
_MENTION = re.compile(r"(?:^|(?<=[^\w/]))@([A-Za-z0-9._]+)", re.MULTILINE)
_STATUSES = ("IN_PROGRESS", "FINISHED", "PUBLISHED", "EXPIRED", "ERROR")


def graph_error(
    message: str, code: int, subcode: int | None = None, kind: str = "OAuthException"
) -> dict[str, Any]:
    """A Graph API error body."""
    error: dict[str, Any] = {"message": message, "type": kind, "code": code}
    if subcode is not None:
        error["error_subcode"] = subcode
    error["fbtrace_id"] = "AbCdEfGhIjK"
    return {"error": error}


def invalid_token() -> Action:
    """An expired or revoked token, as the Graph API answers it."""
    body = graph_error("Error validating access token: Session has expired.", 190, 463)
    return social.status(400, body)


def throttled(code: int = 4, regain_minutes: int = 5) -> Action:
    """A rate limit, as the Graph API answers it: 400, code 4 (app), 17 (user), 32 or
    613, with the usage headers naming when access comes back."""
    usage = json.dumps({"call_count": 100, "total_cputime": 40, "total_time": 60})
    business = json.dumps(
        {
            USER: [
                {
                    "type": "threads",
                    "call_count": 100,
                    "estimated_time_to_regain_access": regain_minutes,
                }
            ]
        }
    )
    headers = {"X-App-Usage": usage, "X-Business-Use-Case-Usage": business}
    body = graph_error("(#4) Application request limit reached", code, kind="OAuthException")
    return social.status(400, body, headers)


def rate_limited(retry_after: int = 30) -> Action:
    """A 429 with a Retry-After, as a proxy or an edge in front of the API answers."""
    body = graph_error("Too many requests", 4)
    return social.status(429, body, {"Retry-After": str(retry_after)})


def server_error() -> Action:
    body = graph_error("An unexpected error has occurred. Please retry your request later.", 2)
    body["error"]["is_transient"] = True
    return social.status(500, body)


def threads_length(text: str) -> int:
    """Threads' documented count: characters, an emoji as its UTF-8 bytes."""
    return sum(len(c.encode()) if _emoji(c) else 1 for c in text)


def _emoji(char: str) -> bool:
    point = ord(char)
    return (
        point > 0xFFFF
        or 0xFE00 <= point <= 0xFE0F
        or (point > 0x7F and unicodedata.category(char) in ("So", "Cf"))
    )


class FakeThreads(social.SocialFake):
    """The Threads API for accounts whose tokens are `tokens` (token -> user id)."""

    def __init__(
        self,
        *,
        state_file: server.StrPath | None = None,
        port: int = 0,
        tokens: dict[str, str] | None = None,
    ) -> None:
        super().__init__(state_file=state_file, port=port)
        self.tokens = dict(tokens or {TOKEN: USER})
        self.post_quota = POST_QUOTA
        self.insights_denied = False  # True: the token lacks threads_manage_insights
        made = [int(p["id"]) for p in self._posts if p["kind"] == "container"]
        posted = [int(p["id"]) for p in self._posts if p["kind"] == "post"]
        self._containers = itertools.count(max([FIRST_CONTAINER, *made]) + 1)
        self._serial = itertools.count(max([FIRST_POST, *posted]) + 1)

    @property
    def api(self) -> str:
        return self.url + "/v1.0"

    # --- what tests use ---

    def published(self, owner: str = USER) -> list[dict[str, Any]]:
        """The account's posts (replies too), held ones too, oldest first."""
        return [p for p in self.posts_of(owner) if p["kind"] == "post"]

    def containers(self, owner: str = USER) -> list[dict[str, Any]]:
        return [p for p in self.posts_of(owner) if p["kind"] == "container"]

    def expire(self, container_id: str) -> None:
        """The container was made more than 24 hours ago."""
        with self._lock:
            for item in self._posts:
                if item["id"] == container_id:
                    item["made_at"] = time.time() - CONTAINER_LIFE - 60
            self._persist()

    def fail(self, container_id: str) -> None:
        """The container failed to complete (status ERROR, error_message UNKNOWN)."""
        with self._lock:
            for item in self._posts:
                if item["id"] == container_id:
                    item["status"] = "ERROR"
            self._persist()

    def fill_quota(self, used: int) -> None:
        """`used` posts were published by this account in the last 24 hours elsewhere."""
        with self._lock:
            self.post_quota = POST_QUOTA - used

    # --- routes ---

    def route(self, method: str, path: str) -> tuple[str, Route] | None:
        parts = path.removeprefix("/v1.0/").strip("/").split("/")
        if not path.startswith("/v1.0/") or not parts[0]:
            return None
        if method == "POST" and len(parts) == 2 and parts[1] == "threads":
            return "container", lambda call: self._make_container(call, parts[0])
        if method == "POST" and len(parts) == 2 and parts[1] == "threads_publish":
            return "create", lambda call: self._publish(call, parts[0])
        if method != "GET":
            return None
        if parts == ["me"]:
            return "me", self._me
        if len(parts) == 2 and parts[1] in ("threads", "replies"):
            return "read", lambda call: self._listing(call, parts[0], parts[1] == "replies")
        if len(parts) == 2 and parts[1] == "threads_publishing_limit":
            return "quota", lambda call: self._quota(call, parts[0])
        if len(parts) == 2 and parts[1] == "insights":
            return "insights", lambda call: self._insights(call, parts[0])
        if len(parts) == 1:
            item = self._any(lambda p: p["id"] == parts[0])
            if item is not None and item["kind"] == "container":
                return "status", lambda call: self._status(call, parts[0])
            return "post", lambda call: self._get_post(call, parts[0])
        return None

    def error_body(self, code: int, message: str | None = None) -> Any:
        return graph_error(message or f"fake {code}", 1 if code >= 500 else 100)

    def parse_body(self, raw: bytes, headers: dict[str, str]) -> Any:
        if headers.get("content-type", "").startswith("application/x-www-form-urlencoded"):
            return dict(parse_qsl(raw.decode("utf-8"), keep_blank_values=True))
        return super().parse_body(raw, headers)

    def _user_of(self, call: Call, user: str | None = None) -> str | Reply:
        """The token's user, or the Graph API's refusal."""
        owner = self.tokens.get(call.bearer or "")
        if owner is None:
            message = "Invalid OAuth access token - Cannot parse access token"
            return 400, graph_error(message, 190), {}
        if user is not None and user not in (owner, "me"):
            message = "(#10) Application does not have permission for this action"
            return 400, graph_error(message, 10), {}
        return owner

    def _make_container(self, call: Call, user: str) -> Reply:
        owner = self._user_of(call, user)
        if not isinstance(owner, str):
            return owner
        form = call.body if isinstance(call.body, dict) else {}
        if form.get("media_type") != "TEXT":
            message = "The parameter media_type must be TEXT in this fake (IMAGE needs image_url)"
            return 400, graph_error(message, 100, kind="THApiException"), {}
        text = str(form.get("text") or "")
        if threads_length(text) > MAX_TEXT:
            message = f"Param text must be at most {MAX_TEXT} characters long."
            return 400, graph_error(message, 100, kind="THApiException"), {}
        reply_to = form.get("reply_to_id")
        if reply_to and self._any(lambda p: p["id"] == reply_to and p["kind"] == "post") is None:
            message = f"Unsupported post request. Object with ID '{reply_to}' does not exist"
            return 400, graph_error(message, 100, 33), {}
        with self._lock:
            container_id = str(next(self._containers))
        container = {
            "id": container_id,
            "kind": "container",
            "owner": owner,
            "text": text,
            "reply_to": reply_to or None,
            "status": "FINISHED",
            "made_at": time.time(),
            "media_id": None,
        }
        self._add_post(container, held=False)
        return 200, {"id": container_id}, {}

    def _publish(self, call: Call, user: str) -> Reply:
        owner = self._user_of(call, user)
        if not isinstance(owner, str):
            return owner
        creation = str((call.body or {}).get("creation_id") or "")
        container = self._any(lambda p: p["id"] == creation and p["kind"] == "container")
        if container is None or container["owner"] != owner:
            message = f"Unsupported post request. Object with ID '{creation}' does not exist"
            return 400, graph_error(message, 100, 33), {}
        status = _status_of(container)
        if status != "FINISHED":
            message = f"The media container is {status} and cannot be published"
            return 400, graph_error(message, 100, 4279009, kind="THApiException"), {}
        reply = container["reply_to"] is not None
        if self._used(owner, reply=reply) >= (REPLY_QUOTA if reply else self.post_quota):
            message = "(#4) The user has reached the publishing limit for 24 hours"
            return 400, graph_error(message, 4), {}
        call.pause()
        with self._lock:  # a container publishes once: the check and the write as one
            current = next(p for p in self._posts if p["id"] == creation)
            if current["status"] != "FINISHED":
                message = "The media container is PUBLISHED and cannot be published"
                return 400, graph_error(message, 100, 4279009, kind="THApiException"), {}
            post_id = str(next(self._serial))
            current["status"], current["media_id"] = "PUBLISHED", post_id
            text = current["text"]
        post = {
            "id": post_id,
            "kind": "post",
            "owner": owner,
            "text": text,
            "replied_to": current["reply_to"],
            "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S+0000", time.gmtime()),
            "permalink": f"https://www.threads.net/@{USERNAME}/post/F{post_id[-8:]}",
            "mentions": _MENTION.findall(text),
        }
        self._add_post(post, held=call.held)
        return 200, {"id": post_id}, {}

    def _used(self, owner: str, *, reply: bool) -> int:
        since = time.time() - DAY
        return len(
            [
                p
                for p in self.published(owner)
                if p["at"] >= since and (p["replied_to"] is not None) == reply
            ]
        )

    def _status(self, call: Call, container_id: str) -> Reply:
        owner = self._user_of(call)
        if not isinstance(owner, str):
            return owner
        container = self._any(lambda p: p["id"] == container_id)
        assert container is not None
        answer: dict[str, Any] = {"status": _status_of(container), "id": container_id}
        if answer["status"] == "ERROR":
            answer["error_message"] = "UNKNOWN"
        return 200, answer, {}

    def _get_post(self, call: Call, post_id: str) -> Reply:
        owner = self._user_of(call)
        if not isinstance(owner, str):
            return owner
        found = self._visible(lambda p: p["id"] == post_id and p["kind"] == "post")
        if not found:
            message = (
                f"Unsupported get request. Object with ID '{post_id}' does not exist, cannot "
                "be loaded due to missing permissions, or does not support this operation"
            )
            return 400, graph_error(message, 100, 33, kind="GraphMethodException"), {}
        return 200, _public(found[0]), {}

    def _listing(self, call: Call, user: str, replies: bool) -> Reply:
        owner = self._user_of(call, user)
        if not isinstance(owner, str):
            return owner
        params = call.params()
        since = float(params.get("since") or 0)
        limit = min(int(params.get("limit") or 25), PAGE_MAX)
        start = int(params.get("after") or 0)
        found = self._visible(
            lambda p: (
                p["owner"] == owner
                and p["kind"] == "post"
                and (p["replied_to"] is not None) == replies
                and p["at"] >= since
            )
        )
        found.sort(key=lambda p: p["at"], reverse=True)
        page = [_public(p) for p in found[start : start + limit]]
        paging: dict[str, Any] = {"cursors": {"before": str(start), "after": str(start + limit)}}
        if start + limit < len(found):
            paging["next"] = f"{self.api}/{user}/threads?after={start + limit}"
        return 200, {"data": page, "paging": paging}, {}

    def _quota(self, call: Call, user: str) -> Reply:
        owner = self._user_of(call, user)
        if not isinstance(owner, str):
            return owner
        entry = {
            "quota_usage": self._used(owner, reply=False) + (POST_QUOTA - self.post_quota),
            "config": {"quota_total": POST_QUOTA, "quota_duration": DAY},
            "reply_quota_usage": self._used(owner, reply=True),
            "reply_config": {"quota_total": REPLY_QUOTA, "quota_duration": DAY},
        }
        return 200, {"data": [entry]}, {}

    def _insights(self, call: Call, post_id: str) -> Reply:
        owner = self._user_of(call)
        if not isinstance(owner, str):
            return owner
        found = self._visible(lambda p: p["id"] == post_id and p["kind"] == "post")
        if not found:
            message = f"Unsupported get request. Object with ID '{post_id}' does not exist"
            return 400, graph_error(message, 100, 33, kind="GraphMethodException"), {}
        if self.insights_denied:
            message = "(#10) Application does not have permission for this action"
            return 400, graph_error(message, 10), {}
        counts = found[0].get("counts", {})
        metrics = (call.params().get("metric") or "").split(",")
        data = [
            {
                "name": name,
                "period": "lifetime",
                "values": [{"value": int(counts.get(name, 0))}],
                "title": name.title(),
                "id": f"{post_id}/insights/{name}/lifetime",
            }
            for name in metrics
            if name in ("views", "likes", "replies", "reposts", "quotes")
        ]
        return 200, {"data": data}, {}

    def _me(self, call: Call) -> Reply:
        owner = self._user_of(call)
        if not isinstance(owner, str):
            return owner
        return 200, {"id": owner, "username": USERNAME}, {}


def _status_of(container: dict[str, Any]) -> str:
    status = str(container["status"])
    if status == "FINISHED" and time.time() - float(container["made_at"]) > CONTAINER_LIFE:
        return "EXPIRED"
    return status


def _public(post: dict[str, Any]) -> dict[str, Any]:
    shown = {k: post[k] for k in ("id", "text", "timestamp", "permalink")}
    shown["media_type"] = "TEXT_POST"
    if post.get("replied_to"):
        shown["replied_to"] = {"id": post["replied_to"]}
        shown["is_reply"] = True
    return shown


def main(argv: list[str] | None = None) -> None:
    server.serve_main(FakeThreads, argv, server.arg_parser("Fake Threads API"))


if __name__ == "__main__":
    main()
