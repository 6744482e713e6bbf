"""A local fake of GitHub's REST API for the `github` reader, over real HTTP (stdlib only).

``GET /repos/{owner}/{repo}/releases`` (newest created first) and ``.../pulls`` (``state``,
``sort`` = created|updated, ``direction``) answer pages of ``per_page`` (default 30, at
most 100) with GitHub's ``Link`` header, whose next link is by repository id
(``/repositories/{id}/pulls?...&page=2``) as GitHub's is. A private repository answers
404 without its token, as GitHub does; ``rate_limited(reset)`` answers the next GET 403
with ``x-ratelimit-remaining: 0``. In-process only::

    with FakeGithub() as github:
        github.add_release("acme/widget", tag="v2.0", created=..., published=...)
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

from tests.fakes import server
from tests.fakes.server import RecordedRequest

RATE_LIMIT = 60  # an anonymous client's hourly limit
NOT_FOUND = {
    "message": "Not Found",
    "documentation_url": "https://docs.github.com/rest",
    "status": "404",
}
NO_USER_AGENT = (
    "Request forbidden by administrative rules. "
    "Please make sure your request has a User-Agent header"
)
RATE_LIMITED = {
    "message": "API rate limit exceeded for 127.0.0.1. (But here's the good news: Authenticated"
    " requests get a higher rate limit. Check out the documentation for more details.)",
    "documentation_url": "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api",
}


@dataclass(frozen=True)
class Action:
    kind: str  # "rate_limited" | "status"
    code: int = 403
    reset: int = 0


def rate_limited(reset: int, code: int = 403) -> Action:
    """The next GET answers `code` as a spent primary rate limit resetting at `reset`."""
    return Action("rate_limited", code=code, reset=reset)


def status(code: int) -> Action:
    return Action("status", code=code)


@dataclass
class Repository:
    id: int
    releases: list[dict[str, Any]] = field(default_factory=list)
    pulls: list[dict[str, Any]] = field(default_factory=list)
    token: str | None = None  # a private repository's token


def _stamp(moment: datetime | None) -> str | None:
    return None if moment is None else moment.strftime("%Y-%m-%dT%H:%M:%SZ")


class _Handler(server.Handler["FakeGithub"]):
    def do_GET(self) -> None:  # noqa: N802
        fake = self.server.fake
        headers = self._lower_headers()
        fake._record(RecordedRequest("GET", self.path, headers, None, time.time()))
        if not headers.get("user-agent"):  # GitHub refuses a request without one
            self._send_json(403, NO_USER_AGENT)
            return
        action = fake._next_action()
        if action is not None and action.kind == "rate_limited":
            limits = fake._limit_headers(remaining=0, reset=action.reset)
            self._send_json(action.code, RATE_LIMITED, limits)
            return
        if action is not None:
            self._send_json(action.code, {"message": f"fake {action.code}"}, fake._limit_headers())
            return
        parts = urlsplit(self.path)
        query = dict(parse_qsl(parts.query))
        found = fake._route(parts.path, headers.get("authorization"))
        if found is None:
            self._send_json(404, NOT_FOUND, fake._limit_headers())
            return
        repo, collection = found
        entries = repo.releases if collection == "releases" else fake._pulls(repo, query)
        self._send_page(repo, collection, entries, query)

    def _send_page(
        self,
        repo: Repository,
        collection: str,
        entries: list[dict[str, Any]],
        query: dict[str, str],
    ) -> None:
        fake = self.server.fake
        per_page = min(int(query.get("per_page", "30")), 100)
        page = int(query.get("page", "1"))
        last = max(1, -(-len(entries) // per_page))
        links = []
        if page < last:
            links.append(f'<{fake._page_url(repo, collection, query, page + 1)}>; rel="next"')
            links.append(f'<{fake._page_url(repo, collection, query, last)}>; rel="last"')
        headers = fake._limit_headers() + ([("Link", ", ".join(links))] if links else [])
        self._send_json(200, entries[(page - 1) * per_page : page * per_page], headers)


class FakeGithub(server.FakeServer):
    handler_class = _Handler
    backlog = 64

    def __init__(self) -> None:
        super().__init__()
        self._repos: dict[str, Repository] = {}
        self._script: deque[Action] = deque()

    def repository(self, name: str, *, token: str | None = None) -> Repository:
        """`name` ("owner/repo"), made on first use; with `token`, private to it."""
        with self._lock:
            repo = self._repos.setdefault(name, Repository(id=1296269 + len(self._repos)))
            if token is not None:
                repo.token = token
            return repo

    def add_release(
        self,
        name: str,
        *,
        tag: str,
        created: datetime,
        published: datetime | None,
        body: str = "",
        draft: bool = False,
    ) -> int:
        repo = self.repository(name)
        with self._lock:
            release_id = 1000 + sum(len(r.releases) for r in self._repos.values())
            repo.releases.append(
                {
                    "url": f"{self.url}/repos/{name}/releases/{release_id}",
                    "html_url": f"https://github.com/{name}/releases/tag/{tag}",
                    "id": release_id,
                    "tag_name": tag,
                    "name": tag,
                    "draft": draft,
                    "prerelease": False,
                    "created_at": _stamp(created),
                    "published_at": _stamp(published),
                    "body": body,
                }
            )
            repo.releases.sort(key=lambda r: str(r["created_at"]), reverse=True)
        return release_id

    def add_pull(
        self,
        name: str,
        *,
        number: int,
        title: str,
        updated: datetime,
        merged: datetime | None,
        closed: datetime | None = None,
        body: str | None = None,
    ) -> None:
        closed = closed or merged
        repo = self.repository(name)
        with self._lock:
            repo.pulls.append(
                {
                    "url": f"{self.url}/repos/{name}/pulls/{number}",
                    "html_url": f"https://github.com/{name}/pull/{number}",
                    "number": number,
                    "state": "closed" if closed else "open",
                    "title": title,
                    "body": body,
                    "created_at": _stamp(updated),
                    "updated_at": _stamp(updated),
                    "closed_at": _stamp(closed),
                    "merged_at": _stamp(merged),
                }
            )

    def script(self, *actions: Action) -> None:
        with self._lock:
            self._script.extend(actions)

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._records)

    # --- used by the handler ---

    def _next_action(self) -> Action | None:
        with self._lock:
            return self._script.popleft() if self._script else None

    def _route(self, path: str, authorization: str | None) -> tuple[Repository, str] | None:
        parts = path.strip("/").split("/")
        with self._lock:
            if len(parts) == 4 and parts[0] == "repos":
                repo = self._repos.get(f"{parts[1]}/{parts[2]}")
            elif len(parts) == 3 and parts[0] == "repositories":
                repo = next((r for r in self._repos.values() if str(r.id) == parts[1]), None)
            else:
                return None
        if repo is None or parts[-1] not in ("releases", "pulls"):
            return None
        if repo.token is not None and authorization != f"Bearer {repo.token}":
            return None  # GitHub hides a private repository: 404, not 403
        return repo, parts[-1]

    def _pulls(self, repo: Repository, query: dict[str, str]) -> list[dict[str, Any]]:
        state = query.get("state", "open")
        key = "updated_at" if query.get("sort") == "updated" else "created_at"
        with self._lock:
            pulls = [p for p in repo.pulls if state == "all" or p["state"] == state]
        return sorted(
            pulls, key=lambda p: str(p[key]), reverse=query.get("direction", "desc") == "desc"
        )

    def _page_url(self, repo: Repository, collection: str, query: dict[str, str], page: int) -> str:
        query = {**query, "page": str(page)}
        return f"{self.url}/repositories/{repo.id}/{collection}?{urlencode(query)}"

    def _limit_headers(
        self, remaining: int | None = None, reset: int | None = None
    ) -> list[tuple[str, str]]:
        with self._lock:
            used = len(self._records)
        return [
            ("x-ratelimit-limit", str(RATE_LIMIT)),
            (
                "x-ratelimit-remaining",
                str(max(0, RATE_LIMIT - used) if remaining is None else remaining),
            ),
            ("x-ratelimit-reset", str(int(time.time()) + 3600 if reset is None else reset)),
            ("x-ratelimit-used", str(used)),
            ("x-ratelimit-resource", "core"),
        ]
