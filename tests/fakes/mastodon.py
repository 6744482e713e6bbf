"""A local fake of a Mastodon instance's REST API, served over real HTTP, for the real
`Mastodon.py` client (``Mastodon(api_base_url=fake.url, access_token=TOKEN)``).

It answers as Mastodon does where it matters to Galley (read from Mastodon's source:
`PostStatusService`, `Api::ErrorHandling`, `RateLimitHeaders`): `POST /api/v1/statuses`
honours `Idempotency-Key` per account, looked up before anything is validated (a key
seen before answers its status, whatever the body now says), but remembers a key only
**after** the status is created (for an hour), so two concurrent requests with one key
both post (script `slow` to widen the window); `/api/v2/instance` gives
`configuration.statuses.max_characters`; statuses longer than that (links counted as
23) are a 422; a 429 carries `X-RateLimit-Reset` (an ISO time to the microsecond, Ruby's
`iso8601(6)`), not `Retry-After`; status ids are snowflakes (milliseconds << 16), so a
`since_id` made from a date works. Content comes back as Mastodon renders it (HTML), and
each status records the `@user@host` mentions Mastodon would have notified.

In-process: ``with FakeMastodon() as fake: fake.script("create", accept_then_drop())``.
Separate process (first stdout line is the URL)::

    python -m tests.fakes.mastodon --port 0 --state-file PATH
"""

from __future__ import annotations

import html
import itertools
import re
import time
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import parse_qs, parse_qsl

from tests.fakes import server, social
from tests.fakes.mastodon_media import MastodonMedia, parse_multipart
from tests.fakes.social import Action, Call, Reply, Route

TOKEN = "mastodon-token-galley"
USERNAME = "galley"
ACCOUNT_ID = "109000000000000001"
MAX_CHARACTERS = 500
URL_CHARACTERS = 23
IDEMPOTENCY_SECONDS = 3600
STATUSES_LIMIT = 20  # ids one GET /api/v1/statuses takes
VISIBILITIES = ("public", "unlisted", "private", "direct")
_URL = re.compile(r"https?://[^\s<>\"']+")
# Mastodon's mention: after start or a non-word, non-/ character; @user or @user@host
_MENTION = re.compile(r"(?:^|(?<=[^\w/]))@(\w+)(?:@([\w.-]+\w))?", re.MULTILINE)


def rate_limited(reset_in: int = 300) -> Action:
    """429 as Mastodon answers it: `X-RateLimit-*` headers, the reset as an ISO time."""
    reset = datetime.now(UTC) + timedelta(seconds=reset_in)
    headers = {
        "X-RateLimit-Limit": "300",
        "X-RateLimit-Remaining": "0",
        "X-RateLimit-Reset": reset.isoformat(timespec="microseconds").replace("+00:00", "Z"),
    }
    return social.status(429, {"error": "Too many requests"}, headers)


def _graphemes(text: str) -> int:
    import regex

    return len(regex.findall(r"\X", text))


def _length(text: str) -> int:
    return _graphemes(_URL.sub("x" * URL_CHARACTERS, text))


def _render(text: str) -> str:
    """Text as Mastodon renders `content`: paragraphs, breaks, links with hidden spans."""

    def link(match: re.Match[str]) -> str:
        url = match.group()
        scheme, _, rest = url.partition("://")
        shown, hidden = rest[:30], rest[30:]
        return (
            f'<a href="{html.escape(url)}" target="_blank" rel="nofollow noopener">'
            f'<span class="invisible">{scheme}://</span>'
            f'<span class="{"ellipsis" if hidden else ""}">{html.escape(shown)}</span>'
            f'<span class="invisible">{html.escape(hidden)}</span></a>'
        )

    paragraphs = []
    for paragraph in text.strip().split("\n\n"):
        parts, last = [], 0
        for match in _URL.finditer(paragraph):
            parts.append(html.escape(paragraph[last : match.start()]))
            parts.append(link(match))
            last = match.end()
        parts.append(html.escape(paragraph[last:]))
        paragraphs.append("<p>" + "".join(parts).replace("\n", "<br />") + "</p>")
    return "".join(paragraphs)


class FakeMastodon(MastodonMedia, social.SocialFake):
    """One instance with accounts by token (`accounts`: token -> username)."""

    def __init__(
        self,
        *,
        state_file: server.StrPath | None = None,
        port: int = 0,
        accounts: dict[str, str] | None = None,
        max_characters: int = MAX_CHARACTERS,
        version: str = "4.3.0",
    ) -> None:
        super().__init__(state_file=state_file, port=port)
        self.accounts = dict(accounts or {TOKEN: USERNAME})
        self.max_characters = max_characters
        self.version = version  # before 4.3: no GET /api/v1/statuses?id[]= (404)
        self._keys: dict[tuple[str, str], tuple[str, float]] = {}  # (account, key) -> status
        self._sequence = itertools.count(1)
        self._init_media()

    # --- what tests use ---

    def account_id(self, username: str = USERNAME) -> str:
        names = sorted(self.accounts.values())
        return str(int(ACCOUNT_ID) + names.index(username))

    def statuses_of(self, username: str = USERNAME) -> list[dict[str, Any]]:
        return self.posts_of(self.account_id(username))

    # --- routes ---

    def route(self, method: str, path: str) -> tuple[str, Route] | None:
        path = path.rstrip("/")
        media = self.media_route(method, path)
        if media is not None:
            return media
        if (method, path) == ("GET", "/api/v2/instance"):
            return "instance", self._instance
        if (method, path) == ("GET", "/api/v1/accounts/verify_credentials"):
            return "account", self._verify_credentials
        if (method, path) == ("POST", "/api/v1/statuses"):
            return "create", self._post_status
        if (method, path) == ("GET", "/api/v1/statuses"):
            return "counts", self._statuses
        status = re.fullmatch(r"/api/v1/statuses/(\d+)", path)
        if method == "GET" and status:
            return "status", lambda call: self._status(call, status.group(1))
        match = re.fullmatch(r"/api/v1/accounts/(\d+)/statuses", path)
        if method == "GET" and match:
            return "read", lambda call: self._account_statuses(call, match.group(1))
        return None

    def parse_body(self, raw: bytes, headers: dict[str, str]) -> Any:
        content_type = headers.get("content-type", "")
        if "application/x-www-form-urlencoded" in content_type:
            pairs = parse_qsl(raw.decode("utf-8"), keep_blank_values=True)
            form: dict[str, Any] = {k: v for k, v in pairs if not k.endswith("[]")}
            for key, value in pairs:  # `media_ids[]=1&media_ids[]=2`: a list, as Rails reads it
                if key.endswith("[]"):
                    form.setdefault(key, []).append(value)
            return form
        if content_type.startswith("multipart/form-data"):
            return parse_multipart(raw, content_type)
        return super().parse_body(raw, headers)

    def _account(self, call: Call) -> dict[str, Any] | Reply:
        username = self.accounts.get(call.bearer or "")
        if username is None:
            return 401, {"error": "The access token is invalid"}, {}
        account_id = self.account_id(username)
        return {
            "id": account_id,
            "username": username,
            "acct": username,
            "display_name": username.title(),
            "url": f"{self.url}/@{username}",
            "created_at": "2024-01-01T00:00:00.000Z",
        }

    def _instance(self, call: Call) -> Reply:
        limit = int(self._setting("max_characters", self.max_characters))
        return (
            200,
            {
                "domain": "127.0.0.1",
                "title": "Fake Mastodon",
                "version": self.version,
                "configuration": {
                    "statuses": {
                        "max_characters": limit,
                        "max_media_attachments": 4,
                        "characters_reserved_per_url": URL_CHARACTERS,
                    }
                },
            },
            {},
        )

    def _verify_credentials(self, call: Call) -> Reply:
        account = self._account(call)
        return account if isinstance(account, tuple) else (200, account, {})

    def _post_status(self, call: Call) -> Reply:
        account = self._account(call)
        if isinstance(account, tuple):
            return account
        key = call.headers.get("idempotency-key")
        remembered = self._remembered(account["id"], key)  # before validation, as Mastodon
        if remembered is not None:
            return 200, remembered, {}
        body = call.body if isinstance(call.body, dict) else {}
        text = str(body.get("status", ""))
        visibility = str(body.get("visibility") or "public")
        limit = int(self._setting("max_characters", self.max_characters))
        if not text.strip():
            return 422, {"error": "Validation failed: Text can't be blank"}, {}
        if _length(text) > limit:
            return (
                422,
                {"error": f"Validation failed: Text character limit of {limit} exceeded"},
                {},
            )
        if visibility not in VISIBILITIES:
            return 422, {"error": "Validation failed: Visibility is not included in the list"}, {}
        parent = self._thread_of(body.get("in_reply_to_id"))
        if isinstance(parent, tuple):
            return parent
        media = self.attach(account["id"], [str(i) for i in body.get("media_ids[]", [])])
        if isinstance(media, tuple):
            return media
        call.pause()  # Mastodon's window: the key is looked up here, written after the insert
        attachments = [self._attachment(item) for item in media]
        status = self._create(
            account, text, visibility, held=call.held, parent=parent, media=attachments
        )
        self.hold_media(media, status["id"])
        if key:
            with self._lock:
                self._keys[(account["id"], key)] = (status["id"], time.time())
        return 200, status, {}

    def _thread_of(self, in_reply_to_id: Any) -> dict[str, Any] | Reply | None:
        """The status replied to, as StatusesController#set_thread finds it: absent or
        deleted is `404` in Mastodon's words."""
        if not in_reply_to_id:
            return None
        [found] = self._visible(lambda p: p["id"] == str(in_reply_to_id)) or [None]
        if found is None:
            message = "The post you are trying to reply to does not appear to exist."
            return 404, {"error": message}, {}
        return found

    def _remembered(self, account_id: str, key: str | None) -> dict[str, Any] | None:
        if not key:
            return None
        with self._lock:
            found = self._keys.get((account_id, key))
        if found is None or time.time() - found[1] > IDEMPOTENCY_SECONDS:
            return None
        return self._any(lambda p: p["id"] == found[0])

    def _create(
        self,
        account: dict[str, Any],
        text: str,
        visibility: str,
        *,
        held: bool,
        parent: dict[str, Any] | None = None,
        media: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        now = datetime.now(UTC)
        snowflake = (int(now.timestamp() * 1000) << 16) | (next(self._sequence) & 0xFFFF)
        status_id = str(snowflake)
        mentions = [
            {"username": m.group(1), "acct": m.group(1) + (f"@{m.group(2)}" if m.group(2) else "")}
            for m in _MENTION.finditer(text)
        ]
        status = {
            "id": status_id,
            "account": account,
            "created_at": now.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "content": _render(text),
            "visibility": visibility,
            "url": f"{self.url}/@{account['username']}/{status_id}",
            "uri": f"{self.url}/users/{account['username']}/statuses/{status_id}",
            "reblog": None,
            "in_reply_to_id": None if parent is None else parent["id"],
            "in_reply_to_account_id": None if parent is None else parent["owner"],
            "mentions": mentions,
            "sensitive": False,
            "spoiler_text": "",
            "media_attachments": list(media or []),
            "tags": [],
            "emojis": [],
        }
        return self._add_post({**status, "owner": account["id"], "source_text": text}, held=held)

    def _account_statuses(self, call: Call, account_id: str) -> Reply:
        account = self._account(call)
        if isinstance(account, tuple):
            return account
        params = call.params()
        since_id = int(params.get("since_id") or params.get("min_id") or 0)
        max_id = int(params.get("max_id") or 1 << 80)
        limit = min(int(params.get("limit") or 20), 40)
        found = self._visible(
            lambda p: p["owner"] == account_id and since_id < int(p["id"]) < max_id
        )
        page = sorted(found, key=lambda p: int(p["id"]), reverse=True)[:limit]
        statuses = [_public(p) for p in page]
        headers = {}
        if len(page) == limit:
            base = f"{self.url}/api/v1/accounts/{account_id}/statuses"
            headers["Link"] = f'<{base}?max_id={page[-1]["id"]}&limit={limit}>; rel="next"'
        return 200, statuses, headers

    def _status(self, call: Call, status_id: str) -> Reply:
        """`GET /api/v1/statuses/:id`: a deleted status is `404 Record not found`."""
        account = self._account(call)
        if isinstance(account, tuple):
            return account
        [found] = self._visible(lambda p: p["id"] == status_id) or [None]
        if found is None:
            return 404, {"error": "Record not found"}, {}
        return 200, _public(found), {}

    def _statuses(self, call: Call) -> Reply:
        """`GET /api/v1/statuses?id[]=…` (Mastodon 4.3): the statuses found, at most
        STATUSES_LIMIT ids taken, deleted ones left out."""
        account = self._account(call)
        if isinstance(account, tuple):
            return account
        if _older_than_4_3(self.version):  # the route does not exist there
            return 404, {"error": "Record not found"}, {}
        ids = parse_qs(call.query).get("id[]", [])[:STATUSES_LIMIT]
        found = {p["id"]: p for p in self._visible(lambda p: p["id"] in ids)}
        return 200, [_public(found[i]) for i in ids if i in found], {}


def _older_than_4_3(version: str) -> bool:
    major, minor = (int(n) for n in re.findall(r"\d+", version)[:2])
    return (major, minor) < (4, 3)


def _public(post: dict[str, Any]) -> dict[str, Any]:
    """A stored post as the API shows it: no fake bookkeeping, no source text; its counts
    in Mastodon's own words."""
    hidden = {"owner", "source_text", "visible", "at", "counts"}
    counts = post.get("counts", {})
    return {k: v for k, v in post.items() if k not in hidden} | {
        "favourites_count": counts.get("likes", 0),
        "reblogs_count": counts.get("reposts", 0),
        "replies_count": counts.get("replies", 0),
        "quotes_count": counts.get("quotes", 0),
    }


def main(argv: list[str] | None = None) -> None:
    server.serve_main(FakeMastodon, argv, server.arg_parser("Fake Mastodon instance"))


if __name__ == "__main__":
    main()
