"""The media part of the fake Mastodon instance, answering as Mastodon 4.3 does
(`Api::V2::MediaController`, `Api::V1::MediaController`, `PostStatusService`):

- `POST /api/v2/media` (multipart `file`, `description`): 200 with the attachment when
  processed at once, else 202 with `"url": null`; over 16 MB `422 File file size must
  be less than 16 MB`.
- `GET /api/v1/media/:id`: 206 while processing, 200 once processed; 404 for a media
  of another account or one a status holds.
- `PUT /api/v1/media/:id` (`description`): an unattached media described again.
- A status's `media_ids[]`: only this account's media no status holds yet are attached
  (others are left out silently, as Mastodon does), an unprocessed one is `422 Cannot
  attach files that have not finished processing. Try again in a moment!`, more than 4
  `422 Cannot attach more than 4 files`.

`processing_polls`: how many GETs answer 206 before a media is processed (0: every
upload is processed at once, 200).
"""

from __future__ import annotations

import hashlib
import itertools
import re
from email.parser import BytesParser
from email.policy import default
from typing import Any

from tests.fakes.social import Call, Reply, Route

IMAGE_LIMIT = 16 * 1024 * 1024
MAX_MEDIA = 4
NOT_PROCESSED = "Cannot attach files that have not finished processing. Try again in a moment!"


def parse_multipart(raw: bytes, content_type: str) -> dict[str, Any]:
    """A multipart form as the request log keeps it: fields as text, a file as its name,
    type, size and hash (never its bytes)."""
    message = BytesParser(policy=default).parsebytes(
        f"Content-Type: {content_type}\r\n\r\n".encode() + raw
    )
    form: dict[str, Any] = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        payload = part.get_payload(decode=True) or b""
        if part.get_filename() is not None:
            form[str(name)] = {
                "filename": part.get_filename(),
                "type": part.get_content_type(),
                "size": len(payload),
                "sha256": hashlib.sha256(payload).hexdigest(),
            }
        else:
            form[str(name)] = payload.decode("utf-8")
    return form


class MastodonMedia:
    """Media attachments by id; mixed into the fake instance."""

    def _init_media(self) -> None:
        self.media: dict[str, dict[str, Any]] = {}
        self.processing_polls = 1
        self._media_ids = itertools.count(110000000000000001)

    def media_route(self, method: str, path: str) -> tuple[str, Route] | None:
        if (method, path) == ("POST", "/api/v2/media"):
            return "upload", self._upload_media
        found = re.fullmatch(r"/api/v1/media/(\d+)", path)
        if found and method == "GET":
            return "media", lambda call: self._get_media(call, found.group(1))
        if found and method == "PUT":
            return "media", lambda call: self._describe_media(call, found.group(1))
        return None

    def uploads(self) -> int:
        return len(self.requests_to("/api/v2/media", "POST"))  # type: ignore[attr-defined]

    def attach(self, account_id: str, ids: list[str]) -> list[dict[str, Any]] | Reply:
        """The media a status with `media_ids[]` takes, or Mastodon's refusal."""
        with self._lock:  # type: ignore[attr-defined]
            free = [
                self.media[i]
                for i in ids
                if i in self.media
                and self.media[i]["owner"] == account_id
                and self.media[i]["status_id"] is None
            ]
            if len(free) > MAX_MEDIA:
                return 422, {"error": f"Cannot attach more than {MAX_MEDIA} files"}, {}
            if any(m["polls_left"] > 0 for m in free):
                return 422, {"error": NOT_PROCESSED}, {}
            return free

    def clean_up_unattached(self) -> int:
        """Mastodon's `Scheduler::MediaCleanupScheduler`, run once a day: every media no
        status holds (a day old, as the test's clock has it) is destroyed; a read of it is
        then `404 Record not found`."""
        with self._lock:  # type: ignore[attr-defined]
            stray = [i for i, m in self.media.items() if m["status_id"] is None]
            for media_id in stray:
                del self.media[media_id]
        return len(stray)

    def hold_media(self, media: list[dict[str, Any]], status_id: str) -> None:
        with self._lock:  # type: ignore[attr-defined]
            for item in media:
                item["status_id"] = status_id

    def _upload_media(self, call: Call) -> Reply:
        account = self._account(call)  # type: ignore[attr-defined]
        if isinstance(account, tuple):
            return account
        form = call.body if isinstance(call.body, dict) else {}
        file = form.get("file")
        if not isinstance(file, dict):
            return 422, {"error": "Validation failed: File can't be blank"}, {}
        if file["size"] > IMAGE_LIMIT:
            return 422, {"error": "Validation failed: File file size must be less than 16 MB"}, {}
        media_id = str(next(self._media_ids))
        item = {
            "id": media_id,
            "owner": account["id"],
            "type": file["type"],
            "size": file["size"],
            "sha256": file["sha256"],
            "description": form.get("description") or None,
            "polls_left": self.processing_polls,
            "status_id": None,
        }
        with self._lock:  # type: ignore[attr-defined]
            self.media[media_id] = item
        code = 202 if item["polls_left"] else 200
        return code, self._attachment(item), {}

    def _get_media(self, call: Call, media_id: str) -> Reply:
        account = self._account(call)  # type: ignore[attr-defined]
        if isinstance(account, tuple):
            return account
        with self._lock:  # type: ignore[attr-defined]
            item = self.media.get(media_id)
            if item is None or item["owner"] != account["id"] or item["status_id"]:
                return 404, {"error": "Record not found"}, {}
            if item["polls_left"] > 0:
                item["polls_left"] -= 1
                return 206, self._attachment(item, processing=True), {}
        return 200, self._attachment(item), {}

    def _describe_media(self, call: Call, media_id: str) -> Reply:
        account = self._account(call)  # type: ignore[attr-defined]
        if isinstance(account, tuple):
            return account
        form = call.body if isinstance(call.body, dict) else {}
        with self._lock:  # type: ignore[attr-defined]
            item = self.media.get(media_id)
            if item is None or item["owner"] != account["id"] or item["status_id"]:
                return 404, {"error": "Record not found"}, {}
            item["description"] = form.get("description") or None
        return 200, self._attachment(item), {}

    def _attachment(self, item: dict[str, Any], processing: bool | None = None) -> dict[str, Any]:
        pending = item["polls_left"] > 0 if processing is None else processing
        base = f"{self.url}/system/media_attachments/{item['id']}"  # type: ignore[attr-defined]
        return {
            "id": item["id"],
            "type": "image",
            "url": None if pending else f"{base}/original.jpg",
            "preview_url": f"{base}/small.jpg",
            "description": item["description"],
            "blurhash": "UeKUpFxuo~R%0nW;WCnhF6RjaJt757oJodS$",
        }
