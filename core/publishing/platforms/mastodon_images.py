"""Images on Mastodon (docs/design.md §32): `POST /api/v2/media` with the alt text as
its description (200 when processed at once, 202 while the instance processes it), `GET
/api/v1/media/:id` polled until processed (206 until then), and the status's
`media_ids[]`. An alt text edited after the upload is set with `PUT /api/v1/media/:id`
before the status names it (Mastodon lets an unattached media change).

The upload is an effect of `core/images/uploads.py`; this module makes the calls and
classifies their failures. It never posts a status.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import httpx

from core.errors import EffectNotSent, EffectOutcomeUnknown
from core.http_calls import call_timeout, never_sent, retry_after_seconds
from core.ports import ImageBytes, UploadedMedia

POLL_EVERY = 0.5  # seconds between asks while the instance processes an upload
RETRY_LATER = frozenset({429, 503})
PERMANENT = frozenset({400, 404, 410, 413, 422})
PROCESSED = "processed"  # UploadedMedia.detail: whether the instance finished with it
DESCRIPTION = "description"  # the alt text, as Mastodon names it


class MastodonMedia:
    """The media calls of one instance and token."""

    def __init__(self, instance: str, token: str, timeout: timedelta) -> None:
        self.instance, self.token = instance.rstrip("/"), token
        self._timeout = timeout
        limits = call_timeout(timeout)
        self._httpx_timeout = httpx.Timeout(limits.phase, connect=limits.connect)

    def upload(self, image: ImageBytes) -> UploadedMedia:
        """One upload, then polls while the instance processes it, at most one call limit
        (a media still processing then is polled again before the status is sent)."""
        files = {"file": (image.name, image.data, image.media_type)}
        data = {DESCRIPTION: image.alt} if image.alt else {}
        answer = self._call("POST", "/api/v2/media", files=files, data=data)
        media = answer.json()
        processed = answer.status_code == 200 and media.get("url") is not None
        media_id = str(media["id"])
        deadline = time.monotonic() + self._timeout.total_seconds()
        while not processed and time.monotonic() < deadline:
            time.sleep(POLL_EVERY)
            processed = self._processed(media_id)
        detail = {PROCESSED: processed}
        return UploadedMedia(image.sha256, media_id, image.alt, image.width, image.height, detail)

    def ready(self, media: Sequence[UploadedMedia]) -> None:
        """Before the status: each media processed and described as the draft says now;
        `EffectNotSent` (retry soon) while one is still processing, and for any failure
        here: the status has not left, whatever became of these calls."""
        try:
            self._make_ready(media)
        except EffectOutcomeUnknown as exc:
            raise EffectNotSent(f"{exc} (the status was not sent)") from exc

    def _make_ready(self, media: Sequence[UploadedMedia]) -> None:
        """Each media read back from the instance (what it holds, not what the receipt
        remembers): still processing holds the status back, a description other than
        the draft's alt text is set again."""
        for item in media:
            answer = self._call("GET", f"/api/v1/media/{item.media_id}")
            held = answer.json()
            if answer.status_code != 200 or held.get("url") is None:
                raise EffectNotSent(f"Mastodon is still processing media {item.media_id}")
            if (held.get(DESCRIPTION) or "") != item.alt:
                self._call("PUT", f"/api/v1/media/{item.media_id}", data={DESCRIPTION: item.alt})

    def _processed(self, media_id: str) -> bool:
        """`GET /api/v1/media/:id`: 200 with its URL once processed, 206 until then."""
        answer = self._call("GET", f"/api/v1/media/{media_id}")
        return answer.status_code == 200 and answer.json().get("url") is not None

    def _call(self, method: str, path: str, **how: Any) -> httpx.Response:
        headers = {"Authorization": f"Bearer {self.token}"}
        try:
            answer = httpx.request(
                method,
                self.instance + path,
                headers=headers,
                timeout=self._httpx_timeout,
                **how,
            )
        except httpx.HTTPError as exc:
            if never_sent(exc):
                raise EffectNotSent(f"Mastodon unreachable: {exc}") from exc
            raise EffectOutcomeUnknown(
                f"Mastodon gave no complete answer to {path}: {exc}"
            ) from exc
        if answer.status_code < 300:
            return answer
        raise _refused(answer, method, path)


def _refused(answer: httpx.Response, method: str, path: str) -> Exception:
    status = answer.status_code
    try:
        error = str(answer.json().get("error", answer.text))
    except ValueError:
        error = answer.text[:200]
    said = f"Mastodon answered {method} {path} {status}: {error}"
    if status in (401, 403):
        return EffectNotSent(said, auth=True)
    if status in RETRY_LATER:
        return EffectNotSent(
            said, retry_after=retry_after_seconds(answer.headers.get("retry-after"))
        )
    if status in PERMANENT:
        return EffectNotSent(said, permanent=True)
    return EffectOutcomeUnknown(said)
