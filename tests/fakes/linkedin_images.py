"""The Images API part of the fake LinkedIn, answering as LinkedIn's REST API does:

- `POST /rest/images?action=initializeUpload` with `{"initializeUploadRequest": {"owner":
  URN}}`: `200 {"value": {"uploadUrlExpiresAt", "uploadUrl", "image": "urn:li:image:…"}}`,
  the image `WAITING_UPLOAD`.
- `PUT` of the bytes to `uploadUrl` (the bearer token again): `201`, the image
  `AVAILABLE`.
- `GET /rest/images/{urn}`: the image and its `status`.
- A post whose `content.media.id` is not an available image of its author: `422`.
"""

from __future__ import annotations

import hashlib
import itertools
import time
from typing import Any
from urllib.parse import quote, unquote

from tests.fakes.social import Call, Reply, Route

UPLOAD_PATH = "/dms-uploads/"


class LinkedInImages:
    """Images by URN; mixed into the fake LinkedIn."""

    def _init_images(self) -> None:
        self.images: dict[str, dict[str, Any]] = {}  # urn -> owner, status, size, sha256
        self._image_ids = itertools.count(1)

    def images_route(self, method: str, path: str) -> tuple[str, Route] | None:
        if method == "POST" and path.rstrip("/") == "/rest/images":
            return "upload", self._initialize_upload
        if method == "PUT" and path.startswith(UPLOAD_PATH):
            urn = unquote(path.removeprefix(UPLOAD_PATH))
            return "put", lambda call: self._put_bytes(call, urn)
        if method == "GET" and path.startswith("/rest/images/"):
            urn = unquote(path.removeprefix("/rest/images/"))
            return "image", lambda call: self._get_image(call, urn)
        return None

    def image_body(self, raw: bytes) -> dict[str, Any]:
        return {"size": len(raw), "sha256": hashlib.sha256(raw).hexdigest()}

    def uploads(self) -> int:
        return len(self.requests_to("/rest/images", "POST"))  # type: ignore[attr-defined]

    def media_refused(self, author: str, content: Any) -> Reply | None:
        """A post's `content.media` as LinkedIn checks it."""
        if content is None:
            return None
        urn = str(((content or {}).get("media") or {}).get("id", ""))
        with self._lock:  # type: ignore[attr-defined]
            image = self.images.get(urn)
        if image is None or image["owner"] != author or image["status"] != "AVAILABLE":
            message = f"ERROR :: /content/media/id :: {urn} is not an available image"
            return 422, {"status": 422, "message": message}, {}
        return None

    def _initialize_upload(self, call: Call) -> Reply:
        authors = self._checked(call)  # type: ignore[attr-defined]
        if not isinstance(authors, set):
            return authors
        if "action=initializeUpload" not in call.query:
            return 400, {"status": 400, "message": "Unsupported action"}, {}
        body = call.body if isinstance(call.body, dict) else {}
        owner = str((body.get("initializeUploadRequest") or {}).get("owner", ""))
        if owner not in authors:
            return 403, {"status": 403, "message": "Not enough permissions: images.CREATE"}, {}
        urn = f"urn:li:image:C4E10AQ{next(self._image_ids):012d}"
        with self._lock:  # type: ignore[attr-defined]
            self.images[urn] = {"owner": owner, "status": "WAITING_UPLOAD"}
        upload_url = f"{self.url}{UPLOAD_PATH}{quote(urn)}"  # type: ignore[attr-defined]
        expires = int(time.time() * 1000) + 3_600_000
        value = {"uploadUrlExpiresAt": expires, "uploadUrl": upload_url, "image": urn}
        return 200, {"value": value}, {}

    def _put_bytes(self, call: Call, urn: str) -> Reply:
        authors = self.tokens.get(call.bearer or "")  # type: ignore[attr-defined]
        with self._lock:  # type: ignore[attr-defined]
            image = self.images.get(urn)
            if image is None or authors is None or image["owner"] not in authors:
                return 404, {"status": 404, "message": "Not found"}, {}
            body = call.body if isinstance(call.body, dict) else {}
            image.update(status="AVAILABLE", size=body.get("size"), sha256=body.get("sha256"))
        return 201, "", {}

    def _get_image(self, call: Call, urn: str) -> Reply:
        authors = self._checked(call)  # type: ignore[attr-defined]
        if not isinstance(authors, set):
            return authors
        with self._lock:  # type: ignore[attr-defined]
            image = self.images.get(urn)
        if image is None or image["owner"] not in authors:
            return 404, {"status": 404, "message": "Not found"}, {}
        return 200, {"id": urn, "owner": image["owner"], "status": image["status"]}, {}
