"""An image on its way to and from a platform, as the ports carry it (docs/design.md §32):
shown on a review message, shown to the model, sent up with its bytes, held by a target
once uploaded, and a link's card. Frozen values only: no behaviour, no I/O. Imported,
like every port value, from core/ports.py.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


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


@dataclass(frozen=True)
class ImageInput:
    """An image shown to the model (`describe_images`, docs/design.md §32)."""

    media_type: str
    data: bytes
