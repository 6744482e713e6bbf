"""Each image of a post uploaded once per draft and target (docs/design.md §32), through
the effect ledger: the receipt is claimed before the upload, keeps what the platform
answered (Bluesky's blob, Mastodon's media id, LinkedIn's image URN), and every retry of
the post (and every part of its thread) reads it from there instead of uploading again.

An upload is repeatable: its answer lost, it is sent again under the same key and only
the receipt's one answer is ever attached (Bluesky names a blob by its content, so a
second upload is the same blob; a second Mastodon upload is a stray media no status
holds, which the instance deletes). It never posts anything.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from core.errors import EffectNotSent
from core.identity import renewed_upload_key, upload_effect_key
from core.images.library import ImageLibrary
from core.images.limits import limits_for
from core.policies import EffectOutcome, EffectStep
from core.ports import ImageBytes, ImageUploader, UploadedMedia
from core.post_body import ImageRef
from core.states import EffectState
from core.store.effects import EffectLedger
from core.store.receipts import EffectSpec, Performed, Proof, Receipt

UPLOADED = frozenset({EffectOutcome.SENT, EffectOutcome.DONE, EffectOutcome.FOUND})


class ImageUploads:
    def __init__(self, ledger: EffectLedger, library: ImageLibrary) -> None:
        self.ledger, self.library = ledger, library

    def upload_all(
        self,
        uploader: ImageUploader,
        target: str,
        draft_key: str,
        images: Sequence[ImageRef],
        *,
        run_id: str,
        call_timeout: timedelta,
    ) -> tuple[UploadedMedia, ...]:
        """Every image as `target` holds it, each uploaded at most once; `EffectNotSent`
        when one is not uploaded (yet), so the post is not sent without it."""
        return tuple(
            self._upload(uploader, target, draft_key, image, run_id, call_timeout)
            for image in images
        )

    def _upload(
        self,
        uploader: ImageUploader,
        target: str,
        draft_key: str,
        image: ImageRef,
        run_id: str,
        call_timeout: timedelta,
    ) -> UploadedMedia:
        spec = EffectSpec(
            self._current_key(upload_effect_key(draft_key, target, image.sha256), target),
            draft_key=draft_key,
            step=EffectStep.UPLOAD,
            payload={"target": target, "sha256": image.sha256},
            lease=call_timeout * 4,
            run_id=run_id,
            backoff=True,
            on_wire=call_timeout,
        )

        def upload() -> Proof:
            media = uploader.upload_image(self._bytes_of(image))
            return Proof(media.media_id, _result_of(media))

        performed = self.ledger.perform(spec, upload, repeatable=True)
        if performed.outcome not in UPLOADED or performed.receipt is None:
            raise _not_uploaded(image, target, performed)
        return _media_of(performed.receipt, image)

    def _current_key(self, first: str, target: str) -> str:
        """The upload's key now: the first, or the renewal after the last upload the
        platform has deleted since (no post held it for `unattached_kept`)."""
        limits = limits_for(target)
        kept = None if limits is None else limits.unattached_kept
        if kept is None:
            return first
        key, renewal = first, 1
        while _expired(self.ledger.get(key), kept, self.ledger.clock.now()):
            renewal += 1
            key = renewed_upload_key(first, renewal)
        return key

    def _bytes_of(self, image: ImageRef) -> ImageBytes:
        return image_bytes(self.library, image)


def image_bytes(library: ImageLibrary, image: ImageRef) -> ImageBytes:
    """An image's stored bytes as a destination receives them, with its alt text."""
    stored = library.get(image.sha256)
    if stored is None:
        raise EffectNotSent(f"image {image.name} has no stored bytes", permanent=True)
    facts = stored.facts
    return ImageBytes(
        image.sha256,
        image.name,
        image.alt,
        facts.media_type,
        facts.width,
        facts.height,
        stored.data,
    )


def _expired(receipt: Receipt | None, kept: timedelta, now: datetime) -> bool:
    """An upload that succeeded longer than `kept` ago: the platform may have deleted it."""
    if receipt is None or receipt.state != EffectState.SUCCEEDED or receipt.updated_at is None:
        return False
    return now - receipt.updated_at >= kept


def _result_of(media: UploadedMedia) -> dict[str, Any]:
    return {
        "alt": media.alt,
        "width": media.width,
        "height": media.height,
        "detail": dict(media.detail),
    }


def _media_of(receipt: Receipt, image: ImageRef) -> UploadedMedia:
    """The upload as its receipt keeps it, with the alt text the draft has now."""
    result = receipt.result or {}
    return UploadedMedia(
        image.sha256,
        receipt.external_id or "",
        image.alt,
        int(result.get("width", 0)),
        int(result.get("height", 0)),
        dict(result.get("detail") or {}),
    )


def _not_uploaded(image: ImageRef, target: str, performed: Performed) -> EffectNotSent:
    """The post waits for its image: refused for good when the platform refused the image
    itself, else tried again on a later pass."""
    said = f"image {image.name} not uploaded to {target}: {performed.detail or performed.outcome}"
    refusal = performed.refusal
    if refusal is not None:
        return EffectNotSent(
            said, permanent=refusal.permanent, auth=refusal.auth, retry_after=refusal.retry_after
        )
    return EffectNotSent(said)
