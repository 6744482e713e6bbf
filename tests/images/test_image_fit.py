"""A draft's images are checked at review (docs/design.md §32): an image without alt
text, more images than a target takes, or an image a target would refuse cannot be
approved, and the refusal says why. Bytes are kept once by their hash, shaped for the
recipe's targets before anyone sees them, so what is approved is what is sent."""

from __future__ import annotations

from dataclasses import replace

import pytest
import sqlalchemy as sa

from core.errors import ImageRefused
from core.images.limits import ImageFacts
from core.images.review_fit import image_problems
from core.models import ImageRow
from core.policies import ImageProblem, ImageSource
from core.post_body import ImageRef, PostBody
from core.states import DraftState
from tests.fakes.anthropic_api import FakeAnthropic, ok
from tests.harness.worlds import MakeWorld
from tests.images.pictures import photo

TARGETS = (
    'publish = [{ to = "bluesky", handle = "acme.bsky.social", service = "http://127.0.0.1:9" },'
    ' { to = "linkedin", author = "urn:li:organization:1", api = "http://127.0.0.1:9" }]'
)
BLUESKY, LINKEDIN = "bluesky:acme.bsky.social", "linkedin:urn:li:organization:1"
TEXT = "A week of shipping."
JPEG_FACTS = ImageFacts("image/jpeg", 1200, 800, 400_000)


def test_an_image_without_alt_text_is_named_in_the_refusal() -> None:
    images = [ImageRef("a" * 64, "chart.png", alt="Sales by week"), ImageRef("b" * 64, "me.jpg")]
    facts = {"a" * 64: JPEG_FACTS, "b" * 64: JPEG_FACTS}
    assert image_problems(images, [BLUESKY], facts) == [
        "Image me.jpg has no alt text: add it with Edit before approving."
    ]


def test_more_images_than_a_target_takes_and_bytes_over_its_limit_are_refused() -> None:
    images = [ImageRef(c * 64, f"{c}.jpg", alt="x") for c in "ab"]
    big = ImageFacts("image/jpeg", 1200, 800, 2_000_000)
    problems = image_problems(images, [BLUESKY, LINKEDIN], {"a" * 64: JPEG_FACTS, "b" * 64: big})
    assert problems == [
        "Image b.jpg cannot go to Bluesky: 2.0 MB is over its 1.0 MB.",
        "Too many images for LinkedIn: 2/1. Remove some before approving.",
    ]
    assert image_problems([], [BLUESKY], {}) == []


def test_a_discord_target_takes_ten_images_with_alt_text_up_to_1024() -> None:
    images = [ImageRef("a" * 64, f"{n}.jpg", alt="x" * 1025) for n in range(11)]
    problems = image_problems(images, ["discord:1250000000000000001"], {"a" * 64: JPEG_FACTS})
    assert problems[0] == "Too many images for Discord: 11/10. Remove some before approving."
    assert problems[1] == "Alt text of 0.jpg is too long for Discord: 1025/1024."
    fitting = [replace(image, alt="x" * 1024) for image in images[:10]]
    assert image_problems(fitting, ["discord:1250000000000000001"], {"a" * 64: JPEG_FACTS}) == []


def test_a_12_mb_photo_is_resized_under_every_targets_limit_and_kept_once(
    db_url: str, worlds: MakeWorld
) -> None:
    world = worlds(db_url, publish=TARGETS)
    data = photo(3700, 2800)
    assert len(data) > 11_000_000
    taken = world.core.images.take(data, "photo.jpg", ImageSource.SLACK_FILE, [BLUESKY, LINKEDIN])
    again = world.core.images.take(data, "photo.jpg", ImageSource.SLACK_FILE, [BLUESKY, LINKEDIN])
    assert again.ref == taken.ref
    assert taken.facts.size <= 1_000_000 and taken.facts.width >= 640
    stored = world.core.images.get(taken.ref.sha256)
    assert stored is not None and stored.facts == taken.facts
    with world.store.read() as session:
        assert session.execute(sa.select(sa.func.count()).select_from(ImageRow)).scalar() == 1


def test_bytes_that_are_no_image_are_refused_before_anything_is_stored(
    db_url: str, worlds: MakeWorld
) -> None:
    world = worlds(db_url, publish=TARGETS)
    with pytest.raises(ImageRefused) as refused:
        world.core.images.take(b"%PDF-1.7", "report.pdf", ImageSource.SLACK_FILE, [BLUESKY])
    assert refused.value.problem == ImageProblem.UNREADABLE
    assert world.core.images.facts(["0" * 64]) == {}


def test_alt_text_is_required_before_approval_and_the_approval_binds_to_it(
    db_url: str, worlds: MakeWorld, fake_anthropic: FakeAnthropic
) -> None:
    world = worlds(db_url, publish=TARGETS)
    fake_anthropic.script(ok(text=TEXT))
    key = world.draft()
    taken = world.core.images.take(
        photo(2000, 1500), "photo.jpg", ImageSource.SLACK_FILE, [BLUESKY, LINKEDIN]
    )
    without_alt = PostBody.single(TEXT).with_images([taken.ref]).to_text()
    assert world.galley.edit(key, without_alt, revision=1, user="U0EDITOR").accepted
    refused = world.galley.approve(key, revision=2, user="U0EDITOR")
    assert not refused.accepted
    assert refused.message == "Image photo.jpg has no alt text: add it with Edit before approving."
    assert world.draft_row(key).state == DraftState.READY
    described = PostBody.parse(without_alt).with_images(
        [ImageRef(taken.ref.sha256, "photo.jpg", "The team at the launch")]
    )
    assert world.galley.edit(key, described.to_text(), revision=2, user="U0EDITOR").accepted
    assert world.galley.approve(key, revision=3, user="U0EDITOR").accepted
    row = world.draft_row(key)
    assert row.state == DraftState.APPROVED
    assert PostBody.parse(row.text or "").images[0].alt == "The team at the launch"
