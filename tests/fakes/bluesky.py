"""A local fake of a Bluesky PDS's XRPC API, served over real HTTP, for the real `atproto`
client (``Client(base_url=fake.url)``).

It answers as bsky.social does where it matters to Galley: a second `createRecord` with a
record key that exists is a bare ``500 {"error": "InternalServerError"}`` (the named
`RecordAlreadyExists` is not released upstream); `getRecord` for a missing key is ``400
RecordNotFound``, for a repository it does not host ``502 UpstreamFailure``; a request
without a token is ``401 AuthMissing``, with a token it did not issue ``400 InvalidToken``;
text over 300 graphemes is ``400 InvalidRequest`` in the lexicon's words; access tokens
are HS256 JWTs; `createSession` is rate-limited per account (`session_limit`); access
tokens expire (`access_seconds`, or `expire_sessions()` at once) and are refreshed with
`refreshSession`: a refresh token used once still answers for a grace period, with the
same next refresh token. Posts are counted per account (DID). `applyWrites` (creates) is
atomic: one refused write and nothing is written; records are named by their real CIDs
(dag-cbor, sha-256), so a client's strong references can be checked against them. The
answers it shares with the reference `@atproto/pds` (0.6.x, through `@atproto/dev-env`
0.6.7) are checked against it, request for request, in
tests/publishing/test_real_pds_contract.py.

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
MAX_IMAGES = 4
BARE_500 = {"error": "InternalServerError", "message": "Internal Server Error"}
UNVERIFIED = {"error": "InvalidToken", "message": "Token could not be verified"}
REVOKED = {"error": "ExpiredToken", "message": "Token has been revoked"}
REFRESH_GRACE = 2 * 3600.0  # a used refresh token answers this long (the PDS's own grace)
MAX_WRITES = 200  # writes one applyWrites takes
CREATE_WRITE = "com.atproto.repo.applyWrites#create"
CREATE_RESULT = "com.atproto.repo.applyWrites#createResult"


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


def _token_type(token: str) -> str | None:
    """The `typ` of a JWT's header, or None if it is not one."""
    try:
        head = token.split(".")[0]
        return str(json.loads(base64.urlsafe_b64decode(head + "=" * (-len(head) % 4)))["typ"])
    except (ValueError, KeyError, TypeError):
        return None


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
        # refresh token -> (did, the next refresh token once used, used until)
        self._refresh: dict[str, tuple[str, str | None, float]] = {}
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
            ("POST", "com.atproto.repo.applyWrites"): ("create", self._apply_writes),
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

    def _issue(self, handle: str, refresh: str | None = None) -> dict[str, Any]:
        """A new session; with `refresh`, that refresh token (a used one's next) kept."""
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
        refresh = refresh or _jwt(
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
            self._refresh.setdefault(refresh, (did, None, now + 60 * 86400))
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
        """Rotate the refresh token; one already rotated answers, within the grace period,
        with the same next refresh token (a second replica's refresh is not refused)."""
        token = call.bearer or ""
        if _token_type(token) != "refresh+jwt":
            return 400, dict(UNVERIFIED), {}
        now = time.time()
        with self._lock:
            found = self._refresh.get(token)
            if found is None or found[2] <= now:
                return 400, dict(REVOKED), {}
            did, following, _ = found
        handle = self._handle_of(did)
        assert handle is not None
        session = self._issue(handle, refresh=following)
        with self._lock:
            self._refresh[token] = (did, session["refreshJwt"], min(found[2], now + REFRESH_GRACE))
        return 200, session, {}

    def _authorised(self, call: Call) -> str | Reply:
        """The caller's DID, or the error reply a PDS gives."""
        token = call.bearer
        if token is None:
            return 401, {"error": "AuthMissing", "message": "Authentication Required"}, {}
        with self._lock:
            found = self._access.get(token)
        if found is None:  # not signed by this server: the PDS cannot verify it
            return 400, dict(UNVERIFIED), {}
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
        if handle is None:
            return 403, {"error": "AccountNotFound", "message": "Account not found"}, {}
        if did_of(handle) != who:
            message = "Authentication Required"
            return 401, {"error": "AuthenticationRequired", "message": message}, {}
        rkey = body.get("rkey") or _tid_now()
        refused = _refusal(body.get("collection"), body.get("record"), rkey, "$.record")
        if refused is None:
            refused = self._embed_refused(body["record"].get("embed"))
        if refused is not None:
            return refused
        call.pause()
        with self._lock:  # one repo commit at a time: the key check and the write are atomic
            if self._taken(who, [rkey]):
                return 500, dict(BARE_500), {}
            post = self._store(who, handle, rkey, body["record"], held=call.held)
        commit = {"cid": post["cid"], "rev": _tid_now()}
        answer = {"uri": post["uri"], "cid": post["cid"], "commit": commit}
        return 200, answer | {"validationStatus": "valid"}, {}

    def _apply_writes(self, call: Call) -> Reply:
        """`com.atproto.repo.applyWrites`, creates only, atomic as the reference PDS's
        (`@atproto/pds` api/com/atproto/repo/applyWrites.ts): every write is validated
        first (a record the lexicon refuses is `400 InvalidRequest` naming
        `$.writes[i]`), then one commit writes them all; a record key that exists fails
        the commit in the repository's MST, which the PDS answers as a bare 500. Either
        way nothing is written."""
        who = self._authorised(call)
        if not isinstance(who, str):
            return who
        body = call.body if isinstance(call.body, dict) else {}
        handle = self._handle_of(str(body.get("repo", "")))
        if handle is None or did_of(handle) != who:
            return (
                401,
                {"error": "AuthenticationRequired", "message": "Authentication Required"},
                {},
            )
        writes = body.get("writes")
        if not isinstance(writes, list) or not writes:
            return 400, {"error": "InvalidRequest", "message": "Input/writes is required"}, {}
        if len(writes) > MAX_WRITES:
            message = f"Too many writes. Max: {MAX_WRITES}"
            return 400, {"error": "InvalidRequest", "message": message}, {}
        creates: list[tuple[str, dict[str, Any]]] = []
        for i, write in enumerate(writes):
            if not isinstance(write, dict) or write.get("$type") != CREATE_WRITE:
                kind = write.get("$type") if isinstance(write, dict) else write
                return (
                    400,
                    {"error": "InvalidRequest", "message": f"Action not supported: {kind}"},
                    {},
                )
            rkey = write.get("rkey") or _tid_now()
            at = f"$.writes[{i}].value"
            refused = _refusal(write.get("collection"), write.get("value"), rkey, at)
            if refused is None:
                refused = self._embed_refused(write["value"].get("embed"))
            if refused is not None:
                return refused
            creates.append((str(rkey), write["value"]))
        call.pause()
        with self._lock:  # one commit: every key checked, then every record written
            rkeys = [rkey for rkey, _ in creates]
            if self._taken(who, rkeys) or len(set(rkeys)) != len(rkeys):
                return 500, dict(BARE_500), {}
            posts = [self._store(who, handle, k, record, held=call.held) for k, record in creates]
        results = [
            {"$type": CREATE_RESULT, "uri": p["uri"], "cid": p["cid"], "validationStatus": "valid"}
            for p in posts
        ]
        return 200, {"commit": {"cid": posts[-1]["cid"], "rev": _tid_now()}, "results": results}, {}

    def _taken(self, who: str, rkeys: list[str]) -> bool:
        return self._any(lambda p: p["owner"] == who and p["rkey"] in rkeys) is not None

    def _store(
        self, who: str, handle: str, rkey: str, record: dict[str, Any], *, held: bool
    ) -> dict[str, Any]:
        """One record written (under the lock), with the CID a PDS gives it."""
        facets = record.get("facets") or []
        mentions = [
            feature
            for facet in facets
            for feature in facet.get("features", [])
            if feature.get("$type") == MENTION_TYPE
        ]
        post = {
            "owner": who,
            "handle": handle,
            "rkey": rkey,
            "uri": f"at://{who}/{POST_COLLECTION}/{rkey}",
            "cid": record_cid(record),
            "record": record,
            "text": record["text"],
            "mentions": mentions,
        }
        return self._add_post(post, held=held)

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
        """A post's images as the PDS validates them: at most 4, each a blob it holds
        under the type and size the reference names. The reference PDS (0.5.35) does
        not hold a blob to the lexicon's `maxSize` when a record names it."""
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
        """A blob a record names as the PDS's `verifyBlobAndMakePermanent` checks it:
        one it holds (`BlobNotFound`), with the stored type (`InvalidMimeType`) and
        size (`InvalidSize`)."""
        cid = str((ref.get("ref") or {}).get("$link", ""))
        with self._lock:
            blob = self.blobs.get(cid)
        if blob is None:
            missing = f"Could not find blob: {cid}"
            return 400, {"error": "BlobNotFound", "message": missing}, {}
        if ref.get("mimeType") != blob["mimeType"]:
            message = (
                "Referenced Mimetype does not match stored blob. "
                f"Expected: {blob['mimeType']}, Got: {ref.get('mimeType')}"
            )
            return 400, {"error": "InvalidMimeType", "message": message}, {}
        if ref.get("size") != blob["size"]:
            message = (
                "Referenced Size does not match stored blob. "
                f"Expected: {blob['size']}, Got: {ref.get('size')}"
            )
            return 400, {"error": "InvalidSize", "message": message}, {}
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


def record_cid(record: dict[str, Any]) -> str:
    """What a PDS names a record by: CIDv1 (0x01), dag-cbor (0x71), sha2-256 (0x12, 32
    bytes) of the record's DAG-CBOR encoding, base32 lower-case with the `b` prefix."""
    import libipld

    digest = hashlib.sha256(libipld.encode_dag_cbor(record)).digest()
    raw = bytes([0x01, 0x71, 0x12, 0x20]) + digest
    return "b" + base64.b32encode(raw).decode().lower().rstrip("=")


def _refusal(collection: Any, record: Any, rkey: Any, at: str) -> Reply | None:
    """Why a PDS refuses one record before any write: the lexicon's own words, as the
    reference PDS says them (prefixed with the record type)."""
    if collection != POST_COLLECTION:
        return 400, {"error": "InvalidRequest", "message": "Unsupported collection"}, {}
    if not isinstance(record, dict) or not isinstance(record.get("text"), str):
        return 400, {"error": "InvalidRequest", "message": "Record/text is required"}, {}
    text = record["text"]
    invalid = f"Invalid {POST_COLLECTION} record: "
    count = _graphemes(text)
    if count > MAX_GRAPHEMES:
        message = f"grapheme too big (maximum {MAX_GRAPHEMES}, got {count}) at {at}.text"
        return 400, {"error": "InvalidRequest", "message": invalid + message}, {}
    if len(text.encode()) > MAX_BYTES:
        message = f"string too long (maximum {MAX_BYTES}) at {at}.text"
        return 400, {"error": "InvalidRequest", "message": invalid + message}, {}
    if not TID_PATTERN.match(str(rkey)):
        got = json.dumps(rkey)
        message = f"Invalid record key for {POST_COLLECTION}: Invalid TID string (got {got}) at $"
        return 400, {"error": "InvalidRequest", "message": message}, {}
    return None


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
