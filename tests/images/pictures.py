"""Images made in memory for the tests: a photo-like noise (compresses badly, as a
camera's does), flat colours, transparency, animation. Deterministic: seeded noise."""

from __future__ import annotations

import io
import random

from PIL import Image


def photo(width: int, height: int, *, fmt: str = "JPEG", quality: int = 95) -> bytes:
    """Noise over a gradient: JPEG cannot squeeze it, as it cannot squeeze a real photo."""
    rng = random.Random(width * 7919 + height)
    noise = rng.randbytes(width * height * 3)
    image = Image.frombytes("RGB", (width, height), noise)
    out = io.BytesIO()
    image.save(out, format=fmt, quality=quality)
    return out.getvalue()


def flat(width: int, height: int, *, fmt: str = "PNG", mode: str = "RGB") -> bytes:
    colour = (10, 120, 200, 128) if mode == "RGBA" else (10, 120, 200)
    out = io.BytesIO()
    Image.new(mode, (width, height), colour[: len(mode)]).save(out, format=fmt)
    return out.getvalue()


def animated_gif(width: int = 64, height: int = 64) -> bytes:
    frames = [Image.new("RGB", (width, height), (80 * i, 0, 0)) for i in range(3)]
    out = io.BytesIO()
    frames[0].save(out, format="GIF", save_all=True, append_images=frames[1:], duration=100)
    return out.getvalue()


def vast_png(width: int, height: int) -> bytes:
    """A PNG of one bit per pixel and one colour: megapixels in a few KB, as a
    decompression bomb is (decoded, each pixel takes a byte or more)."""
    out = io.BytesIO()
    Image.new("1", (width, height)).save(out, format="PNG")
    return out.getvalue()
