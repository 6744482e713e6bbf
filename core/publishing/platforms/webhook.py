"""The webhook adapter of the `Publisher` port: one POST per publish, one GET per lookup.

Nothing is retried or redirected here: each failure is classified (docs/design.md §8)
and the decision to try again is Galley's, recorded in its ledger.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any
from urllib.parse import quote

import httpx

from core.errors import EffectNotSent, EffectOutcomeUnknown, LookupUnavailable
from core.http_calls import call_timeout, never_sent, retry_after_seconds
from core.ports import (
    Fit,
    PostCounts,
    PostQuery,
    PostRead,
    PostUnknown,
    Publication,
)
from core.publishing.platforms.read_back import read_back

RETRY_LATER = frozenset({408, 425, 429, 503})  # refused for now: nothing happened
REDIRECT_NOT_ACTED = frozenset({301, 307, 308})  # moved: the request was not processed here
_CANNOT_SEND = (httpx.UnsupportedProtocol, httpx.LocalProtocolError, httpx.InvalidURL)


class WebhookRefused(EffectNotSent):
    """The destination answered with a status that means it did not act."""

    def __init__(
        self, message: str, *, status: int, permanent: bool, retry_after: float | None = None
    ) -> None:
        super().__init__(
            message, permanent=permanent, auth=status in (401, 403), retry_after=retry_after
        )
        self.status = status


class WebhookPublisher:
    """Publishes approved drafts by POSTing JSON with an `Idempotency-Key` header."""

    def __init__(
        self,
        url: str,
        status_url: str | None,
        timeout: timedelta,
        client: httpx.Client | None = None,
    ) -> None:
        self.url, self.status_url = url, status_url
        limits = call_timeout(timeout)
        self._timeout = httpx.Timeout(limits.phase, connect=limits.connect)
        self._client = client or httpx.Client(follow_redirects=False)

    @property
    def target(self) -> str:
        return "webhook"

    def publish(self, publication: Publication) -> str:
        key = publication.effect_key
        try:
            response = self._client.post(
                self.url,
                json=payload(publication),
                headers={"Idempotency-Key": key, "Content-Type": "application/json"},
                timeout=self._timeout,
                follow_redirects=False,
            )
        except _CANNOT_SEND as exc:
            raise EffectNotSent(f"webhook request invalid: {exc}", permanent=True) from exc
        except httpx.HTTPError as exc:
            raise _unsent_or_unknown(exc) from exc
        if response.is_success:
            return _id_from(response, key)
        raise classify(response)

    def lookup(self, query: PostQuery) -> str | None:
        effect_key = query.effect_key
        if self.status_url is None:
            raise LookupUnavailable(
                "the webhook has no status_url: Galley cannot tell whether it was received"
            )
        url = self.status_url.replace("{key}", quote(effect_key, safe=""))
        try:
            response = self._client.get(url, timeout=self._timeout, follow_redirects=False)
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            raise LookupUnavailable(f"webhook status check failed: {_describe(exc)}") from exc
        if response.status_code == 200:
            return _id_from(response, effect_key)
        if response.status_code == 404:
            return None
        raise LookupUnavailable(
            f"webhook status check answered HTTP {response.status_code}: {_excerpt(response)}"
        )

    def link(self, external_id: str) -> str | None:
        return None  # a webhook's receiver has no public page Galley knows of

    def fit(self, text: str) -> Fit | None:
        return None  # no limit: the receiver decides

    def close(self) -> None:
        self._client.close()


class StatusWebhookPublisher(WebhookPublisher):
    """A webhook with a `status_url`: its publications are read back there after they
    went out (docs/design.md §28); it gives no counts."""

    counts_per_request = 0

    def read_post(self, external_id: str, effect_key: str) -> PostRead:
        """The status URL for the key: 200 found, 404 or 410 gone, anything else cannot tell."""
        url = (self.status_url or "").replace("{key}", quote(effect_key, safe=""))
        try:
            response = self._client.get(url, timeout=self._timeout, follow_redirects=False)
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            return PostUnknown(f"webhook status check failed: {_describe(exc)}")
        retry_after = response.headers.get("retry-after")
        return read_back(response.status_code, retry_after, _excerpt(response), "webhook status")

    def read_counts(self, external_ids: Sequence[str]) -> dict[str, PostCounts]:
        return {}


def payload(publication: Publication) -> dict[str, str]:
    """The JSON body of the POST."""
    return {
        "key": publication.effect_key,
        "draft_key": publication.draft_key,
        "recipe": publication.recipe,
        "platform": publication.platform,
        "slot": publication.slot_at.isoformat(),
        "text": publication.text,
        "approver": publication.approver,
        "approved_at": publication.approved_at.isoformat(),
    }


def classify(response: httpx.Response) -> EffectNotSent | EffectOutcomeUnknown:
    """Map a non-2xx answer to a POST: refused (not sent) or maybe acted (unknown)."""
    status = response.status_code
    said = f"webhook answered HTTP {status}: {_excerpt(response)}"
    if status in RETRY_LATER:
        wait = retry_after_seconds(response.headers.get("retry-after"))
        hint = f" (retry after {wait:g}s)" if wait is not None else ""
        return WebhookRefused(said + hint, status=status, permanent=False, retry_after=wait)
    if status in REDIRECT_NOT_ACTED:
        moved = f"{said} (moved to {response.headers.get('location')}; fix the url)"
        return WebhookRefused(moved, status=status, permanent=True)
    if status == 409:  # Idempotency-Key drafts: a request under this key is still in progress
        return EffectOutcomeUnknown(f"{said} (a request with this key may be in progress)")
    if 400 <= status < 500:
        return WebhookRefused(said, status=status, permanent=True)
    return EffectOutcomeUnknown(said)  # 5xx, 302/303 and the rest: it may have acted


def _unsent_or_unknown(exc: httpx.HTTPError) -> EffectNotSent | EffectOutcomeUnknown:
    """A POST with no answer: never sent (unreachable), or sent with no complete answer."""
    if never_sent(exc):
        return EffectNotSent(f"webhook unreachable: {_describe(exc)}")
    return EffectOutcomeUnknown(f"webhook gave no complete answer: {_describe(exc)}")


def _id_from(response: httpx.Response, key: str) -> str:
    try:
        body: Any = response.json()
    except ValueError:
        return key
    found = body.get("id") if isinstance(body, dict) else None
    if isinstance(found, str | int | float) and not isinstance(found, bool) and found != "":
        return str(found)
    return key


def _excerpt(response: httpx.Response, limit: int = 200) -> str:
    text = " ".join(response.text.split())
    return (text[:limit] + "…" if len(text) > limit else text) or "(empty body)"


def _describe(exc: Exception) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
