"""The stored text of a draft and the body it holds: one writer, one reader."""

from __future__ import annotations

import pytest

from core.post_body import BODY_MARK, BodyUnreadable, ImageRef, PostBody


def test_a_plain_draft_is_stored_as_its_own_text_and_reads_back_the_same() -> None:
    body = PostBody.single("Release 2.1 is out.")
    assert body.to_text() == "Release 2.1 is out."
    assert PostBody.parse("Release 2.1 is out.") == body
    assert body.parts_for("bluesky:acme.bsky.social") == ("Release 2.1 is out.",)


def test_versions_threads_and_images_round_trip_through_one_canonical_text() -> None:
    body = PostBody(
        {"linkedin:urn:li:organization:1": ("long form",), "bluesky:a": ("one", "two")},
        (ImageRef("ab" * 32, "chart.png", "A rising line"),),
    )
    text = body.to_text()
    assert text.startswith(BODY_MARK)
    assert PostBody.parse(text) == body
    reordered = PostBody(dict(reversed(list(body.versions.items()))), body.images)
    assert reordered.to_text() == text  # the same body, the same hash
    assert body.parts_for("bluesky:a") == ("one", "two")
    with pytest.raises(BodyUnreadable):
        body.parts_for("mastodon:m")


def test_a_target_without_a_version_of_its_own_takes_the_one_for_every_target() -> None:
    body = PostBody({"*": ("all",), "bluesky:a": ("short",)})
    assert body.parts_for("mastodon:m") == ("all",)
    assert body.parts_for("bluesky:a") == ("short",)


def test_an_image_alone_makes_the_body_structured_so_its_alt_text_is_approved_too() -> None:
    plain = PostBody.single("text")
    with_image = plain.with_images([ImageRef("cd" * 32, "a.png", "")])
    assert with_image.to_text() != plain.to_text()
    edited = with_image.with_images([ImageRef("cd" * 32, "a.png", "A cat")])
    assert edited.to_text() != with_image.to_text()


@pytest.mark.parametrize(
    "stored",
    [BODY_MARK + "not json", BODY_MARK + '{"versions": {}}', BODY_MARK + '{"versions": {"*": []}}'],
)
def test_a_marked_text_that_is_not_a_body_is_refused_by_name(stored: str) -> None:
    with pytest.raises(BodyUnreadable):
        PostBody.parse(stored)
