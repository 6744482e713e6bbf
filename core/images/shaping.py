"""An image's bytes made to fit a platform's limits with Pillow (docs/design.md §32):
converted when the platform does not take its format, scaled down when it is too big,
and refused, with the reason, when it would only fit at a size nobody could read.
It never writes anything: bytes in, bytes out.
"""

from __future__ import annotations

import io
import math
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from PIL import Image, ImageOps, UnidentifiedImageError

from core.errors import ImageRefused
from core.images.limits import JPEG, PNG, ImageFacts, ImageLimits, size_in_words
from core.policies import ImageProblem

LEGIBLE_LONG_SIDE = 640  # px: an image scaled below this on its long side is refused
JPEG_QUALITY = 85
SHRINK_MARGIN = 0.9  # each scaling aims this far under the byte limit: JPEG sizes wobble
MAX_SHRINKS = 8
# Galley's own limit on an image's pixels (width x height), read from its header before
# anything is decoded: a few hundred KB of PNG can say 144 Mpx, which decodes to GBs.
MAX_DECODED_PIXELS = 100_000_000
# Pillow raises DecompressionBombError only above twice MAX_IMAGE_PIXELS and merely warns
# below that. Half Galley's limit puts Pillow's error exactly at it, so a size Pillow finds
# later than the header (a GIF frame larger than its screen) is refused there too; the
# warning below it then says nothing Galley does not.
_PILLOW_MAX_PIXELS = MAX_DECODED_PIXELS // 2
warnings.filterwarnings("ignore", category=Image.DecompressionBombWarning)


@dataclass(frozen=True)
class Shaped:
    """Bytes that fit, what they are, and what was done to them ("" when nothing was)."""

    data: bytes
    facts: ImageFacts
    changed: str = ""


def probe(data: bytes) -> ImageFacts:
    """What `data` is; `ImageRefused(UNREADABLE)` when Pillow cannot read it."""
    with _opened(data) as image:
        return ImageFacts(_media_type(image), image.width, image.height, len(data))


def shape(data: bytes, limits: ImageLimits) -> Shaped:
    """`data` as `limits` take it: unchanged when it already fits, else converted and
    scaled down; `ImageRefused` (FORMAT or TOO_BIG) when it cannot be made to fit."""
    facts = probe(data)
    if _fits(facts, limits):
        return Shaped(data, facts)
    with _opened(data) as opened, _pillow_refusals():
        media_type = _output_type(opened, facts.media_type, limits)
        image = ImageOps.exif_transpose(opened)  # a copy: it no longer knows its frames
        image = _within_pixels(image, limits)
        encoded = _encode(image, media_type)
        for _ in range(MAX_SHRINKS):
            if len(encoded) <= limits.max_bytes:
                break
            image = _shrunk(image, len(encoded), limits)
            encoded = _encode(image, media_type)
        else:
            raise _too_big(facts, limits)
    done = probe(encoded)
    return Shaped(encoded, done, _what_changed(facts, done))


def _fits(facts: ImageFacts, limits: ImageLimits) -> bool:
    pixels_fit = limits.max_pixels is None or facts.width * facts.height <= limits.max_pixels
    return facts.media_type in limits.media_types and facts.size <= limits.max_bytes and pixels_fit


def _opened(data: bytes) -> Image.Image:
    """The image, decoded only once its header says it is within MAX_DECODED_PIXELS."""
    Image.MAX_IMAGE_PIXELS = _PILLOW_MAX_PIXELS  # set again: any import may have changed it
    with _pillow_refusals():
        image = Image.open(io.BytesIO(data))  # lazy: reads the header, decodes nothing
        if image.width * image.height > MAX_DECODED_PIXELS:
            image.close()
            raise _too_many_pixels(f"the image ({image.width}x{image.height})")
        image.load()
    return image


@contextmanager
def _pillow_refusals() -> Iterator[None]:
    """Pillow's failures, at whichever step of reading they come, as Galley's refusals."""
    try:
        yield
    except Image.DecompressionBombError as exc:
        raise _too_many_pixels("the image") from exc
    except (UnidentifiedImageError, OSError) as exc:
        raise ImageRefused(ImageProblem.UNREADABLE, f"not an image Galley can read: {exc}") from exc


def _too_many_pixels(what: str) -> ImageRefused:
    return ImageRefused(
        ImageProblem.TOO_BIG,
        f"{what} is over Galley's limit of {MAX_DECODED_PIXELS:,} pixels: not decoded",
    )


def _media_type(image: Image.Image) -> str:
    return Image.MIME.get(image.format or "", "application/octet-stream")


def _output_type(image: Image.Image, media_type: str, limits: ImageLimits) -> str:
    """Its own format where the platform takes it (a still one), else PNG for a picture
    with transparency, else JPEG; refused when the platform takes neither."""
    animated = getattr(image, "is_animated", False)
    if media_type in limits.media_types and media_type in (JPEG, PNG):
        return media_type
    if animated and media_type not in limits.media_types:
        raise ImageRefused(
            ImageProblem.FORMAT,
            f"{limits.label} does not take animated {media_type}: converting would keep one frame",
        )
    wanted = PNG if _has_alpha(image) and PNG in limits.media_types else JPEG
    if wanted not in limits.media_types:
        raise ImageRefused(
            ImageProblem.FORMAT, f"{limits.label} takes neither {media_type} nor JPEG or PNG"
        )
    return wanted


def _has_alpha(image: Image.Image) -> bool:
    return image.mode in ("RGBA", "LA", "PA") or "transparency" in image.info


def _within_pixels(image: Image.Image, limits: ImageLimits) -> Image.Image:
    if limits.max_pixels is None or image.width * image.height <= limits.max_pixels:
        return image
    return _scaled(image, math.sqrt(limits.max_pixels / (image.width * image.height)), limits)


def _shrunk(image: Image.Image, size: int, limits: ImageLimits) -> Image.Image:
    """Scaled so its encoding should come in under the byte limit (bytes go roughly with
    pixels, so the sides go with the square root)."""
    return _scaled(image, math.sqrt(limits.max_bytes / size) * SHRINK_MARGIN, limits)


def _scaled(image: Image.Image, factor: float, limits: ImageLimits) -> Image.Image:
    width, height = int(image.width * factor), int(image.height * factor)
    if max(width, height) < LEGIBLE_LONG_SIDE:
        raise ImageRefused(
            ImageProblem.TOO_BIG,
            f"{limits.label} takes {size_in_words(limits.max_bytes)} per image; this one fits "
            f"only below {LEGIBLE_LONG_SIDE} px on its long side, too small to read",
        )
    return image.resize((max(width, 1), max(height, 1)), Image.Resampling.LANCZOS)


def _encode(image: Image.Image, media_type: str) -> bytes:
    out = io.BytesIO()
    if media_type == PNG:
        image.save(out, format="PNG", optimize=True)
    else:
        if image.mode != "RGB":
            image = _flattened(image)
        image.save(out, format="JPEG", quality=JPEG_QUALITY, optimize=True)
    return out.getvalue()


def _flattened(image: Image.Image) -> Image.Image:
    """Transparency laid on white: JPEG has no alpha channel."""
    rgba = image.convert("RGBA")
    background = Image.new("RGB", rgba.size, (255, 255, 255))
    background.paste(rgba, mask=rgba.getchannel("A"))
    return background


def _too_big(facts: ImageFacts, limits: ImageLimits) -> ImageRefused:
    return ImageRefused(
        ImageProblem.TOO_BIG,
        f"{limits.label} takes {size_in_words(limits.max_bytes)} per image; this one "
        f"({size_in_words(facts.size)}) does not come under it at a legible size",
    )


def _what_changed(before: ImageFacts, after: ImageFacts) -> str:
    changes = []
    if before.media_type != after.media_type:
        changes.append(f"converted from {before.media_type} to {after.media_type}")
    if (before.width, before.height) != (after.width, after.height):
        changes.append(
            f"resized from {before.width}x{before.height} to {after.width}x{after.height}"
        )
    changes.append(f"{size_in_words(before.size)} → {size_in_words(after.size)}")
    return ", ".join(changes)
