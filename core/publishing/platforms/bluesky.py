"""Bluesky as a destination (`publish = { to = "bluesky", handle = … }`), through `atproto`.

Each publication names its record: the record key is a TID derived from the effect key
(core/identity.py), so every attempt, replica or restored backup names one record, a
second create fails (bsky.social answers a bare 500) and is never retried blindly, and
the look-up is `getRecord` for that key. A thread is one `applyWrites` (docs/design.md §31):
every part under its own derived key, all or none, so the first record's look-up proves
the whole thread. The session is made once and then refreshed:
`createSession` is rate-limited per account, so it is never made per publish.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from typing import Any

import httpx

from core.errors import (
    EffectNotSent,
    EffectOutcomeUnknown,
    LookupUnavailable,
    MissingExtra,
    ReadRefused,
)
from core.http_calls import call_timeout
from core.identity import bluesky_part_record_key, bluesky_record_key
from core.policies import ThreadStyle
from core.ports import (
    Fit,
    ImageBytes,
    PostCounts,
    PostFound,
    PostGone,
    PostQuery,
    PostRead,
    PostUnknown,
    Publication,
    UploadedMedia,
)
from core.publishing.platforms.bluesky_answers import (
    RETRY_LATER,
    Expired,
    create_failed,
    describe,
    sign_in_failed,
    wait_of,
    xrpc_error,
)
from core.publishing.platforms.bluesky_images import external_embed, images_embed, upload_blob
from core.publishing.platforms.bluesky_records import ThreadWrites, link_facets, thread_writes
from core.publishing.platforms.post_text import comparable, graphemes
from core.setup.publish_targets import BlueskyTarget

GRAPHEME_LIMIT = 300
BYTE_LIMIT = 3000
POST_COLLECTION = "app.bsky.feed.post"
CREATE = "com.atproto.repo.createRecord"
APPLY_WRITES = "com.atproto.repo.applyWrites"
POST_URI = re.compile(r"^at://(?P<repo>[^/]+)/app\.bsky\.feed\.post/(?P<rkey>[^/]+)$")
GET_POSTS_LIMIT = 25  # URIs one app.bsky.feed.getPosts takes

log = logging.getLogger(__name__)


class BlueskyPublisher:
    """Posts plain text to one account; shared by every worker of the process."""

    thread_style = ThreadStyle.ONE_CALL  # a thread is one applyWrites: all parts or none

    def __init__(
        self,
        target: BlueskyTarget,
        timeout: timedelta,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.config = target
        self._environ = environ
        self._limits = call_timeout(timeout)
        self._client: Any = None  # atproto_client.Client, made at first use
        self._did: str | None = None  # set once signed in (on_session_change)
        self._lock = threading.Lock()  # one sign-in or refresh at a time
        self._sent = threading.local()  # the XRPC method this thread last sent

    takes_link_cards = True  # a link and no image: its card (docs/design.md §32)

    @property
    def target(self) -> str:
        return self.config.target

    # --- the port ---

    def publish(self, publication: Publication) -> str:
        """One post (createRecord), or a whole thread in one applyWrites: all parts or
        none, each under the record key its part's effect key names."""
        for text in publication.parts:
            too_long = self._too_long(text)
            if too_long:
                raise EffectNotSent(too_long, permanent=True)
        try:
            rkeys = [
                bluesky_part_record_key(publication.effect_key, part)
                for part in range(1, len(publication.parts) + 1)
            ]
        except ValueError as exc:
            raise EffectNotSent(str(exc), permanent=True) from exc
        client, did = self._signed_in()
        from atproto_client import models

        if publication.replies:
            writes = thread_writes(
                models,
                did,
                publication.parts,
                rkeys,
                client.get_current_time_iso(),
                first_embed=_embed_of(models, publication),
            )
            return self._created(client, APPLY_WRITES, lambda: self._apply(client, writes))
        record = models.AppBskyFeedPost.Record(
            text=publication.text,
            created_at=client.get_current_time_iso(),
            facets=link_facets(models, publication.text) or None,
            embed=_embed_of(models, publication),
        )
        return self._created(
            client,
            CREATE,
            lambda: str(client.app.bsky.feed.post.create(did, record, rkey=rkeys[0]).uri),
        )

    def _created(self, client: Any, nsid: str, create: Callable[[], str]) -> str:
        """`create` sent once; once more after a refresh when the token had expired."""
        for first in (True, False):
            self._sent.nsid = None
            try:
                return create()
            except Exception as exc:
                failure = create_failed(exc, self.config, sent=self._sent.nsid == nsid)
                if not isinstance(failure, Expired):
                    raise failure from exc
                if not first:
                    refused = f"Bluesky refused a fresh session for {self.config.handle}"
                    raise EffectNotSent(refused) from exc
            self._refresh(client)  # the PDS's clock says the token expired: refused, not sent
        raise AssertionError("unreachable")

    def _apply(self, client: Any, writes: ThreadWrites) -> str:
        """The thread's applyWrites, sent as the exact bytes its CIDs were computed over.
        The thread is the first record's URI; a CID the PDS computed otherwise is logged
        (the replies' strong references would not resolve)."""
        answer = client.invoke_procedure(
            APPLY_WRITES, content=writes.content(), headers={"Content-Type": "application/json"}
        )
        results = answer.content.get("results") if isinstance(answer.content, dict) else None
        if not isinstance(results, list) or len(results) != len(writes.uris):
            raise EffectOutcomeUnknown(
                f"Bluesky's applyWrites answer could not be read: {results!r}"
            )
        for result, cid in zip(results, writes.cids, strict=True):
            if result.get("cid") != cid:
                log.warning(
                    "Bluesky stored %s as %s, not %s", result.get("uri"), result.get("cid"), cid
                )
        return writes.uris[0]

    def upload_image(self, image: ImageBytes) -> UploadedMedia:
        """One uploadBlob (docs/design.md §32); its receipt is kept by the caller."""
        client, _ = self._signed_in()
        return upload_blob(client, image, xrpc_error)

    def lookup(self, query: PostQuery) -> str | None:
        try:
            client = self._client_or_new()
        except MissingExtra as exc:
            raise LookupUnavailable(str(exc)) from exc
        try:
            rkey = bluesky_record_key(query.effect_key)
        except ValueError as exc:
            raise LookupUnavailable(str(exc)) from exc
        repo = self._did or self.config.handle
        try:
            found = client.app.bsky.feed.post.get(repo, rkey)
        except Exception as exc:
            if xrpc_error(exc)[1] == "RecordNotFound":
                return self._thread_without_its_first(client, repo, query.effect_key, rkey)
            raise LookupUnavailable(f"Bluesky getRecord failed: {describe(exc)}") from exc
        sent = getattr(found.value, "text", None)
        if not isinstance(sent, str) or comparable(sent) != comparable(query.text):
            raise LookupUnavailable(
                f"Bluesky record {found.uri} holds a different post: a person must check"
            )
        return str(found.uri)

    def _thread_without_its_first(
        self, client: Any, repo: str, effect_key: str, rkey: str
    ) -> str | None:
        """The first record absent. A thread is written in one applyWrites, all or none:
        its second record there, replying in the thread rooted at the first, means the
        thread was published and a person deleted its first post since. Found then, under
        the first record's URI (never sent again: the resend would fail on the records
        that exist, uncertain forever; the reading pass finds it gone and tells people)."""
        try:
            second = client.app.bsky.feed.post.get(repo, bluesky_part_record_key(effect_key, 2))
        except ValueError:
            return None
        except Exception as exc:
            if xrpc_error(exc)[1] == "RecordNotFound":
                return None  # no thread there either: absent
            raise LookupUnavailable(f"Bluesky getRecord failed: {describe(exc)}") from exc
        root = getattr(getattr(getattr(second.value, "reply", None), "root", None), "uri", None)
        if not isinstance(root, str) or not root.endswith(f"/{POST_COLLECTION}/{rkey}"):
            return None
        return root

    # --- read back (docs/design.md §28) ---

    counts_per_request = GET_POSTS_LIMIT

    def read_post(self, external_id: str, effect_key: str) -> PostRead:
        """`getRecord` for the post's own key: `RecordNotFound` is gone, anything else
        that is not the record cannot tell."""
        match = POST_URI.match(external_id)
        if match is None:
            return PostUnknown(f"not a post URI: {external_id}")
        try:
            self._client_or_new().app.bsky.feed.post.get(match["repo"], match["rkey"])
        except MissingExtra as exc:
            return PostUnknown(str(exc))
        except Exception as exc:
            status, name, _ = xrpc_error(exc)
            if name == "RecordNotFound" and status is not None:
                return PostGone(status, name)
            wait = wait_of(exc) if status in RETRY_LATER else None
            return PostUnknown(f"Bluesky getRecord failed: {describe(exc)}", wait)
        return PostFound()

    def read_counts(self, external_ids: Sequence[str]) -> dict[str, PostCounts]:
        """One `getPosts` for up to 25 URIs; a post the AppView does not return (deleted,
        not indexed yet) is missing from the answer."""
        try:
            client, _ = self._signed_in()
            answer = client.app.bsky.feed.get_posts({"uris": list(external_ids)})
        except Exception as exc:
            status, _, _ = xrpc_error(exc)
            wait = wait_of(exc) if status in RETRY_LATER else None
            raise ReadRefused(f"Bluesky getPosts failed: {describe(exc)}", wait) from exc
        return {
            str(post.uri): PostCounts(
                likes=post.like_count or 0,
                reposts=post.repost_count or 0,
                replies=post.reply_count or 0,
                quotes=post.quote_count or 0,
            )
            for post in answer.posts
        }

    def link(self, external_id: str) -> str | None:
        match = POST_URI.match(external_id)
        if match is None:
            return None
        return f"https://bsky.app/profile/{self.config.handle}/post/{match['rkey']}"

    def fit(self, text: str) -> Fit:
        return Fit(self.target, "Bluesky", graphemes(text), GRAPHEME_LIMIT)

    def close(self) -> None:
        if self._client is not None:
            self._client.request.close()

    def prove_credentials(self) -> str:
        """Sign in (`createSession`) without posting: the app password works here."""
        _, did = self._signed_in()
        return f"signed in as {self.config.handle} ({did})"

    # --- session ---

    def _client_or_new(self) -> Any:
        with self._lock:
            if self._client is None:
                self._client = self._new_client()
            return self._client

    def _new_client(self) -> Any:
        try:
            from atproto_client import Client
            from atproto_client.request import Request
        except ImportError:
            raise MissingExtra("atproto", self.target) from None
        sent = self._sent

        class TracedRequest(Request):  # type: ignore[misc]
            """Remembers which XRPC method a thread sent last, so a failure can tell a
            refused refresh from a create that may have happened."""

            def get(self, *args: Any, **kwargs: Any) -> Any:
                sent.nsid = str(kwargs.get("url", "")).rsplit("/", 1)[-1]
                return super().get(*args, **kwargs)

            def post(self, *args: Any, **kwargs: Any) -> Any:
                sent.nsid = str(kwargs.get("url", "")).rsplit("/", 1)[-1]
                return super().post(*args, **kwargs)

        timeout = httpx.Timeout(self._limits.phase, connect=self._limits.connect)
        client = Client(base_url=self.config.service, request=TracedRequest(timeout=timeout))
        client.on_session_change(self._on_session)
        return client

    def _on_session(self, event: Any, session: Any) -> None:
        self._did = str(session.did)

    def _signed_in(self) -> tuple[Any, str]:
        """The client with a session: made once (createSession), then reused."""
        client = self._client_or_new()
        with self._lock:
            if self._did is None:
                self._sign_in(client)
            assert self._did is not None
            return client, self._did

    def _sign_in(self, client: Any) -> None:
        password = self.config.secret(self._environ)
        try:
            client.login(login=self.config.handle, password=password, fetch_bsky_profile=False)
        except Exception as exc:
            raise sign_in_failed(exc, self.config) from exc

    def _refresh(self, client: Any) -> None:
        """A new access token from the refresh token; a sign-in only when that one died too."""
        with self._lock:
            try:
                # the client's own refresh (it calls it itself 15 minutes before expiry)
                client._refresh_and_set_session()
            except Exception:
                self._did = None
                self._sign_in(client)

    def _too_long(self, text: str) -> str | None:
        count, size = graphemes(text), len(text.encode("utf-8"))
        if count > GRAPHEME_LIMIT or size > BYTE_LIMIT:
            return (
                f"Bluesky takes {GRAPHEME_LIMIT} graphemes ({BYTE_LIMIT} bytes); "
                f"this draft has {count} ({size} bytes)"
            )
        return None


def _embed_of(models: Any, publication: Publication) -> Any:
    """The post's images, else its link's card, else nothing (docs/design.md §32)."""
    if publication.media:
        return images_embed(models, publication.media)
    card = publication.card
    if card is not None and not card.missing:
        return external_embed(models, card)
    return None
