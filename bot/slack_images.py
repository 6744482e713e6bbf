"""Images in a Slack publication (docs/design.md §32), uploaded as slack_sdk's
`files_upload_v2` does it: `files.getUploadURLExternal`, the bytes POSTed to the URL it
names, then `files.completeUploadExternal` with no channel, so the file is the app's
until the post's `image` block (`slack_file`) shows it with its alt text. The upload is
an effect of `core/images/uploads.py`; this module makes the three calls.
"""

from __future__ import annotations

import http.client
import urllib.error
from collections.abc import Sequence
from typing import Any

import httpx
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from core.errors import EffectNotSent, EffectOutcomeUnknown
from core.http_calls import never_sent
from core.ports import ImageBytes, UploadedMedia

UPLOAD_TIMEOUT = 60.0  # seconds for the bytes' POST
ALT_LIMIT = 2000  # Block Kit's image block alt_text


def upload_file(client: WebClient, image: ImageBytes) -> UploadedMedia:
    """The file's id once Slack holds it complete (not yet shown anywhere)."""
    try:
        granted = client.files_getUploadURLExternal(
            filename=image.name, length=len(image.data), alt_txt=image.alt[:ALT_LIMIT] or None
        )
        file_id, upload_url = str(granted["file_id"]), str(granted["upload_url"])
        _send_bytes(upload_url, image)
        client.files_completeUploadExternal(files=[{"id": file_id, "title": image.name}])
    except SlackApiError as exc:
        error = exc.response.get("error") if isinstance(exc.response.data, dict) else None
        if exc.response.status_code >= 500:
            raise EffectOutcomeUnknown(f"Slack answered {exc.response.status_code}") from exc
        raise EffectNotSent(
            f"Slack refused the file: {error}", permanent=error != "ratelimited"
        ) from exc
    except urllib.error.URLError as exc:
        if never_sent(exc):
            raise EffectNotSent(f"Slack unreachable: {exc.reason}") from exc
        raise EffectOutcomeUnknown(f"no answer from Slack: {exc.reason}") from exc
    except (TimeoutError, ConnectionError, http.client.HTTPException) as exc:
        raise EffectOutcomeUnknown(f"no complete answer from Slack: {exc!r}") from exc
    return UploadedMedia(image.sha256, file_id, image.alt, image.width, image.height)


def image_blocks(media: Sequence[UploadedMedia]) -> list[dict[str, Any]]:
    """One `image` block per uploaded file, with its alt text."""
    return [
        {"type": "image", "slack_file": {"id": item.media_id}, "alt_text": item.alt[:ALT_LIMIT]}
        for item in media
    ]


def _send_bytes(upload_url: str, image: ImageBytes) -> None:
    try:
        answer = httpx.post(upload_url, content=image.data, timeout=UPLOAD_TIMEOUT)
    except httpx.HTTPError as exc:
        if never_sent(exc):
            raise EffectNotSent(f"Slack's upload URL unreachable: {exc}") from exc
        raise EffectOutcomeUnknown(f"no complete answer to the file's upload: {exc}") from exc
    if answer.status_code != 200:
        raise EffectNotSent(f"Slack refused the file's bytes: {answer.status_code}")
