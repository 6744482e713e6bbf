"""Image bytes kept once by their content hash (the `images` table, docs/design.md §32).

`take` shapes an image to the targets it is meant for (the strictest of their limits)
and stores the result under the hash of the bytes kept, so the bytes a reviewer approves
are the bytes every target is sent, and a second `take` of the same bytes stores nothing
new. It never uploads anything; `core/images/uploads.py` does, once per target.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import sqlalchemy as sa
from sqlmodel import col

from core.errors import ImageRefused
from core.images.limits import ImageFacts, ImageLimits, limits_for, strictest
from core.models import ImageRow
from core.policies import ImageProblem, ImageSource
from core.ports import Clock
from core.post_body import ImageRef
from core.store.engine import Store, insert_ignore

if TYPE_CHECKING:
    from core.images.shaping import Shaped


@dataclass(frozen=True)
class StoredImage:
    """An image as kept: its hash, what it is, and its bytes."""

    sha256: str
    facts: ImageFacts
    data: bytes
    source: ImageSource


@dataclass(frozen=True)
class Taken:
    """An image kept for a draft: the reference its body holds, what it is, and what
    shaping did to it ("" when nothing)."""

    ref: ImageRef
    facts: ImageFacts
    changed: str


class ImageLibrary:
    def __init__(self, store: Store, clock: Clock) -> None:
        self.store, self.clock = store, clock

    def take(
        self,
        data: bytes,
        name: str,
        source: ImageSource,
        targets: Sequence[str],
        alt: str = "",
    ) -> Taken:
        """`data` shaped for every target that takes images and kept once by hash;
        `ImageRefused` with the reason when it cannot be made to fit them all."""
        return self.keep(shape_for(data, targets), name, source, alt)

    def keep(self, shaped: Shaped, name: str, source: ImageSource, alt: str = "") -> Taken:
        """An image already shaped (`shape_for`) kept once by hash: a plan's images are all
        shaped while its rows are checked, and kept only once every row passed."""
        digest = hashlib.sha256(shaped.data).hexdigest()
        with self.store.transaction() as session:
            insert_ignore(
                session,
                ImageRow,
                sha256=digest,
                media_type=shaped.facts.media_type,
                size=shaped.facts.size,
                width=shaped.facts.width,
                height=shaped.facts.height,
                data=shaped.data,
                source=source.value,
                created_at=self.clock.now(),
            )
        return Taken(ImageRef(digest, name, alt), shaped.facts, shaped.changed)

    def get(self, sha256: str) -> StoredImage | None:
        with self.store.read() as session:
            row = session.get(ImageRow, sha256)
            if row is None:
                return None
            facts = ImageFacts(row.media_type, row.width, row.height, row.size)
            return StoredImage(row.sha256, facts, bytes(row.data), ImageSource(row.source))

    def facts(self, sha256s: Sequence[str]) -> dict[str, ImageFacts]:
        """What each stored image is, without its bytes (the review's fit lines)."""
        return image_facts(self.store, sha256s)


def image_facts(store: Store, sha256s: Sequence[str]) -> dict[str, ImageFacts]:
    """What each stored image is, by hash, without reading its bytes."""
    if not sha256s:
        return {}
    columns = ("sha256", "media_type", "width", "height", "size")
    query = sa.select(*(col(getattr(ImageRow, name)) for name in columns)).where(
        col(ImageRow.sha256).in_(list(sha256s))
    )
    with store.read() as session:
        return {
            str(sha): ImageFacts(str(media_type), int(width), int(height), int(size))
            for sha, media_type, width, height, size in session.execute(query)
        }


def shape_for(data: bytes, targets: Sequence[str]) -> Shaped:
    """`data` shaped to the strictest limits of `targets`; `ImageRefused` otherwise."""
    from core.images.shaping import shape  # Pillow, imported by whoever takes an image

    every = [lim for lim in map(limits_for, targets) if lim is not None and lim.refused is None]
    limits = strictest(every) or _ANY_TARGET
    if not limits.media_types:
        raise ImageRefused(
            ImageProblem.FORMAT, f"{limits.label} share no image format: post them separately"
        )
    return shape(data, limits)


# A recipe with no target that takes images (a webhook, or none): kept within Bluesky's
# limit, the tightest, so adding a target later rarely refuses it.
_ANY_TARGET: ImageLimits = limits_for("bluesky")  # type: ignore[assignment]
