"""Mastodon as a destination (`publish = { to = "mastodon", instance = … }`), through
`Mastodon.py`.

A status is posted under an `Idempotency-Key` derived from the effect key, which the
server remembers for about an hour after the status exists (not while it is being made:
Galley's receipt keeps one request in flight). After an unknown answer the account's own
statuses since the first attempt are read and matched by text (a thread's later part: and
by the status it replies to) before anything is sent again. A thread is posted part after
part, each its own effect, `in_reply_to_id` the part before (docs/design.md §31).
Mastodon.py's traps are switched off: it would sleep and re-send on a 429
(`ratelimit_method="throw"`) and wait 300 s for an answer (`request_timeout`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from core.errors import (
    EffectNotSent,
    EffectOutcomeUnknown,
    LookupUnavailable,
    MissingExtra,
    MissingSecret,
    ReadRefused,
)
from core.http_calls import never_sent, retry_after_seconds
from core.identity import header_key
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
from core.publishing.platforms.mastodon_images import MastodonMedia
from core.publishing.platforms.post_text import (
    comparable,
    mastodon_content_text,
    mastodon_length,
    mastodon_text,
)
from core.publishing.platforms.read_back import GONE
from core.setup.publish_targets import MastodonTarget

DEFAULT_LIMIT = 500  # Mastodon's own default, used while the instance cannot be asked
DEFAULT_URL_LENGTH = 23
PAGE = 40  # statuses per page, Mastodon's maximum
MAX_PAGES = 25  # a look-up reads at most 1,000 statuses, then says it cannot tell
ASK_AGAIN_SECONDS = 300.0  # after /api/v2/instance failed, Mastodon's defaults this long
RETRY_LATER = frozenset({429, 503})
PERMANENT = frozenset({400, 404, 410, 413, 422})
STATUSES_LIMIT = 20  # ids one GET /api/v1/statuses takes (Mastodon 4.3)
NO_MULTI_READ = frozenset({404, 422})  # before 4.3: GET /api/v1/statuses is no route


class MastodonPublisher:
    """Posts plain text to one account on one instance; shared by every worker."""

    def __init__(
        self,
        target: MastodonTarget,
        timeout: timedelta,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.config = target
        self._environ = environ
        self._timeout = timeout.total_seconds()
        self._api: Any = None  # mastodon.Mastodon, made at first use
        self._lock = threading.Lock()
        self._answers = threading.local()  # the last HTTP answer this thread received
        self._limits: tuple[int, int] | None = None  # (max_characters, characters per URL)
        self._limits_failed_at = -ASK_AGAIN_SECONDS  # time.monotonic() of the last failed ask
        self._account: Any = None  # verify_credentials, once
        self._links: dict[str, str] = {}
        self._one_at_a_time = False  # a server before 4.3: counts read status by status

    thread_style = ThreadStyle.PART_BY_PART  # each part its own status, key and receipt

    @property
    def target(self) -> str:
        return self.config.target

    # --- the port ---

    def publish(self, publication: Publication) -> str:
        text = mastodon_text(publication.text)
        api = self._signed_in()
        limit, url_length = self._instance_limits(api)
        count = mastodon_length(text, url_length)
        if count > limit:
            refused = f"{self._label()} takes {limit} characters; this draft has {count}"
            raise EffectNotSent(refused, permanent=True)
        place = publication.reply_to  # a thread's later part: the status before it
        media_ids = [item.media_id for item in publication.media] or None
        if publication.media:
            self._media().ready(publication.media)
        self._answers.response = None
        try:
            status = api.status_post(
                text,
                in_reply_to_id=None if place is None else place.parent,
                visibility=self.config.visibility,
                idempotency_key=header_key(publication.effect_key),
                media_ids=media_ids,
            )
        except Exception as exc:
            raise self._post_failed(exc) from exc
        status_id = str(status["id"])
        if status.get("url"):
            self._links[status_id] = str(status["url"])
        return status_id

    def upload_image(self, image: ImageBytes) -> UploadedMedia:
        """`POST /api/v2/media`, polled until processed (docs/design.md §32)."""
        return self._media().upload(image)

    def _media(self) -> MastodonMedia:
        token = self.config.secret(self._environ)
        return MastodonMedia(self.config.instance, token, timedelta(seconds=self._timeout))

    def lookup(self, query: PostQuery) -> str | None:
        try:
            api = self._signed_in()
            account = self._me(api)
        except Exception as exc:
            raise LookupUnavailable(f"Mastodon look-up failed: {_describe(exc)}") from exc
        wanted = comparable(mastodon_text(query.text))
        since: datetime = query.since  # the receipt's first send, less the skew already
        max_id = None
        for _ in range(MAX_PAGES):
            try:
                page = api.account_statuses(
                    account["id"], since_id=since, max_id=max_id, limit=PAGE, exclude_reblogs=True
                )
            except Exception as exc:
                raise LookupUnavailable(f"Mastodon look-up failed: {_describe(exc)}") from exc
            for status in page:
                status_id = str(status["id"])
                text = comparable(mastodon_content_text(str(status.get("content") or "")))
                if text == wanted and _in_place(status, query) and not query.taken(status_id):
                    if status.get("url"):
                        self._links[status_id] = str(status["url"])
                    return status_id
            if len(page) < PAGE:
                return None
            max_id = page[-1]["id"]
        many = PAGE * MAX_PAGES
        raise LookupUnavailable(
            f"over {many} statuses since {since:%Y-%m-%d %H:%M}: a person must check"
        )

    # --- read back (docs/design.md §28) ---

    counts_per_request = STATUSES_LIMIT

    def read_post(self, external_id: str, effect_key: str) -> PostRead:
        """The status itself: 404 or 410 is gone, any other failure cannot tell."""
        try:
            self._signed_in().status(external_id)
        except Exception as exc:
            response = getattr(self._answers, "response", None)
            status = None if response is None else int(response.status_code)
            if status in GONE:
                return PostGone(status, _error_of(response))
            wait = _wait_of(response) if status in RETRY_LATER else None
            return PostUnknown(f"Mastodon status read failed: {_describe(exc)}", wait)
        return PostFound()

    def read_counts(self, external_ids: Sequence[str]) -> dict[str, PostCounts]:
        """One `GET /api/v1/statuses?id[]=…` for up to 20 statuses (Mastodon 4.3); a
        server older than 4.3 answers it 404 or 422, and is read one `GET
        /api/v1/statuses/:id` at a time from then on. A deleted status is left out."""
        if not self._one_at_a_time:
            try:
                return _counts_of(self._signed_in().statuses(list(external_ids)))
            except Exception as exc:
                if self._last_status() not in NO_MULTI_READ:
                    raise self._read_refused(exc) from exc
                self._one_at_a_time = True
        return _counts_of(self._each_status(external_ids))

    def _each_status(self, external_ids: Sequence[str]) -> list[Any]:
        found = []
        for external_id in external_ids:
            try:
                found.append(self._signed_in().status(external_id))
            except Exception as exc:
                if self._last_status() not in GONE:
                    raise self._read_refused(exc) from exc
        return found

    def _last_status(self) -> int | None:
        response = getattr(self._answers, "response", None)
        return None if response is None else int(response.status_code)

    def _read_refused(self, exc: Exception) -> ReadRefused:
        status = self._last_status()
        wait = _wait_of(self._answers.response) if status in RETRY_LATER else None
        return ReadRefused(f"Mastodon statuses read failed: {_describe(exc)}", wait)

    def link(self, external_id: str) -> str | None:
        if external_id in self._links:
            return self._links[external_id]
        account = self._account
        if account is None or not external_id.isdigit():
            return None
        return f"{self.config.instance}/@{account['username']}/{external_id}"

    def fit(self, text: str) -> Fit:
        limit, url_length = self._instance_limits(self._client())
        count = mastodon_length(mastodon_text(text), url_length)
        return Fit(self.target, self._label(), count, limit)

    def close(self) -> None:
        if self._api is not None:
            self._api.session.close()

    # --- the client ---

    def _client(self) -> Any:
        with self._lock:
            if self._api is None:
                self._api = self._new_client()
            return self._api

    def _new_client(self) -> Any:
        try:
            import requests
            from mastodon import Mastodon
        except ImportError:
            raise MissingExtra("Mastodon.py", self.target) from None
        session = requests.Session()
        answers = self._answers

        def keep(response: Any, *args: Any, **kwargs: Any) -> Any:
            answers.response = response  # Mastodon.py's errors drop the headers we need
            return response

        session.hooks["response"].append(keep)
        return Mastodon(
            api_base_url=self.config.instance,
            ratelimit_method="throw",  # never sleep and re-send behind Galley's back
            request_timeout=self._timeout,
            session=session,
            version_check_mode="none",
        )

    def _signed_in(self) -> Any:
        api = self._client()
        api.access_token = self.config.secret(self._environ)  # read when needed: MissingSecret
        return api

    def prove_credentials(self) -> str:
        """`verify_credentials` without posting: the token works on this instance."""
        self._answers.response = None
        try:
            account = self._me(self._signed_in())
        except MissingSecret:
            raise
        except Exception as exc:
            raise self._unproved(exc) from exc
        username = account.get("username") if isinstance(account, dict) else None
        if not username:  # it answered 200, but not as Mastodon answers verify_credentials
            self._account = None
            raise EffectNotSent(
                f"{self.config.instance} answered verify_credentials without an account: "
                "is it a Mastodon server?"
            )
        return f"token accepted for @{username}"

    def _unproved(self, exc: Exception) -> EffectNotSent:
        """Why the token was not proved, by the answer itself: the token only when the
        instance said 401 or 403."""
        response = getattr(self._answers, "response", None)
        if response is None:
            cause = exc.__context__ if exc.__context__ is not None else exc
            return EffectNotSent(f"{self.config.instance} is unreachable: {_describe(cause)}")
        status = int(response.status_code)
        said = f"{self.config.instance} answered {status}: {_error_of(response)}"
        if status in (401, 403):
            return EffectNotSent(f"Mastodon refused {self.config.secret_env}: {said}", auth=True)
        return EffectNotSent(f"{said} (is it a Mastodon server?)")

    def _me(self, api: Any) -> Any:
        if self._account is None:
            self._account = api.account_verify_credentials()
        return self._account

    def _instance_limits(self, api: Any) -> tuple[int, int]:
        """`configuration.statuses` of `/api/v2/instance`, asked once; Mastodon's defaults
        (not kept) while the instance cannot be asked."""
        if self._limits is not None:
            return self._limits
        if time.monotonic() - self._limits_failed_at < ASK_AGAIN_SECONDS:
            return DEFAULT_LIMIT, DEFAULT_URL_LENGTH  # a hung instance does not slow each fit
        try:
            statuses = api.instance_v2()["configuration"]["statuses"]
            limits = (
                int(statuses["max_characters"]),
                int(statuses.get("characters_reserved_per_url") or DEFAULT_URL_LENGTH),
            )
        except Exception:
            self._limits_failed_at = time.monotonic()
            return DEFAULT_LIMIT, DEFAULT_URL_LENGTH
        self._limits = limits
        return limits

    def _label(self) -> str:
        return f"Mastodon ({self.target.removeprefix('mastodon:')})"

    # --- classification (docs/design.md §8) ---

    def _post_failed(self, exc: Exception) -> EffectNotSent | EffectOutcomeUnknown:
        """Classified by the HTTP answer itself (kept by the session hook); no answer at
        all is never-sent only when connecting failed."""
        response = getattr(self._answers, "response", None)
        if response is None:
            cause = exc.__context__ if exc.__context__ is not None else exc
            if never_sent(cause):
                return EffectNotSent(f"Mastodon unreachable: {_describe(cause)}")
            return EffectOutcomeUnknown(f"Mastodon gave no complete answer: {_describe(cause)}")
        status = int(response.status_code)
        said = f"Mastodon answered {status}: {_error_of(response)}"
        if 200 <= status < 300:  # it posted, then the client choked on the answer
            return EffectOutcomeUnknown(
                f"Mastodon accepted but the answer failed: {_describe(exc)}"
            )
        if status in (401, 403):
            return EffectNotSent(f"{said} (check {self.config.secret_env})", auth=True)
        if status in RETRY_LATER:
            wait = _wait_of(response)
            hint = f" (retry after {wait:.0f}s)" if wait is not None else ""
            return EffectNotSent(said + hint, retry_after=wait)
        if status in PERMANENT:
            return EffectNotSent(said, permanent=True)
        return EffectOutcomeUnknown(said)  # 500, 502, 504 and the rest: it may have posted


def _in_place(status: Any, query: PostQuery) -> bool:
    """A thread's later part is only ever the reply to the part before it: the same words
    elsewhere on the account are another post (docs/design.md §31)."""
    if query.reply_to is None:
        return True
    return str(status.get("in_reply_to_id") or "") == query.reply_to.parent


def _error_of(response: Any) -> str:
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and body.get("error"):
        return str(body["error"])
    text = " ".join(str(response.text).split())
    return text[:200] or "(empty body)"


def _counts_of(statuses: Sequence[Any]) -> dict[str, PostCounts]:
    return {
        str(found["id"]): PostCounts(
            likes=int(found.get("favourites_count") or 0),
            reposts=int(found.get("reblogs_count") or 0),
            replies=int(found.get("replies_count") or 0),
            quotes=int(found.get("quotes_count") or 0),
        )
        for found in statuses
    }


def _wait_of(response: Any) -> float | None:
    """`Retry-After`, else `X-RateLimit-Reset` (an ISO time, or epoch seconds)."""
    headers = response.headers
    wait = retry_after_seconds(headers.get("Retry-After"))
    if wait is not None:
        return wait
    reset = headers.get("X-RateLimit-Reset")
    if not reset:
        return None
    try:
        at = float(reset)
    except ValueError:
        try:
            at = datetime.fromisoformat(reset.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return None
    return max(0.0, at - time.time())


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
