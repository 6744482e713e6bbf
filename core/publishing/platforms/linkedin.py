"""LinkedIn as a destination (`publish = { to = "linkedin", author = … }`): the Posts API
over `httpx`, one `POST {api}posts` per publish.

LinkedIn has no idempotency key. A repeat of an author's text is refused with `422
DUPLICATE_POST`, naming the existing post, which may be last week's: never taken as
ours (an organization's send is refused, a member's is uncertain). An organization's posts
can be listed, so the look-up reads them since the receipt's first send and matches the
text; a member's cannot be read back, so after an unknown answer the look-up says it
cannot tell and a person decides (docs/design.md §9 and §24).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any
from urllib.parse import quote

import httpx

from core.errors import (
    EffectNotSent,
    EffectOutcomeUnknown,
    LookupUnavailable,
    MissingSecret,
    ReadRefused,
)
from core.http_calls import never_sent, retry_after_seconds
from core.ports import (
    Fit,
    ImageBytes,
    PostCounts,
    PostQuery,
    PostRead,
    PostUnknown,
    Publication,
    UploadedMedia,
)
from core.publishing.platforms.http_publisher import HttpPublisher
from core.publishing.platforms.linkedin_images import media_content, upload_image
from core.publishing.platforms.post_text import (
    comparable,
    linkedin_commentary,
    linkedin_length,
    linkedin_plain,
)
from core.publishing.platforms.read_back import read_back
from core.setup.publish_targets import LinkedInTarget

CHARACTER_LIMIT = 3000
PAGE = 50
MAX_PAGES = 20  # a look-up reads at most 1,000 posts, then says it cannot tell
POST_URN = re.compile(r"urn:li:(?:share|ugcPost):\d+")
RETRY_LATER = frozenset({429, 503})
PERMANENT = frozenset({400, 404, 410, 413, 422, 426})
MEMBER_UNREADABLE = "LinkedIn cannot read back a member's posts; a person must check"
_CANNOT_SEND = (httpx.UnsupportedProtocol, httpx.LocalProtocolError, httpx.InvalidURL)
STATISTICS_PER_REQUEST = 20  # posts asked of organizationalEntityShareStatistics at once
STATISTICS_SCOPE = "rw_organization_admin"  # the Community Management API's statistics


class LinkedInPublisher(HttpPublisher[LinkedInTarget]):
    """Posts plain text as one author (an organization page or a member)."""

    # --- the port ---

    def publish(self, publication: Publication) -> str:
        count = linkedin_length(publication.text)
        if count > CHARACTER_LIMIT:
            refused = f"LinkedIn takes {CHARACTER_LIMIT:,} characters; this draft has {count:,}"
            raise EffectNotSent(refused, permanent=True)
        body = {
            "author": self.config.author,
            "commentary": linkedin_commentary(publication.text),
            "visibility": "PUBLIC",
            "distribution": {
                "feedDistribution": "MAIN_FEED",
                "targetEntities": [],
                "thirdPartyDistributionChannels": [],
            },
            "lifecycleState": "PUBLISHED",
            "isReshareDisabledByAuthor": False,
        }
        if publication.media:  # one image: the review refused more (docs/design.md §32)
            body["content"] = media_content(publication.media[0].media_id, publication.media[0].alt)
        try:
            response = self._client.post(
                self.config.api + "posts",
                json=body,
                headers=self._headers(),
                timeout=self._timeout,
                follow_redirects=False,
            )
        except _CANNOT_SEND as exc:
            raise EffectNotSent(f"LinkedIn request invalid: {exc}", permanent=True) from exc
        except httpx.HTTPError as exc:
            if never_sent(exc):
                raise EffectNotSent(f"LinkedIn unreachable: {_describe(exc)}") from exc
            raise EffectOutcomeUnknown(
                f"LinkedIn gave no complete answer: {_describe(exc)}"
            ) from exc
        if response.is_success:
            urn = response.headers.get("x-restli-id") or response.headers.get("x-linkedin-id")
            if not urn:
                raise EffectOutcomeUnknown(
                    f"LinkedIn answered {response.status_code} without a post id"
                )
            return str(urn)
        duplicate = _duplicate_of(response)
        if duplicate is not None:
            raise self._duplicate(duplicate)
        raise self._refused(response)

    def upload_image(self, image: ImageBytes) -> UploadedMedia:
        """The Images API's initializeUpload and PUT (docs/design.md §32)."""
        owner, api = self.config.author, self.config.api
        return upload_image(self._client, api, owner, self._headers, self._timeout, image)

    def _duplicate(self, urn: str) -> EffectNotSent | EffectOutcomeUnknown:
        """LinkedIn refuses the same text by the same author and names the post it has. It
        is not taken as ours: the same text may be last week's post. An organization was
        looked up just before this send (by text, since the receipt's first send), so the
        post it names is someone else's and this text will not go out: refused. A
        member's posts cannot be read back: nothing can tell, and a person decides."""
        said = f"LinkedIn refuses this text as a duplicate of {urn}"
        if self.config.is_organization:
            return EffectNotSent(f"{said}, an earlier post: edit the text", permanent=True)
        return EffectOutcomeUnknown(f"{said}; {MEMBER_UNREADABLE}")

    def lookup(self, query: PostQuery) -> str | None:
        if not self.config.is_organization:
            raise LookupUnavailable(MEMBER_UNREADABLE)
        try:
            headers = self._headers() | {"X-RestLi-Method": "FINDER"}
        except MissingSecret as exc:
            raise LookupUnavailable(str(exc)) from exc
        wanted = comparable(query.text)
        since_ms = int(query.since.timestamp() * 1000)  # the receipt's first send, less skew
        author = quote(self.config.author, safe="")
        for page in range(MAX_PAGES):
            url = (
                f"{self.config.api}posts?q=author&author={author}"
                f"&count={PAGE}&start={page * PAGE}&sortBy=CREATED"
            )
            elements = self._read(url, headers)
            for post in elements:
                if _ours(post, wanted, since_ms, query):
                    return str(post["id"])
            created = [int(p.get("createdAt") or 0) for p in elements]
            if len(elements) < PAGE or (created and min(created) < since_ms):
                return None
        raise LookupUnavailable(f"over {PAGE * MAX_PAGES} posts to read back: a person must check")

    def link(self, external_id: str) -> str | None:
        if not external_id.startswith("urn:li:"):
            return None
        return f"https://www.linkedin.com/feed/update/{external_id}"

    def fit(self, text: str) -> Fit:
        return Fit(self.target, "LinkedIn", linkedin_length(text), CHARACTER_LIMIT)

    def prove_credentials(self) -> str:
        """A read that needs the token (the author's posts, one), without posting. A
        member's posts are not readable without restricted scopes: LinkedIn's 403 then
        still says the token itself was accepted (a refused one is a 401)."""
        headers = self._headers() | {"X-RestLi-Method": "FINDER"}
        author = quote(self.config.author, safe="")
        url = f"{self.config.api}posts?q=author&author={author}&count=1"
        try:
            response = self._client.get(url, headers=headers, timeout=self._timeout)
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            raise EffectNotSent(f"LinkedIn unreachable: {_describe(exc)}") from exc
        if response.status_code == 200:
            return f"token reads the posts of {self.config.author}"
        if response.status_code == 403 and not self.config.is_organization:
            return "token accepted (a member's posts cannot be read back, as expected)"
        raise self._refused(response)

    # --- HTTP ---

    def _headers(self) -> dict[str, str]:
        return {
            "Authorization": f"Bearer {self.config.secret(self._environ)}",
            "LinkedIn-Version": self.config.version,
            "X-Restli-Protocol-Version": "2.0.0",
        }

    def _read(self, url: str, headers: dict[str, str]) -> list[dict[str, Any]]:
        try:
            response = self._client.get(url, headers=headers, timeout=self._timeout)
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            raise LookupUnavailable(f"LinkedIn look-up failed: {_describe(exc)}") from exc
        if response.status_code != 200:
            raise LookupUnavailable(
                f"LinkedIn look-up answered {response.status_code}: {_message(response)}"
            )
        try:
            elements = response.json()["elements"]
        except (ValueError, KeyError, TypeError) as exc:
            raise LookupUnavailable("LinkedIn look-up answered without elements") from exc
        return [e for e in elements if isinstance(e, dict)]

    def _refused(self, response: httpx.Response) -> EffectNotSent | EffectOutcomeUnknown:
        status = response.status_code
        said = f"LinkedIn answered {status}: {_message(response)}"
        if status in (401, 403):
            scopes = "w_organization_social" if self.config.is_organization else "w_member_social"
            var = self.config.secret_env
            return EffectNotSent(f"{said} (check {var}: it needs {scopes})", auth=True)
        if status in RETRY_LATER:
            wait = retry_after_seconds(response.headers.get("retry-after"))
            hint = f" (retry after {wait:.0f}s)" if wait is not None else ""
            return EffectNotSent(said + hint, retry_after=wait)
        if status in PERMANENT:
            return EffectNotSent(said, permanent=True)
        return EffectOutcomeUnknown(said)  # 500, 502, 504, redirects: it may have posted


class LinkedInOrganizationPublisher(LinkedInPublisher):
    """An organization page's posts, read back (docs/design.md §28): the post itself,
    and its statistics where the token's scopes allow (a member's posts are not
    readable, so a member target has no reader)."""

    counts_per_request = STATISTICS_PER_REQUEST

    def read_post(self, external_id: str, effect_key: str) -> PostRead:
        url = self.config.api + "posts/" + quote(external_id, safe="")
        try:
            response = self._client.get(url, headers=self._headers(), timeout=self._timeout)
        except (httpx.HTTPError, httpx.InvalidURL, MissingSecret) as exc:
            return PostUnknown(f"LinkedIn post read failed: {_describe(exc)}")
        retry_after = response.headers.get("retry-after")
        return read_back(response.status_code, retry_after, _message(response), "LinkedIn")

    def read_counts(self, external_ids: Sequence[str]) -> dict[str, PostCounts]:
        """`organizationalEntityShareStatistics` for these posts: reactions as likes,
        comments as replies, shares as reposts, and impressions; a token without the
        scope gets every post's counts as zeros with a note saying so."""
        shares = ",".join(quote(i, safe="") for i in external_ids if ":share:" in i)
        ugc = ",".join(quote(i, safe="") for i in external_ids if ":ugcPost:" in i)
        query = "q=organizationalEntity&organizationalEntity=" + quote(self.config.author, safe="")
        query += f"&shares=List({shares})" if shares else ""
        query += f"&ugcPosts=List({ugc})" if ugc else ""
        url = f"{self.config.api}organizationalEntityShareStatistics?{query}"
        try:
            response = self._client.get(url, headers=self._headers(), timeout=self._timeout)
        except (httpx.HTTPError, httpx.InvalidURL, MissingSecret) as exc:
            raise ReadRefused(f"LinkedIn statistics read failed: {_describe(exc)}") from exc
        if response.status_code == 403:
            note = f"LinkedIn refused the statistics ({STATISTICS_SCOPE} needed)"
            return {i: PostCounts(note=note) for i in external_ids}
        if response.status_code != 200:
            wait = retry_after_seconds(response.headers.get("retry-after"))
            said = f"LinkedIn statistics answered {response.status_code}: {_message(response)}"
            raise ReadRefused(said, wait)
        counts = {}
        for element in response.json().get("elements") or []:
            urn = element.get("share") or element.get("ugcPost")
            total = element.get("totalShareStatistics") or {}
            counts[str(urn)] = PostCounts(
                likes=int(total.get("likeCount") or 0),
                reposts=int(total.get("shareCount") or 0),
                replies=int(total.get("commentCount") or 0),
                impressions=total.get("impressionCount"),
            )
        return counts


def _ours(post: dict[str, Any], wanted: str, since_ms: int, query: PostQuery) -> bool:
    """A listed post is this receipt's: the text it was sent with, made since its first
    send, and not already another receipt's proof."""
    if comparable(linkedin_plain(str(post.get("commentary") or ""))) != wanted:
        return False
    return int(post.get("createdAt") or 0) >= since_ms and not query.taken(str(post["id"]))


def _duplicate_of(response: httpx.Response) -> str | None:
    """The existing post's URN when LinkedIn refused a repeat (`DUPLICATE_POST` anywhere in
    the body, the URN in its message). A duplicate without a URN is not claimed."""
    if response.status_code not in (400, 409, 422) or "DUPLICATE_POST" not in response.text:
        return None
    found = POST_URN.search(response.text)
    if found is None:
        raise EffectOutcomeUnknown(
            f"LinkedIn calls this a duplicate of an unnamed post: {_message(response)}"
        )
    return found.group()


def _message(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and body.get("message"):
        return str(body["message"])
    text = " ".join(response.text.split())
    return (text[:200] + "…" if len(text) > 200 else text) or "(empty body)"


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
