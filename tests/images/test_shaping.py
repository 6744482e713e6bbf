"""An image is made to fit a platform's limits (docs/design.md §32): converted when the
platform does not take its format, scaled down when it is too big, refused with the
reason when it would fit only too small to read or cannot be converted."""

from __future__ import annotations

import pytest

from core.errors import ImageRefused
from core.images.limits import JPEG, LIMITS, PNG, strictest
from core.images.shaping import LEGIBLE_LONG_SIDE, probe, shape
from core.policies import ImageProblem
from tests.images.pictures import animated_gif, flat, photo

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


def test_the_strictest_limits_of_several_targets_are_what_all_of_them_take() -> None:
    both = strictest([MASTODON, LINKEDIN, BLUESKY])
    assert both is not None
    assert (both.max_count, both.max_bytes) == (1, 1_000_000)
    assert both.media_types == frozenset({JPEG, PNG})
    assert both.max_pixels == LINKEDIN.max_pixels
