"""Why a draft's images cannot be approved as they are (docs/design.md §32): an image
without alt text, more images than a target takes, an image a target would refuse (its
size, pixels or format). One rule, read by `core/drafting/fit.py` `FitRule`, so the
review message and every Approve say the same. It measures; it never changes an image.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from core.images.limits import ImageFacts, ImageLimits, limits_for, size_in_words
from core.post_body import ImageRef


def image_problems(
    images: Sequence[ImageRef], targets: Sequence[str], facts: Mapping[str, ImageFacts]
) -> list[str]:
    """One line per problem, in words for people; empty when every image may go."""
    if not images:
        return []
    problems = [_no_alt(image) for image in images if not image.alt.strip()]
    for target in targets:
        limits = limits_for(target)
        if limits is not None:
            problems.extend(_against(images, limits, facts))
    return list(dict.fromkeys(problems))  # two targets of one platform say it once


def _no_alt(image: ImageRef) -> str:
    return f"Image {image.name} has no alt text: add it with Edit before approving."


def _against(
    images: Sequence[ImageRef], limits: ImageLimits, facts: Mapping[str, ImageFacts]
) -> list[str]:
    if limits.refused is not None:
        return [f"{len(images)} image(s) cannot go to {limits.label}: {limits.refused}."]
    problems = []
    if limits.max_count == 0:
        return [
            f"{limits.label} takes no images: {limits.no_images_because}. "
            "Remove them before approving, or publish the image elsewhere."
        ]
    if len(images) > limits.max_count:
        problems.append(
            f"Too many images for {limits.label}: {len(images)}/{limits.max_count}. "
            "Remove some before approving."
        )
    for image in images:
        found = facts.get(image.sha256)
        why = _refused_by(found, limits) if found else "its bytes are not stored"
        if why:
            problems.append(f"Image {image.name} cannot go to {limits.label}: {why}.")
        if limits.max_alt is not None and len(image.alt) > limits.max_alt:
            problems.append(
                f"Alt text of {image.name} is too long for {limits.label}: "
                f"{len(image.alt)}/{limits.max_alt}."
            )
    return problems


def _refused_by(facts: ImageFacts, limits: ImageLimits) -> str | None:
    if facts.media_type not in limits.media_types:
        return f"it does not take {facts.media_type}"
    if facts.size > limits.max_bytes:
        return f"{size_in_words(facts.size)} is over its {size_in_words(limits.max_bytes)}"
    if limits.max_pixels is not None and facts.width * facts.height > limits.max_pixels:
        return f"{facts.width}x{facts.height} is over its {limits.max_pixels:,} pixels"
    return None
