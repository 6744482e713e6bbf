"""What one revision of a draft says: a version per target, each a thread of parts, and
the images that go with it (docs/design.md §30, §31 and §32).

A draft row keeps one `text` and one `text_hash`, and an approval binds to that hash.
`PostBody.to_text` is that text: the plain post itself when the body is the common
shape (one version for every target, one part, no image), so every draft written
before versions and threads existed reads back unchanged; otherwise a marked,
canonical JSON document. Because the whole body is one text, an approval is of the
exact revision of the whole set: every version, every part, every alt text.

`PostBody.parse` is the only reader of that text, and `to_text` its only writer.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from core.errors import GalleyError

BODY_MARK = "galley-post/1\n"  # first line of a body that is not a plain single text
EVERY_TARGET = "*"  # the version every target without a version of its own gets
PART_SEPARATOR = "\n\n"  # between parts where a thread is shown or compared as one text


class BodyUnreadable(GalleyError):
    """A draft's stored text claims to be a post body and is not one."""


@dataclass(frozen=True)
class ImageRef:
    """One image in a post: its content hash (the key of its bytes and of every upload
    receipt), a name for people, and its alt text ("" until someone or the model writes
    it; a draft with an image without alt text cannot be approved)."""

    sha256: str
    name: str
    alt: str = ""


@dataclass(frozen=True)
class PostBody:
    """Versions keyed by target (`bluesky:acme.bsky.social`) or `EVERY_TARGET`, each a
    tuple of one or more parts (a thread when more than one), and the images."""

    versions: Mapping[str, tuple[str, ...]]
    images: tuple[ImageRef, ...] = field(default=())

    def __post_init__(self) -> None:
        if not self.versions:
            raise BodyUnreadable("a post body needs at least one version")
        for target, parts in self.versions.items():
            if not parts:
                raise BodyUnreadable(f"the version for {target} has no part")

    @classmethod
    def single(cls, text: str) -> PostBody:
        """The common shape: one text for every target."""
        return cls({EVERY_TARGET: (text,)})

    @classmethod
    def parse(cls, text: str) -> PostBody:
        """The body a draft's stored text holds (the inverse of `to_text`)."""
        if not text.startswith(BODY_MARK):
            return cls.single(text)
        try:
            document = json.loads(text[len(BODY_MARK) :])
            versions = {
                str(target): tuple(str(part) for part in parts)
                for target, parts in document["versions"].items()
            }
            images = tuple(
                ImageRef(str(i["sha256"]), str(i["name"]), str(i.get("alt", "")))
                for i in document.get("images", [])
            )
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise BodyUnreadable(f"a stored post body does not parse: {exc}") from exc
        return cls(versions, images)

    def to_text(self) -> str:
        """The stored text: plain for the common shape, else the mark and canonical JSON
        (sorted keys, no spaces), so the same body always has the same hash. A plain text
        that itself begins with the mark (untrusted model output) is stored as JSON, so it
        reads back as the text it is, never as a body it pretends to be."""
        if self.is_single() and not self.versions[EVERY_TARGET][0].startswith(BODY_MARK):
            return self.versions[EVERY_TARGET][0]
        document: dict[str, Any] = {
            "versions": {target: list(parts) for target, parts in self.versions.items()}
        }
        if self.images:
            document["images"] = [
                {"sha256": i.sha256, "name": i.name, "alt": i.alt} for i in self.images
            ]
        return BODY_MARK + json.dumps(
            document, sort_keys=True, separators=(",", ":"), ensure_ascii=False
        )

    def is_single(self) -> bool:
        """One text for every target, one part, no image: today's plain draft."""
        return (
            not self.images
            and set(self.versions) == {EVERY_TARGET}
            and len(self.versions[EVERY_TARGET]) == 1
        )

    def parts_for(self, target: str) -> tuple[str, ...]:
        """What `target` publishes: its own version, else the one for every target."""
        parts = self.versions.get(target) or self.versions.get(EVERY_TARGET)
        if parts is None:
            raise BodyUnreadable(f"the draft has no version for {target}")
        return parts

    def readable(self) -> str:
        """Every part of every version as one plain text, for comparing drafts (near-
        duplicates) and for logs: versions in a stable order, parts blank-line apart."""
        return PART_SEPARATOR.join(
            PART_SEPARATOR.join(self.versions[target]) for target in sorted(self.versions)
        )

    def labelled_parts(self) -> list[tuple[str, str]]:
        """Every part with the words that place it, in stored order: the version's key
        (`*` for every target), then "2/3" when its version is a thread. What people and
        a redraft's model read of a set."""
        return [
            (key if len(parts) == 1 else f"{key} {n}/{len(parts)}", part)
            for key, parts in self.versions.items()
            for n, part in enumerate(parts, 1)
        ]

    def with_versions(self, versions: Mapping[str, Sequence[str]]) -> PostBody:
        """The same images with new texts (an edit, a redraft)."""
        return PostBody({t: tuple(parts) for t, parts in versions.items()}, self.images)

    def with_images(self, images: Sequence[ImageRef]) -> PostBody:
        """The same texts with these images (an image added, removed, or its alt edited)."""
        return PostBody(self.versions, tuple(images))
