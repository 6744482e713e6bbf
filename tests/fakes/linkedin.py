"""A local fake of LinkedIn's Posts API (`/rest/posts`), served over real HTTP, for an
`httpx` client pointed at ``fake.api`` (the target's `api` base URL).

It answers as LinkedIn does where it matters to Galley: no idempotency key; the new
post's URN only in the `x-restli-id` header of a 201; a repeat of an author's text is
``422 DUPLICATE_POST`` whose message names the existing post ("… Content is a duplicate
of urn:li:share:N"); an organization's posts can be listed (`q=author`, newest first,
paged with start/count) but a member's cannot (403, as without restricted scopes); a
missing or retired `LinkedIn-Version` is a 426. Commentary is little-text: an
unescaped `@[Name](urn:li:…)` is a mention, recorded on the post.

In-process: ``with FakeLinkedIn() as fake: fake.script("create", accept_then_drop())``.
Separate process (first stdout line is the URL)::

    python -m tests.fakes.linkedin --port 0 --state-file PATH
"""

from __future__ import annotations

import itertools
import re
import time
from typing import Any
from urllib.parse import unquote

from tests.fakes import server, social
from tests.fakes.linkedin_images import LinkedInImages
from tests.fakes.social import Action, Call, Reply, Route

TOKEN = "linkedin-token-galley"
ORGANIZATION = "urn:li:organization:5515715"
PERSON = "urn:li:person:8675309"
VERSION = re.compile(r"^\d{6}(\.\d{2})?$")
OLDEST_VERSION = "202411"  # LinkedIn retires a version about a year after its release
MAX_COMMENTARY = 3000
FIRST_SHARE = 7_250_000_000_000_000_000
_MENTION = re.compile(r"(?<!\\)@\[([^\]]*)\]\((urn:li:[a-z]+:[^)]+)\)")
_ESCAPE = re.compile(r"\\(.)", re.DOTALL)


def rate_limited(retry_after: int | None = None) -> Action:
    """429 as LinkedIn answers it (a Retry-After only if asked: LinkedIn rarely sends one)."""
    message = "Resource level throttle APPLICATION DAY limit for calls to this resource is reached."
    headers = {"Retry-After": str(retry_after)} if retry_after is not None else {}
    return social.status(
        429, {"status": 429, "code": "TOO_MANY_REQUESTS", "message": message}, headers
    )


def duplicate_of(urn: str) -> dict[str, Any]:
    """The body of LinkedIn's 422 for a repeated post."""
    description = f"Content is a duplicate of {urn}"
    return {
        "errorDetailType": "com.linkedin.common.error.BadRequest",
        "message": f"ERROR :: /commentary :: {description}",
        "errorDetails": {
            "inputErrors": [
                {
                    "description": description,
                    "input": {"inputPath": {"fieldPath": "/commentary"}},
                    "code": "DUPLICATE_POST",
                }
            ]
        },
        "status": 422,
    }


def _denied(what: str) -> Reply:
    message = f"Not enough permissions to access: partnerApiPostsExternal.{what}.20251101"
    body = {"status": 403, "serviceErrorCode": 100, "code": "ACCESS_DENIED", "message": message}
    return 403, body, {}


class FakeLinkedIn(LinkedInImages, social.SocialFake):
    """The Posts API with tokens that may post as some authors (`tokens`: token -> URNs)."""

    def __init__(
        self,
        *,
        state_file: server.StrPath | None = None,
        port: int = 0,
        tokens: dict[str, set[str]] | None = None,
    ) -> None:
        super().__init__(state_file=state_file, port=port)
        self.tokens = dict(tokens or {TOKEN: {ORGANIZATION, PERSON}})
        self.statistics_denied = False  # True: the token lacks the statistics scope
        self._serial = itertools.count(len(self._posts) + 1)
        self._init_images()

    @property
    def api(self) -> str:
        return self.url + "/rest/"

    # --- routes ---

    def route(self, method: str, path: str) -> tuple[str, Route] | None:
        images = self.images_route(method, path)
        if images is not None:
            return images
        if method == "GET" and path.startswith("/rest/posts/"):
            urn = unquote(path.removeprefix("/rest/posts/"))
            return "post", lambda call: self._get_post(call, urn)
        if method == "GET" and path.rstrip("/") == "/rest/organizationalEntityShareStatistics":
            return "counts", self._statistics
        if path.rstrip("/") != "/rest/posts":
            return None
        if method == "POST":
            return "create", self._create
        return "read", self._find_by_author

    def error_body(self, code: int, message: str | None = None) -> Any:
        return {"status": code, "message": message or f"fake {code}"}

    def parse_body(self, raw: bytes, headers: dict[str, str]) -> Any:
        if headers.get("content-type", "").startswith("image/"):
            return self.image_body(raw)
        return super().parse_body(raw, headers)

    def _checked(self, call: Call) -> set[str] | Reply:
        """The authors the caller may act as, or LinkedIn's refusal of the request."""
        version = call.headers.get("linkedin-version", "")
        if not VERSION.match(version) or version < OLDEST_VERSION:
            message = f"Requested version {version or '(none)'} is not active"
            return 426, {"status": 426, "code": "NONEXISTENT_VERSION", "message": message}, {}
        if call.headers.get("x-restli-protocol-version") != "2.0.0":
            return 400, {"status": 400, "message": "X-Restli-Protocol-Version 2.0.0 required"}, {}
        authors = self.tokens.get(call.bearer or "")
        if authors is None:
            message = "Invalid access token"
            body = {"status": 401, "serviceErrorCode": 65600, "code": "INVALID_ACCESS_TOKEN"}
            return 401, {**body, "message": message}, {}
        return authors

    def _create(self, call: Call) -> Reply:
        authors = self._checked(call)
        if not isinstance(authors, set):
            return authors
        body = call.body if isinstance(call.body, dict) else {}
        author, commentary = body.get("author"), body.get("commentary")
        missing = [
            f for f in ("author", "commentary", "visibility", "distribution") if f not in body
        ]
        if missing or body.get("lifecycleState") != "PUBLISHED":
            fields = ", ".join(missing) or "lifecycleState"
            return (
                422,
                {"status": 422, "message": f"ERROR :: missing or bad field(s): {fields}"},
                {},
            )
        if author not in authors:
            return _denied("CREATE")
        refused = self.media_refused(str(author), body.get("content"))
        if refused is not None:
            return refused
        assert isinstance(commentary, str)
        if len(_ESCAPE.sub(r"\1", commentary)) > MAX_COMMENTARY:
            message = f"ERROR :: /commentary :: length exceeds {MAX_COMMENTARY} characters"
            return 422, {"status": 422, "message": message}, {}
        call.pause()
        with self._lock:  # LinkedIn's duplicate check answers for every post, held ones too
            earlier = self._any(lambda p: p["owner"] == author and p["commentary"] == commentary)
            if earlier is not None:
                return 422, duplicate_of(earlier["id"]), {}
            urn = f"urn:li:share:{FIRST_SHARE + next(self._serial)}"
            now = int(time.time() * 1000)
            mentions = [
                {"name": m.group(1), "urn": m.group(2)} for m in _MENTION.finditer(commentary)
            ]
            post = {
                "id": urn,
                "owner": author,
                "author": author,
                "commentary": commentary,
                "visibility": body.get("visibility"),
                "lifecycleState": "PUBLISHED",
                "createdAt": now,
                "publishedAt": now,
                "lastModifiedAt": now,
                "mentions": mentions,
                "content": body.get("content"),
            }
            self._add_post(post, held=call.held)
        return 201, "", {"x-restli-id": urn, "x-linkedin-id": urn}

    def _find_by_author(self, call: Call) -> Reply:
        authors = self._checked(call)
        if not isinstance(authors, set):
            return authors
        params = call.params()
        author = params.get("author", "")
        if params.get("q") != "author" or not author:
            return 400, {"status": 400, "message": "q=author and author are required"}, {}
        if not author.startswith("urn:li:organization:") or author not in authors:
            return _denied("FINDER-author")  # a member's posts need restricted scopes
        start, count = int(params.get("start") or 0), min(int(params.get("count") or 10), 100)
        order = "createdAt" if params.get("sortBy") == "CREATED" else "lastModifiedAt"
        found = self._visible(lambda p: p["owner"] == author)
        found.sort(key=lambda p: p[order], reverse=True)
        page = [_public(p) for p in found[start : start + count]]
        links = []
        if start + count < len(found):
            links.append(
                {
                    "rel": "next",
                    "type": "application/json",
                    "href": f"/rest/posts?start={start + count}",
                }
            )
        return (
            200,
            {"paging": {"start": start, "count": count, "links": links}, "elements": page},
            {},
        )

    def _get_post(self, call: Call, urn: str) -> Reply:
        """`GET /rest/posts/{urn}`: a deleted post is 404."""
        authors = self._checked(call)
        if not isinstance(authors, set):
            return authors
        [found] = self._visible(lambda p: p["id"] == urn) or [None]
        if found is None:
            return 404, {"status": 404, "message": f"Not found: {urn}"}, {}
        return 200, _public(found), {}

    def _statistics(self, call: Call) -> Reply:
        """`organizationalEntityShareStatistics?q=organizationalEntity&shares=List(…)`:
        lifetime totals per post; 403 for a token without the scope (`statistics_denied`)."""
        authors = self._checked(call)
        if not isinstance(authors, set):
            return authors
        if self.statistics_denied:
            return _denied("organizationalEntityShareStatistics")
        query = call.query
        found = re.search(r"shares=List\(([^)]*)\)", query)
        urns = [unquote(u) for u in found.group(1).split(",")] if found else []
        posts = {p["id"]: p for p in self._visible(lambda p: p["id"] in urns)}
        elements = [
            {
                "share": urn,
                "organizationalEntity": posts[urn]["owner"],
                "totalShareStatistics": _statistics(posts[urn].get("counts", {})),
            }
            for urn in urns
            if urn in posts
        ]
        return 200, {"elements": elements, "paging": {"count": 10, "start": 0}}, {}


def _statistics(counts: dict[str, int]) -> dict[str, int]:
    return {
        "likeCount": counts.get("likes", 0),
        "shareCount": counts.get("reposts", 0),
        "commentCount": counts.get("replies", 0),
        "impressionCount": counts.get("impressions", 0),
        "clickCount": 0,
        "engagement": 0,
    }


def _public(post: dict[str, Any]) -> dict[str, Any]:
    hidden = {"owner", "mentions", "visible", "at", "counts"}
    return {k: v for k, v in post.items() if k not in hidden}


def main(argv: list[str] | None = None) -> None:
    server.serve_main(FakeLinkedIn, argv, server.arg_parser("Fake LinkedIn Posts API"))


if __name__ == "__main__":
    main()
