"""An image is made to fit a platform's limits (docs/design.md §32): converted when the
platform does not take its format, scaled down when it is too big, refused with the
reason when it would fit only too small to read or cannot be converted."""

from __future__ import annotations

from typing import Any

import pytest
from PIL import Image, ImageFile

from core.errors import ImageRefused
from core.images.limits import JPEG, LIMITS, PNG, strictest
from core.images.shaping import LEGIBLE_LONG_SIDE, MAX_DECODED_PIXELS, probe, shape
from core.policies import ImageProblem
from tests.images.pictures import animated_gif, flat, photo, vast_png

BLUESKY, MASTODON, LINKEDIN = LIMITS["bluesky"], LIMITS["mastodon"], LIMITS["linkedin"]


def test_an_image_that_fits_is_kept_byte_for_byte() -> None:
    data = flat(800, 600)
    shaped = shape(data, BLUESKY)
    assert shaped.data == data and shaped.changed == ""
    assert (shaped.facts.media_type, shaped.facts.width, shaped.facts.height) == (PNG, 800, 600)


def test_a_photo_over_blueskys_blob_limit_is_resized_under_it_and_stays_legible() -> None:
    data = photo(1600, 1200)
    assert len(data) > BLUESKY.max_bytes  # ~3 MB of noise
    shaped = shape(data, BLUESKY)
    assert shaped.facts.size <= BLUESKY.max_bytes
    assert shaped.facts.media_type == JPEG
    assert LEGIBLE_LONG_SIDE <= shaped.facts.width < 1600
    assert "resized from 1600x1200" in shaped.changed


def test_a_format_the_platform_does_not_take_is_converted() -> None:
    shaped = shape(flat(300, 200, fmt="BMP"), BLUESKY)
    assert shaped.facts.media_type == JPEG
    assert "converted from image/bmp to image/jpeg" in shaped.changed
    see_through = shape(flat(300, 200, fmt="TIFF", mode="RGBA"), LINKEDIN)
    assert see_through.facts.media_type == PNG  # transparency kept where PNG is taken


def test_an_animation_the_platform_does_not_take_is_refused_not_cut_to_one_frame() -> None:
    with pytest.raises(ImageRefused) as refused:
        shape(animated_gif(), BLUESKY)
    assert refused.value.problem == ImageProblem.FORMAT
    assert shape(animated_gif(), MASTODON).facts.media_type == "image/gif"  # taken as it is


def test_an_image_that_fits_only_below_a_legible_size_is_refused_with_the_reason() -> None:
    tiny_limit = BLUESKY.__class__("bluesky", "Bluesky", 4, 20_000, BLUESKY.media_types)
    with pytest.raises(ImageRefused) as refused:
        shape(photo(1000, 800), tiny_limit)
    assert refused.value.problem == ImageProblem.TOO_BIG
    assert "too small to read" in str(refused.value)


def test_bytes_that_are_no_image_are_refused_as_unreadable() -> None:
    with pytest.raises(ImageRefused) as refused:
        probe(b"<html>not a picture</html>")
    assert refused.value.problem == ImageProblem.UNREADABLE


@pytest.fixture
def decodes(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """The size of every image Pillow is asked to decode."""
    decoded: list[tuple[int, int]] = []
    load = ImageFile.ImageFile.load

    def recorded(image: ImageFile.ImageFile) -> Any:
        decoded.append(image.size)
        return load(image)

    monkeypatch.setattr(ImageFile.ImageFile, "load", recorded)
    return decoded


@pytest.mark.parametrize(
    ("width", "height"),
    [(12000, 12000), (10001, 10000)],
    ids=["144 Mpx in a few KB", "just over the limit, where Pillow only warned"],
)
def test_an_image_over_the_pixel_limit_is_refused_from_its_header_without_decoding(
    width: int, height: int, decodes: list[tuple[int, int]]
) -> None:
    data = vast_png(width, height)
    assert len(data) < 100_000 and width * height > MAX_DECODED_PIXELS
    for read in (probe, lambda data: shape(data, MASTODON)):
        with pytest.raises(ImageRefused) as refused:
            read(data)
        assert refused.value.problem == ImageProblem.TOO_BIG
        assert "over Galley's limit of 100,000,000 pixels: not decoded" in str(refused.value)
    assert decodes == []


def test_the_pixel_limit_holds_where_pillow_does_not_check_sizes_itself(
    decodes: list[tuple[int, int]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pillow's own check is a global any import may turn off: Galley reads the header."""
    monkeypatch.setattr(Image, "_decompression_bomb_check", lambda *args, **kwargs: None)
    with pytest.raises(ImageRefused) as refused:
        probe(vast_png(10001, 10000))
    assert str(refused.value) == (
        "the image (10001x10000) is over Galley's limit of 100,000,000 pixels: not decoded"
    )
    assert decodes == []


def test_the_strictest_limits_of_several_targets_are_what_all_of_them_take() -> None:
    both = strictest([MASTODON, LINKEDIN, BLUESKY])
    assert both is not None
    assert (both.max_count, both.max_bytes) == (1, 1_000_000)
    assert both.media_types == frozenset({JPEG, PNG})
    assert both.max_pixels == LINKEDIN.max_pixels
