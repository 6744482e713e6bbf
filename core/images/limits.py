"""What each platform takes of images (docs/design.md §32): how many on one post, how
many bytes each, which formats, how long an alt text. Data only, read by the shaping,
the review's fit lines and the uploads; a platform absent here takes no images.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import timedelta

from core.identity import platform_of_target

JPEG, PNG, GIF, WEBP = "image/jpeg", "image/png", "image/gif", "image/webp"
HEIC, HEIF, AVIF = "image/heic", "image/heif", "image/avif"
MB = 1024 * 1024
# A file a person hands Galley (a plan's image): read no further than this, as a dropped
# Slack file; shaping then bounds its pixels (core/images/shaping.py).
MAX_IMAGE_FILE = 50 * MB


@dataclass(frozen=True)
class ImageLimits:
    """One platform's limits on a post's images."""

    platform: str
    label: str  # for people: "Bluesky"
    max_count: int
    max_bytes: int
    media_types: frozenset[str]  # formats it takes as they are
    max_pixels: int | None = None  # width x height, where the platform caps it
    max_alt: int | None = None  # characters of alt text, where the platform caps it
    # why a platform takes no image from Galley at all (Threads: public URLs only)
    refused: str | None = None
    # how long an upload no post holds is kept, where the platform deletes it: an upload
    # older than this is made again before a post names it (core/images/uploads.py)
    unattached_kept: timedelta | None = None
    no_images_because: str = ""  # max_count 0: why the platform takes none from Galley


@dataclass(frozen=True)
class ImageFacts:
    """What a stored image is: its format, pixels and size in bytes."""

    media_type: str
    width: int
    height: int
    size: int


LIMITS: dict[str, ImageLimits] = {
    # app.bsky.embed.images: at most 4 images, each blob `accept: image/*`, maxSize
    # 1,000,000 bytes; enforced when the post references the blob (not at uploadBlob).
    "bluesky": ImageLimits("bluesky", "Bluesky", 4, 1_000_000, frozenset({JPEG, PNG, WEBP})),
    # Mastodon's MediaAttachment: IMAGE_LIMIT 16 MB, 8,294,400 pixels (3840x2160, larger
    # ones are scaled down by the server), MAX_MEDIA_ATTACHMENTS 4, descriptions ≤ 1,500.
    "mastodon": ImageLimits(
        "mastodon",
        "Mastodon",
        4,
        16 * MB,
        frozenset({JPEG, PNG, GIF, WEBP, HEIC, HEIF, AVIF}),
        max_alt=1500,
        # Scheduler::MediaCleanupScheduler destroys media no status holds once a day
        # old: an upload is trusted for 20 hours, whenever the daily job runs
        unattached_kept=timedelta(hours=20),
    ),
    # LinkedIn's Images API: one image on a post of ours; JPG, GIF and PNG, at most
    # 36,152,320 pixels.
    "linkedin": ImageLimits(
        "linkedin", "LinkedIn", 1, 16 * MB, frozenset({JPEG, PNG, GIF}), max_pixels=36_152_320
    ),
    # Discord: attachments of the message's own multipart request, 10 a message, 10 MiB a
    # file without boosts, an attachment's `description` (its alt text) 1,024 characters.
    "discord": ImageLimits(
        "discord", "Discord", 10, 10 * MB, frozenset({JPEG, PNG, GIF, WEBP}), max_alt=1024
    ),
    # Threads fetches an image from a public URL (image_url); Galley keeps images private
    # until publication, so none goes to Threads (docs/design.md §24).
    "threads": ImageLimits(
        "threads",
        "Threads",
        0,
        0,
        frozenset(),
        refused="Threads takes an image only from a public URL, and Galley keeps images "
        "private: remove the image before approving, or publish it elsewhere",
    ),
    # Slack: files shared with the message (files.completeUploadExternal takes up to 10).
    "slack": ImageLimits("slack", "Slack", 10, 16 * MB, frozenset({JPEG, PNG, GIF, WEBP})),
    # Telegram's sendPhoto (10 MB) has a caption but no alt text: an image would reach the
    # chat without its description, so a draft with images is refused at review.
    "telegram": ImageLimits(
        "telegram",
        "Telegram",
        0,
        10 * MB,
        frozenset({JPEG, PNG, GIF, WEBP}),
        no_images_because="its Bot API has no alt text for a photo",
    ),
}


def limits_for(target: str) -> ImageLimits | None:
    """The limits of the platform a target id names; None where it takes no images
    (a webhook receives the images' references, never their bytes)."""
    return LIMITS.get(platform_of_target(target))


def strictest(limits: Iterable[ImageLimits]) -> ImageLimits | None:
    """One set of limits every given platform accepts: the fewest bytes, pixels and
    images, the formats all of them take. None when there are none."""
    every = list(limits)
    if not every:
        return None
    pixels = [lim.max_pixels for lim in every if lim.max_pixels is not None]
    return ImageLimits(
        platform="+".join(lim.platform for lim in every),
        label=", ".join(lim.label for lim in every),
        max_count=min(lim.max_count for lim in every),
        max_bytes=min(lim.max_bytes for lim in every),
        media_types=frozenset.intersection(*(lim.media_types for lim in every)),
        max_pixels=min(pixels) if pixels else None,
    )


def size_in_words(size: int) -> str:
    """`12.0 MB`, `980 KB`, `512 bytes`: decimal units, as the platforms state limits."""
    if size >= 1_000_000:
        return f"{size / 1_000_000:.1f} MB"
    if size >= 1000:
        return f"{size // 1000} KB"
    return f"{size} bytes"
