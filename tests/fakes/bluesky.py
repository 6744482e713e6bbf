"""A local fake of a Bluesky PDS's XRPC API, served over real HTTP, for the real `atproto`
client (``Client(base_url=fake.url)``).

It answers as bsky.social does where it matters to Galley: a second `createRecord` with a
record key that exists is a bare ``500 {"error": "InternalServerError"}`` (the named
`RecordAlreadyExists` is not released upstream); `getRecord` for a missing key is ``400
RecordNotFound``, for a repository it does not host ``502 UpstreamFailure``; a request
without a token is ``401 AuthMissing``; text over 300 graphemes is ``400 InvalidRequest``
in the lexicon's words; access tokens are HS256 JWTs (as the reference `@atproto/pds`
0.5.35 answers); `createSession` is rate-limited per account (`session_limit`); access
tokens expire (`access_seconds`, or `expire_sessions()` at once) and are refreshed with
`refreshSession`, whose refresh token is single-use. Posts are counted per account (DID).

In-process: ``with FakeBluesky() as fake: fake.script("create", accept_then_drop())``.
Separate process (first stdout line is the URL)::

    python -m tests.fakes.bluesky --port 0 --state-file PATH
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import json
import re
import time
from typing import Any
from urllib.parse import parse_qs

from tests.fakes import server, social
from tests.fakes.social import Action, Call, Reply, Route

HANDLE = "acme.bsky.social"
PASSWORD = "app-pass-1234"
POST_COLLECTION = "app.bsky.feed.post"
TID_PATTERN = re.compile(r"^[234567abcdefghij][234567abcdefghijklmnopqrstuvwxyz]{12}$")
TID_ALPHABET = "234567abcdefghijklmnopqrstuvwxyz"
MAX_GRAPHEMES = 300
MAX_BYTES = 3000
GET_POSTS_LIMIT = 25
MENTION_TYPE = "app.bsky.richtext.facet#mention"
IMAGES_EMBED = "app.bsky.embed.images"
EXTERNAL_EMBED = "app.bsky.embed.external"
UPLOAD_LIMIT = 5 * 1024 * 1024  # the reference PDS's default blobUploadLimit (5mb)
IMAGE_MAX_SIZE = 1_000_000  # app.bsky.embed.images#image: blob maxSize
MAX_IMAGES = 4
BARE_500 = {"error": "InternalServerError", "message": "Internal Server Error"}


def rate_limited(reset_in: int = 300) -> Action:
    """429 as a PDS answers it: `ratelimit-*` headers, the window's reset as epoch seconds."""
    reset = int(time.time()) + reset_in
    headers = {
        "ratelimit-limit": "30",
        "ratelimit-remaining": "0",
        "ratelimit-reset": str(reset),
        "ratelimit-policy": "30;w=300",
    }
    body = {"error": "RateLimitExceeded", "message": "Rate Limit Exceeded"}
    return social.status(429, body, headers)


def did_of(handle: str) -> str:
    return "did:plc:" + hashlib.sha256(handle.encode()).hexdigest()[:24]


def _jwt(payload: dict[str, Any], kind: str = "at+jwt") -> str:
    """A session token as the reference PDS signs it: HS256 with its own secret."""

    def part(data: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()

    return f"{part({'typ': kind, 'alg': 'HS256'})}.{part(payload)}.c2ln"


def _tid_now() -> str:
    value = (time.time_ns() // 1000) << 10
    return "".join(TID_ALPHABET[(value >> (5 * i)) & 31] for i in reversed(range(13)))


def _blob_cid(digest: bytes) -> str:
    """A blob's CID as the PDS makes it: CIDv1, raw codec, sha2-256, base32 (`bafkrei…`)."""
    raw = bytes([0x01, 0x55, 0x12, 0x20]) + digest
    return "b" + base64.b32encode(raw).decode().lower().rstrip("=")


def _graphemes(text: str) -> int:
    import regex

    return len(regex.findall(r"\X", text))


class FakeBluesky(social.SocialFake):
    """One PDS with one account per handle (`accounts`: handle -> app password)."""

    def __init__(
        self,
        *,
        state_file: server.StrPath | None = None,
        port: int = 0,
        accounts: dict[str, str] | None = None,
        access_seconds: float = 7200.0,
        session_limit: int = 30,
    ) -> None:
        super().__init__(state_file=state_file, port=port)
        self.accounts = dict(accounts or {HANDLE: PASSWORD})
        self.access_seconds = access_seconds
        self.session_limit = session_limit
        self._access: dict[str, tuple[str, float]] = {}  # token -> (did, expires at)
        self._refresh: dict[str, str] = {}  # token -> did; used once
        self._sessions_made: dict[str, int] = {}
        self._serial = itertools.count(1)
        self.blobs: dict[str, dict[str, Any]] = {}  # cid -> {"mimeType", "size"}
        self.upload_limit = UPLOAD_LIMIT

    # --- what tests use ---

    def sessions_created(self) -> int:
        return len(self.requests_to("com.atproto.server.createSession", "POST"))

    def sessions_refreshed(self) -> int:
        return len(self.requests_to("com.atproto.server.refreshSession", "POST"))

    def expire_sessions(self) -> None:
        """Every access token issued so far expires now (the server's clock says so)."""
        with self._lock:
            self._access = {token: (did, 0.0) for token, (did, _) in self._access.items()}

    def record(self, handle: str, rkey: str) -> dict[str, Any] | None:
        """The post stored under `rkey`, visible or held."""
        did = did_of(handle)
        return self._any(lambda p: p["owner"] == did and p["rkey"] == rkey)

    # --- routes ---

    def route(self, method: str, path: str) -> tuple[str, Route] | None:
        nsid = path.removeprefix("/xrpc/")
        table: dict[tuple[str, str], tuple[str, Route]] = {
            ("POST", "com.atproto.server.createSession"): ("session", self._create_session),
            ("POST", "com.atproto.server.refreshSession"): ("session", self._refresh_session),
            ("POST", "com.atproto.repo.createRecord"): ("create", self._create_record),
            ("POST", "com.atproto.repo.uploadBlob"): ("upload", self._upload_blob),
            ("GET", "com.atproto.repo.getRecord"): ("read", self._get_record),
            ("GET", "app.bsky.feed.getPosts"): ("counts", self._get_posts),
        }
        return table.get((method, nsid))

    def uploads(self) -> int:
        """uploadBlob requests that reached the PDS (answered or not)."""
        return len(self.requests_to("com.atproto.repo.uploadBlob", "POST"))

    def parse_body(self, raw: bytes, headers: dict[str, str]) -> Any:
        """A blob is kept by its content address; the request log keeps its size and hash."""
        if headers.get("content-type", "").startswith("application/json"):
            return super().parse_body(raw, headers)
        digest = hashlib.sha256(raw).hexdigest()
        return {"blob_size": len(raw), "blob_sha256": digest}

    def error_body(self, code: int, message: str | None = None) -> Any:
        if code == 500:
            return dict(BARE_500)
        names = {400: "InvalidRequest", 401: "AuthenticationRequired", 429: "RateLimitExceeded"}
        name = names.get(code, "InternalServerError" if code >= 500 else "InvalidRequest")
        return {"error": name, "message": message or f"fake {code}"}

    def _issue(self, handle: str) -> dict[str, Any]:
        did = did_of(handle)
        now = time.time()
        serial = next(self._serial)
        access = _jwt(
            {
                "scope": "com.atproto.appPass",
                "sub": did,
                "iat": int(now),
                "exp": int(now + self.access_seconds),
                "jti": f"a{serial}",
            }
        )
        refresh = _jwt(
            {
                "scope": "com.atproto.refresh",
                "sub": did,
                "iat": int(now),
                "exp": int(now + 60 * 86400),
                "jti": f"r{serial}",
            },
            kind="refresh+jwt",
        )
        with self._lock:
            self._access[access] = (did, now + self.access_seconds)
            self._refresh[refresh] = did
        return {
            "accessJwt": access,
            "refreshJwt": refresh,
            "handle": handle,
            "did": did,
            "active": True,
        }

    def _handle_of(self, repo: str) -> str | None:
        for handle in self.accounts:
            if repo in (handle, did_of(handle)):
                return handle
        return None

    def _create_session(self, call: Call) -> Reply:
        body = call.body if isinstance(call.body, dict) else {}
        handle = self._handle_of(str(body.get("identifier", "")))
        if handle is None or self.accounts[handle] != body.get("password"):
            message = "Invalid identifier or password"
            return 401, {"error": "AuthenticationRequired", "message": message}, {}
        with self._lock:
            made = self._sessions_made.get(handle, 0) + 1
            self._sessions_made[handle] = made
        if made > self.session_limit:  # per account: 30 per 5 minutes on bsky.social
            _, reply_body, headers = _status_reply(rate_limited())
            return 429, reply_body, headers
        return 200, self._issue(handle), {}

    def _refresh_session(self, call: Call) -> Reply:
        token = call.bearer or ""
        with self._lock:
            did = self._refresh.pop(token, None)
        if did is None:
            return 400, {"error": "ExpiredToken", "message": "Token has been revoked"}, {}
        handle = self._handle_of(did)
        assert handle is not None
        return 200, self._issue(handle), {}

    def _authorised(self, call: Call) -> str | Reply:
        """The caller's DID, or the error reply a PDS gives."""
        token = call.bearer
        if token is None:
            return 401, {"error": "AuthMissing", "message": "Authentication Required"}, {}
        with self._lock:
            found = self._access.get(token)
        if found is None:
            return 401, {"error": "InvalidToken", "message": "Bad token scope"}, {}
        did, expires = found
        if expires <= time.time():
            return 400, {"error": "ExpiredToken", "message": "Token has expired"}, {}
        return did

    def _create_record(self, call: Call) -> Reply:
        who = self._authorised(call)
        if not isinstance(who, str):
            return who
        body = call.body if isinstance(call.body, dict) else {}
        handle = self._handle_of(str(body.get("repo", "")))
        if handle is None or did_of(handle) != who:
            return 400, {"error": "InvalidRequest", "message": "Input/repo must be yours"}, {}
        if body.get("collection") != POST_COLLECTION:
            return 400, {"error": "InvalidRequest", "message": "Unsupported collection"}, {}
        record = body.get("record")
        if not isinstance(record, dict) or not isinstance(record.get("text"), str):
            return 400, {"error": "InvalidRequest", "message": "Record/text is required"}, {}
        text = record["text"]
        if _graphemes(text) > MAX_GRAPHEMES:  # the lexicon's own words, as the PDS says them
            count = _graphemes(text)
            message = f"grapheme too big (maximum {MAX_GRAPHEMES}, got {count}) at $.record.text"
            return 400, {"error": "InvalidRequest", "message": message}, {}
        if len(text.encode()) > MAX_BYTES:
            message = f"string too long (maximum {MAX_BYTES}) at $.record.text"
            return 400, {"error": "InvalidRequest", "message": message}, {}
        refused = self._embed_refused(record.get("embed"))
        if refused is not None:
            return refused
        rkey = body.get("rkey") or _tid_now()
        if not TID_PATTERN.match(str(rkey)):
            return 400, {"error": "InvalidRequest", "message": "Invalid record key"}, {}
        call.pause()
        uri = f"at://{who}/{POST_COLLECTION}/{rkey}"
        with self._lock:  # one repo commit at a time: the key check and the write are atomic
            if self._any(lambda p: p["owner"] == who and p["rkey"] == rkey) is not None:
                return 500, dict(BARE_500), {}
            facets = record.get("facets") or []
            mentions = [
                feature
                for facet in facets
                for feature in facet.get("features", [])
                if feature.get("$type") == MENTION_TYPE
            ]
            cid = "bafyrei" + hashlib.sha256(json.dumps(record).encode()).hexdigest()[:40]
            post = {
                "owner": who,
                "handle": handle,
                "rkey": rkey,
                "uri": uri,
                "cid": cid,
                "record": record,
                "text": text,
                "mentions": mentions,
            }
            self._add_post(post, held=call.held)
        commit = {"cid": cid, "rev": _tid_now()}
        return 200, {"uri": uri, "cid": cid, "commit": commit, "validationStatus": "valid"}, {}

    def _upload_blob(self, call: Call) -> Reply:
        """`com.atproto.repo.uploadBlob`: the blob kept (untethered) under a CID of its
        content, so the same bytes are the same blob; over the PDS's upload limit it is
        `413 PayloadTooLarge`. The lexicon's per-image limits are checked when a record
        references the blob, as the PDS does."""
        who = self._authorised(call)
        if not isinstance(who, str):
            return who
        body = call.body if isinstance(call.body, dict) else {}
        size = int(body.get("blob_size", 0))
        if size > self.upload_limit:
            return 413, {"error": "PayloadTooLarge", "message": "request entity too large"}, {}
        cid = _blob_cid(bytes.fromhex(str(body.get("blob_sha256", ""))))
        mime = call.headers.get("content-type", "application/octet-stream")
        with self._lock:
            self.blobs[cid] = {"mimeType": mime, "size": size}
        blob = {"$type": "blob", "ref": {"$link": cid}, "mimeType": mime, "size": size}
        return 200, {"blob": blob}, {}

    def _embed_refused(self, embed: Any) -> Reply | None:
        """A post's images as the PDS validates them: at most 4, each a blob it holds,
        each within the lexicon's maxSize (`BlobTooLarge`)."""
        if isinstance(embed, dict) and embed.get("$type") == EXTERNAL_EMBED:
            thumb = (embed.get("external") or {}).get("thumb")
            return None if thumb is None else self._blob_refused(thumb)
        if not isinstance(embed, dict) or embed.get("$type") != IMAGES_EMBED:
            return None
        images = embed.get("images") or []
        if len(images) > MAX_IMAGES:
            message = f"Array is too long (maximum {MAX_IMAGES}) at $.record.embed.images"
            return 400, {"error": "InvalidRequest", "message": message}, {}
        for image in images:
            refused = self._blob_refused(image.get("image") or {})
            if refused is not None:
                return refused
        return None

    def _blob_refused(self, ref: dict[str, Any]) -> Reply | None:
        """A blob a record names: one the PDS holds, within the lexicon's maxSize."""
        cid = str((ref.get("ref") or {}).get("$link", ""))
        with self._lock:
            blob = self.blobs.get(cid)
        if blob is None:
            missing = f"Could not find blob: {cid}"
            return 400, {"error": "InvalidRequest", "message": missing}, {}
        if blob["size"] > IMAGE_MAX_SIZE:
            message = (
                f"This file is too large. It is {blob['size']} bytes but the maximum "
                f"size is {IMAGE_MAX_SIZE} bytes."
            )
            return 400, {"error": "BlobTooLarge", "message": message}, {}
        return None

    def _get_record(self, call: Call) -> Reply:
        params = call.params()
        handle = self._handle_of(params.get("repo", ""))
        if handle is None:  # the PDS asks the AppView for a repo it does not host
            message = f"Could not find repo: {params.get('repo')}"
            return 502, {"error": "UpstreamFailure", "message": message}, {}
        did, rkey = did_of(handle), params.get("rkey", "")
        uri = f"at://{did}/{params.get('collection')}/{rkey}"
        [found] = self._visible(lambda p: p["owner"] == did and p["rkey"] == rkey) or [None]
        if found is None or params.get("collection") != POST_COLLECTION:
            message = f"Could not locate record: {uri}"
            return 400, {"error": "RecordNotFound", "message": message}, {}
        return 200, {"uri": found["uri"], "cid": found["cid"], "value": found["record"]}, {}

    def _get_posts(self, call: Call) -> Reply:
        """`app.bsky.feed.getPosts` as the AppView answers it through the PDS: at most 25
        `uris`, the posts it knows as PostViews with their counts, missing ones left out."""
        who = self._authorised(call)
        if not isinstance(who, str):
            return who
        uris = parse_qs(call.query).get("uris", [])
        if len(uris) > GET_POSTS_LIMIT:
            message = f"uris must not have more than {GET_POSTS_LIMIT} elements"
            return 400, {"error": "InvalidRequest", "message": message}, {}
        posts = {p["uri"]: p for p in self._visible(lambda p: p["uri"] in uris)}
        return 200, {"posts": [_post_view(posts[u]) for u in uris if u in posts]}, {}


def _post_view(post: dict[str, Any]) -> dict[str, Any]:
    counts = post.get("counts", {})
    return {
        "uri": post["uri"],
        "cid": post["cid"],
        "author": {"did": post["owner"], "handle": post["handle"]},
        "record": post["record"],
        "indexedAt": "2026-11-23T09:00:00.000Z",
        "likeCount": counts.get("likes", 0),
        "repostCount": counts.get("reposts", 0),
        "replyCount": counts.get("replies", 0),
        "quoteCount": counts.get("quotes", 0),
    }


def _status_reply(action: Action) -> Reply:
    return action.code, action.body, dict(action.headers)


def main(argv: list[str] | None = None) -> None:
    parser = server.arg_parser("Fake Bluesky PDS")
    server.serve_main(FakeBluesky, argv, parser)


if __name__ == "__main__":
    main()
