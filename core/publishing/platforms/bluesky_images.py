"""Images on Bluesky (docs/design.md §32): one `com.atproto.repo.uploadBlob` per image,
and the post's `app.bsky.embed.images` naming the blobs with their alt texts.

The upload itself is an effect of `core/images/uploads.py` (a receipt per draft, target
and image); this module only makes the call and builds the embed from what the receipt
kept. A blob is named by its content: uploading the same bytes twice gives one blob.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from core.errors import EffectNotSent, EffectOutcomeUnknown
from core.http_calls import never_sent
from core.ports import ImageBytes, LinkCard, UploadedMedia

UPLOAD = "com.atproto.repo.uploadBlob"
RETRY_LATER = frozenset({429, 503})

ErrorOf = Callable[[Exception], tuple[int | None, str | None, str]]


def upload_blob(client: Any, image: ImageBytes, error_of: ErrorOf) -> UploadedMedia:
    """One uploadBlob, no retry: the blob as the post will name it, or the failure
    classified (a refusal is `EffectNotSent`, no complete answer `EffectOutcomeUnknown`)."""
    try:
        answer = client.com.atproto.repo.upload_blob(
            image.data, headers={"Content-Type": image.media_type}
        )
    except Exception as exc:
        raise _upload_failed(exc, error_of) from exc
    blob = answer.blob
    detail = {"mimeType": str(blob.mime_type), "size": int(blob.size)}
    cid = str(getattr(blob.ref, "link", "") or blob.cid)  # the JSON link, as the PDS wrote it
    return UploadedMedia(image.sha256, cid, image.alt, image.width, image.height, detail)


def images_embed(models: Any, media: Sequence[UploadedMedia]) -> Any:
    """`app.bsky.embed.images`: each blob the receipts kept, with its alt text and shape."""
    return models.AppBskyEmbedImages.Main(
        images=[
            models.AppBskyEmbedImages.Image(
                alt=item.alt,
                image=_blob(item),
                aspect_ratio=_aspect(models, item),
            )
            for item in media
        ]
    )


def external_embed(models: Any, card: LinkCard) -> Any:
    """`app.bsky.embed.external`: the link's card, its thumbnail the uploaded blob."""
    return models.AppBskyEmbedExternal.Main(
        external=models.AppBskyEmbedExternal.External(
            uri=card.url,
            title=card.title,
            description=card.description,
            thumb=None if card.thumb is None else _blob(card.thumb),
        )
    )


def _blob(item: UploadedMedia) -> Any:
    from atproto_client.models.blob_ref import BlobRef, IpldLink

    return BlobRef(
        mime_type=str(item.detail["mimeType"]),
        size=int(item.detail["size"]),
        ref=IpldLink(link=item.media_id),
    )


def _aspect(models: Any, item: UploadedMedia) -> Any:
    if item.width < 1 or item.height < 1:
        return None
    return models.AppBskyEmbedDefs.AspectRatio(width=item.width, height=item.height)


def _upload_failed(exc: Exception, error_of: ErrorOf) -> Exception:
    status, name, message = error_of(exc)
    if status is None:
        cause = exc.__cause__ if isinstance(exc.__cause__, Exception) else exc
        if never_sent(cause):
            return EffectNotSent(f"Bluesky unreachable: {cause}")
        return EffectOutcomeUnknown(f"Bluesky gave no complete answer to uploadBlob: {cause}")
    said = f"Bluesky answered uploadBlob {status} {name or ''}: {message}".replace("  ", " ")
    if status in (401, 403):
        return EffectNotSent(said, auth=True)
    if status in RETRY_LATER or name == "ExpiredToken":
        return EffectNotSent(said)  # refused for now: the next pass uploads it again
    if status in (400, 413):  # PayloadTooLarge, a type the PDS refuses: never better
        return EffectNotSent(said, permanent=True)
    return EffectOutcomeUnknown(said)
