"""Meta's Threads as a destination (`publish = { to = "threads", user = … }`): the Graph
API at `api` over `httpx`, the token in the Authorization header (never in a URL).

Not `core/publishing/threads.py`, which is a thread of posts on any platform. A post here
is two steps (docs/design.md §24): `create_container` makes a media container (`POST
/{user}/threads`, `media_type=TEXT`, `reply_to_id` for a thread's later part), whose id
`core/publishing/containers.py` keeps on a receipt of its own; `publish` then sends `POST
/{user}/threads_publish` with that `creation_id`, and a container publishes once. After an
unknown answer the look-up asks each container of the receipt for its `status`
(PUBLISHED, FINISHED, IN_PROGRESS, EXPIRED, ERROR); a published one's post is found in
the account's threads (or replies) since the first send, matched by text, under the
look-up proof rules. The account's 250 posts (1,000 replies) a day are read from
`threads_publishing_limit` immediately before each publish: a full quota is refused with
the reason, never sent to fail. Threads takes images only from a public URL, and Galley
keeps images private: a draft with an image is refused at review for Threads.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, timedelta
from typing import Any

import httpx

from core.errors import (
    EffectNotSent,
    EffectOutcomeUnknown,
    LookupUnavailable,
    MissingSecret,
    ReadRefused,
)
from core.http_calls import never_sent
from core.policies import ContainerStatus, ThreadStyle
from core.ports import (
    Fit,
    PostCounts,
    PostFound,
    PostGone,
    PostQuery,
    PostRead,
    PostUnknown,
    Publication,
)
from core.publishing.platforms import threads_meta_answers as answers
from core.publishing.platforms.http_publisher import HttpPublisher
from core.publishing.platforms.post_text import comparable, threads_length, threads_text
from core.setup.publish_targets import ThreadsTarget

CHARACTER_LIMIT = 500
PAGE = 100  # posts per page of the account's threads
MAX_PAGES = 10  # a look-up reads at most 1,000 posts, then says it cannot tell
LIST_FIELDS = "id,text,timestamp,permalink,replied_to"
QUOTA_FIELDS = "quota_usage,config,reply_quota_usage,reply_config"
INSIGHTS = "views,likes,replies,reposts,quotes"
INSIGHTS_REFUSED = "Threads refused the insights (threads_manage_insights needed)"
_CANNOT_SEND = (httpx.UnsupportedProtocol, httpx.LocalProtocolError, httpx.InvalidURL)


class ThreadsPublisher(HttpPublisher[ThreadsTarget]):
    """Posts plain text, part after part, as one Threads account."""

    thread_style = ThreadStyle.PART_BY_PART  # each part replies to the one before
    counts_per_request = 1  # insights are read one post at a time

    def __init__(
        self,
        target: ThreadsTarget,
        timeout: timedelta,
        environ: Mapping[str, str] | None = None,
        client: httpx.Client | None = None,
    ) -> None:
        super().__init__(target, timeout, environ, client)
        self._links: dict[str, str] = {}

    # --- the two steps ---

    def create_container(self, publication: Publication) -> str:
        """`POST /{user}/threads`: a TEXT container, replying to the part before."""
        self._refuse_unfit(publication)
        form = {"media_type": "TEXT", "text": threads_text(publication.text)}
        if publication.reply_to is not None:
            form["reply_to_id"] = publication.reply_to.parent
        answer = self._write(f"/{self.config.user}/threads", form)
        return self._id_of(answer, "the container")

    def container_status(self, container_id: str) -> ContainerStatus:
        response = self._get(f"/{container_id}", {"fields": "id,status,error_message"})
        if response.status_code != 200:
            refusal = answers.refused(response, self.config.secret_env)
            if isinstance(refusal, EffectNotSent):
                raise refusal
            raise EffectNotSent(str(refusal))
        return _status_of(response)

    def publish(self, publication: Publication) -> str:
        """`POST /{user}/threads_publish` of the receipt's container, once."""
        self._refuse_unfit(publication)
        if publication.container is None:
            raise EffectNotSent("no Threads container was made for this post", permanent=True)
        self._refuse_over_quota(reply=publication.reply_to is not None)
        container = publication.container
        try:
            answer = self._write(f"/{self.config.user}/threads_publish", {"creation_id": container})
        except EffectNotSent as exc:
            raise self._published_meanwhile(container, exc) from exc
        post_id = self._id_of(answer, "the published post")
        self._remember_link(post_id)
        return post_id

    def _published_meanwhile(
        self, container: str, refusal: EffectNotSent
    ) -> EffectNotSent | EffectOutcomeUnknown:
        """A publish refused as invalid may be refused because the container is already
        published (an earlier send whose answer was lost, landing after the look-up): then
        the outcome is the look-up's to tell, never a refusal of a post that is out."""
        if not refusal.permanent or refusal.auth:
            return refusal
        try:
            status = self.container_status(container)
        except (EffectNotSent, MissingSecret):
            return refusal
        if status != ContainerStatus.PUBLISHED:
            return refusal
        return EffectOutcomeUnknown(f"Threads container {container} is published: {refusal}")

    def _refuse_unfit(self, publication: Publication) -> None:
        if publication.images:  # the review refuses these; never dropped silently here
            raise EffectNotSent(
                "Threads takes an image only from a public URL, and Galley keeps images "
                "private: publish this draft without its image",
                permanent=True,
            )
        count = threads_length(threads_text(publication.text))
        if count > CHARACTER_LIMIT:
            refused = f"Threads takes {CHARACTER_LIMIT} characters; this draft has {count}"
            raise EffectNotSent(refused, permanent=True)

    def _refuse_over_quota(self, *, reply: bool) -> None:
        """The account's posts (or replies) in the last 24 hours against its quota, read
        just before publishing: full, the post is refused with the reason rather than
        sent to fail. A quota that cannot be read leaves the platform to enforce it."""
        response = self._get(
            f"/{self.config.user}/threads_publishing_limit", {"fields": QUOTA_FIELDS}
        )
        if response.status_code != 200:
            if answers.is_auth(response):
                raise EffectNotSent(
                    f"Threads refused {self.config.secret_env}: {answers.said(response)}",
                    auth=True,
                )
            return
        usage, total = _quota_of(response, reply=reply)
        if usage is not None and total is not None and usage >= total:
            what = "replies" if reply else "posts"
            raise EffectNotSent(
                f"Threads allows this account {total} {what} in 24 hours and {usage} were "
                "published: not sent; retry once the day's quota frees up",
                permanent=True,
            )

    # --- the port ---

    def lookup(self, query: PostQuery) -> str | None:
        """The receipt's containers first, newest first: a PUBLISHED one's post is found
        in the account's listing; FINISHED, EXPIRED or ERROR ones were never published.
        With no container on record (a database restored from before the send), the
        account's posts since the first send are matched by text."""
        for container in query.containers:
            try:
                status = self.container_status(container)
            except (EffectNotSent, MissingSecret) as exc:
                raise LookupUnavailable(f"Threads container read failed: {exc}") from exc
            if status == ContainerStatus.IN_PROGRESS:
                raise LookupUnavailable(f"Threads container {container} is still in progress")
            if status == ContainerStatus.PUBLISHED:
                found = self._listed(query)
                if found is None:
                    raise LookupUnavailable(
                        f"Threads container {container} is published, but its post is not "
                        "in the account's threads yet: a person must check"
                    )
                return found
        if query.containers:
            return None
        return self._listed(query)

    def _listed(self, query: PostQuery) -> str | None:
        """The account's post (or reply) with this text, made since the first send, in
        its place in the thread, and not already another receipt's proof."""
        wanted = comparable(threads_text(query.text))
        edge = "replies" if query.reply_to is not None else "threads"
        params = {
            "fields": LIST_FIELDS,
            "since": str(int(query.since.timestamp())),
            "limit": str(PAGE),
        }
        for _ in range(MAX_PAGES):
            page = self._page(f"/{self.config.user}/{edge}", params)
            for post in page.get("data") or []:
                if isinstance(post, dict) and _ours(post, wanted, query):
                    post_id = str(post["id"])
                    if post.get("permalink"):
                        self._links[post_id] = str(post["permalink"])
                    return post_id
            after = ((page.get("paging") or {}).get("cursors") or {}).get("after")
            if not after or not (page.get("paging") or {}).get("next"):
                return None
            params = {**params, "after": str(after)}
        raise LookupUnavailable(
            f"over {PAGE * MAX_PAGES} Threads posts to read: a person must check"
        )

    def _page(self, path: str, params: dict[str, str]) -> dict[str, Any]:
        try:
            response = self._get(path, params)
        except MissingSecret as exc:
            raise LookupUnavailable(str(exc)) from exc
        if response.status_code != 200:
            raise LookupUnavailable(
                f"Threads look-up answered {response.status_code}: {answers.said(response)}"
            )
        try:
            body = response.json()
        except ValueError as exc:
            raise LookupUnavailable("Threads look-up answered without JSON") from exc
        return body if isinstance(body, dict) else {}

    def link(self, external_id: str) -> str | None:
        return self._links.get(external_id)

    def fit(self, text: str) -> Fit:
        return Fit(self.target, "Threads", threads_length(threads_text(text)), CHARACTER_LIMIT)

    def prove_credentials(self) -> str:
        """`GET /me`: the token works, and is the configured user's."""
        response = self._get("/me", {"fields": "id,username"})
        if response.status_code != 200:
            if answers.is_auth(response):
                raise EffectNotSent(
                    f"Threads refused {self.config.secret_env}: {answers.said(response)}",
                    auth=True,
                )
            raise EffectNotSent(
                f"Threads answered {response.status_code}: {answers.said(response)}"
            )
        me = response.json()
        if str(me.get("id")) != self.config.user:
            raise EffectNotSent(
                f"{self.config.secret_env} is the token of Threads user {me.get('id')}, "
                f"not of user {self.config.user}"
            )
        return f"token accepted for @{me.get('username') or self.config.user}"

    # --- read back and engagement (docs/design.md §28) ---

    def read_post(self, external_id: str, effect_key: str) -> PostRead:
        try:
            response = self._get(f"/{external_id}", {"fields": "id,permalink"})
        except (EffectNotSent, MissingSecret) as exc:
            return PostUnknown(f"Threads post read failed: {exc}")
        if response.status_code == 200:
            return PostFound()
        if answers.is_missing(response):
            return PostGone(response.status_code, answers.said(response))
        wait = answers.wait_of(response) if answers.is_throttled(response) else None
        return PostUnknown(
            f"Threads answered {response.status_code}: {answers.said(response)}", wait
        )

    def read_counts(self, external_ids: Sequence[str]) -> dict[str, PostCounts]:
        """`GET /{media}/insights`: views, likes, replies, reposts and quotes; a token
        without the insights permission gets zeros with a note saying so."""
        counts = {}
        for external_id in external_ids:
            try:
                response = self._get(f"/{external_id}/insights", {"metric": INSIGHTS})
            except (EffectNotSent, MissingSecret) as exc:
                raise ReadRefused(f"Threads insights read failed: {exc}") from exc
            if answers.is_missing(response):
                continue
            if answers.is_auth(response):  # the token lacks threads_manage_insights
                counts[external_id] = PostCounts(note=INSIGHTS_REFUSED)
                continue
            if response.status_code != 200:
                wait = answers.wait_of(response) if answers.is_throttled(response) else None
                said = f"Threads insights answered {response.status_code}: {answers.said(response)}"
                raise ReadRefused(said, wait)
            counts[external_id] = _counts_of(response.json())
        return counts

    # --- HTTP ---

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.config.secret(self._environ)}"}

    def _get(self, path: str, params: dict[str, str]) -> httpx.Response:
        """A read; EffectNotSent when no answer came (a read changes nothing)."""
        try:
            return self._client.get(
                self.config.api + path,
                params=params,
                headers=self._headers(),
                timeout=self._timeout,
            )
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            raise EffectNotSent(f"Threads unreachable: {answers.describe(exc)}") from exc

    def _write(self, path: str, form: dict[str, str]) -> httpx.Response:
        """A POST: classified by its answer; no complete answer may have acted."""
        try:
            response = self._client.post(
                self.config.api + path, data=form, headers=self._headers(), timeout=self._timeout
            )
        except _CANNOT_SEND as exc:
            raise EffectNotSent(f"Threads request invalid: {exc}", permanent=True) from exc
        except httpx.HTTPError as exc:
            if never_sent(exc):
                raise EffectNotSent(f"Threads unreachable: {answers.describe(exc)}") from exc
            raise EffectOutcomeUnknown(
                f"Threads gave no complete answer: {answers.describe(exc)}"
            ) from exc
        if response.status_code != 200:
            raise answers.refused(response, self.config.secret_env)
        return response

    def _id_of(self, response: httpx.Response, what: str) -> str:
        try:
            found = response.json().get("id")
        except (ValueError, AttributeError):
            found = None
        if not found:
            raise EffectOutcomeUnknown(f"Threads answered 200 without the id of {what}")
        return str(found)

    def _remember_link(self, post_id: str) -> None:
        """`GET /{media}?fields=permalink`, for the receipt; a failed read leaves no link."""
        try:
            response = self._get(f"/{post_id}", {"fields": "permalink"})
            permalink = response.json().get("permalink") if response.status_code == 200 else None
        except (EffectNotSent, MissingSecret, ValueError, AttributeError):
            return
        if isinstance(permalink, str) and permalink.startswith("https://"):
            self._links[post_id] = permalink


def _status_of(response: httpx.Response) -> ContainerStatus:
    try:
        return ContainerStatus(str(response.json().get("status")))
    except (ValueError, AttributeError) as exc:
        raise EffectNotSent(f"Threads answered a container without a status: {exc}") from exc


def _quota_of(response: httpx.Response, *, reply: bool) -> tuple[int | None, int | None]:
    try:
        entry = (response.json().get("data") or [{}])[0]
        usage = entry.get("reply_quota_usage" if reply else "quota_usage")
        total = (entry.get("reply_config" if reply else "config") or {}).get("quota_total")
    except (ValueError, AttributeError, IndexError):
        return None, None
    return (
        usage if isinstance(usage, int) else None,
        total if isinstance(total, int) else None,
    )


def _ours(post: dict[str, Any], wanted: str, query: PostQuery) -> bool:
    """A listed post is this receipt's: its text, made since its first send, in its place
    in the thread, and not already another receipt's proof."""
    if comparable(str(post.get("text") or "")) != wanted:
        return False
    made = answers.timestamp(post.get("timestamp"))
    since = query.since if query.since.tzinfo else query.since.replace(tzinfo=UTC)
    if made is None or made < since:
        return False
    if query.reply_to is not None:
        parent = (post.get("replied_to") or {}).get("id")
        if str(parent) != query.reply_to.parent:
            return False
    return not query.taken(str(post["id"]))


def _counts_of(body: Any) -> PostCounts:
    values: dict[str, int] = {}
    for metric in body.get("data") or []:
        found = (metric.get("values") or [{}])[0].get("value")
        if found is None:
            found = (metric.get("total_value") or {}).get("value")
        values[str(metric.get("name"))] = int(found or 0)
    return PostCounts(
        likes=values.get("likes", 0),
        reposts=values.get("reposts", 0),
        replies=values.get("replies", 0),
        quotes=values.get("quotes", 0),
        impressions=values.get("views"),
    )
