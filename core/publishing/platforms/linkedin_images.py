"""An image on LinkedIn (docs/design.md §32), through the Images API: `POST
{api}images?action=initializeUpload` for the author (an image URN and an upload URL),
then `PUT` of the bytes to that URL, then the post's `content.media` naming the URN with
its alt text. The upload is an effect of `core/images/uploads.py`; this module makes the
two calls and classifies their failures. It never creates a post.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx

from core.errors import EffectNotSent, EffectOutcomeUnknown
from core.http_calls import never_sent, retry_after_seconds
from core.ports import ImageBytes, UploadedMedia

RETRY_LATER = frozenset({429, 503})
PERMANENT = frozenset({400, 404, 410, 413, 422, 426})


def upload_image(
    client: httpx.Client,
    api: str,
    owner: str,
    headers: Callable[[], dict[str, str]],
    timeout: httpx.Timeout,
    image: ImageBytes,
) -> UploadedMedia:
    """initializeUpload, then the bytes PUT to the URL it named: the image's URN."""
    request = {"initializeUploadRequest": {"owner": owner}}
    answer = _call(
        client,
        "POST",
        api + "images",
        params={"action": "initializeUpload"},
        json=request,
        headers=headers(),
        timeout=timeout,
    )
    try:
        value = answer.json()["value"]
        urn, upload_url = str(value["image"]), str(value["uploadUrl"])
    except (ValueError, KeyError, TypeError) as exc:
        raise EffectOutcomeUnknown("LinkedIn's initializeUpload answer could not be read") from exc
    put_headers = {"Authorization": headers()["Authorization"], "Content-Type": image.media_type}
    _call(client, "PUT", upload_url, content=image.data, headers=put_headers, timeout=timeout)
    return UploadedMedia(image.sha256, urn, image.alt, image.width, image.height)


def media_content(urn: str, alt: str) -> dict[str, Any]:
    """The post's `content`: one image with its alt text."""
    return {"media": {"id": urn, "altText": alt}}


def _call(client: httpx.Client, method: str, url: str, **how: Any) -> httpx.Response:
    try:
        answer = client.request(method, url, follow_redirects=False, **how)
    except httpx.HTTPError as exc:
        if never_sent(exc):
            raise EffectNotSent(f"LinkedIn unreachable: {type(exc).__name__}") from exc
        raise EffectOutcomeUnknown(f"LinkedIn gave no complete answer to {method}") from exc
    if answer.is_success:
        return answer
    said = f"LinkedIn answered {method} {answer.status_code}: {answer.text[:200]}"
    if answer.status_code in (401, 403):
        raise EffectNotSent(said, auth=True)
    if answer.status_code in RETRY_LATER:
        wait = retry_after_seconds(answer.headers.get("retry-after"))
        raise EffectNotSent(said, retry_after=wait)
    if answer.status_code in PERMANENT:
        raise EffectNotSent(said, permanent=True)
    raise EffectOutcomeUnknown(said)
