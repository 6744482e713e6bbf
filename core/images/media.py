"""What an image is on its way to a platform (docs/design.md §32): its bytes and alt
text going up, what the platform answered (`UploadedMedia`), a link's card, how a review
message shows an image, and the port a publisher that carries images implements.
Values and protocols only: it imports nothing of Galley's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable


@dataclass(frozen=True)
class ShownImage:
    """One image of a draft as its review message shows it (docs/design.md §32)."""

    sha256: str
    name: str
    alt: str
    size: int | None  # bytes; None when its bytes are not stored
    width: int = 0
    height: int = 0


@dataclass(frozen=True)
class ImageBytes:
    """One image of a post, its stored bytes and its alt text, as an upload sends it."""

    sha256: str
    name: str
    alt: str
    media_type: str
    width: int
    height: int
    data: bytes


@dataclass(frozen=True)
class UploadedMedia:
    """One image as a target holds it once uploaded (docs/design.md §32): `media_id` is
    Bluesky's blob CID, Mastodon's media id, LinkedIn's image URN; `detail` what the post
    needs beyond it (Bluesky's blob: its mimeType and size). Kept on the upload receipt
    and read from there by every retry."""

    sha256: str
    media_id: str
    alt: str
    width: int = 0
    height: int = 0
    detail: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class LinkCard:
    """The card of a post's link (docs/design.md §32): the page's title, description and
    uploaded thumbnail, or (`missing`) why the post goes without one."""

    url: str
    title: str = ""
    description: str = ""
    thumb: UploadedMedia | None = None
    missing: str = ""


@runtime_checkable
class LinkCardTaker(Protocol):
    """A publisher that shows a link card on a post with a link and no image."""

    takes_link_cards: bool


@runtime_checkable
class ImageUploader(Protocol):
    """A publisher that can carry images (docs/design.md §32): each upload is its own
    effect, performed once per draft, target and image by `core/images/uploads.py`."""

    def upload_image(self, image: ImageBytes) -> UploadedMedia:
        """Upload once, no retries; raise EffectNotSent (known not uploaded) or
        EffectOutcomeUnknown."""
        ...
