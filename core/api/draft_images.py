"""A draft's images added, removed and described by people (docs/design.md §32): each
change is an Edit of the draft's body (`PostBody.with_images`) through `Desk`, so it
writes a new revision and an approval binds to the images and their alt texts.

The revision read is the one edited: a change racing another edit names a revision that
is no longer current and is refused (`Refusal.EDITED`), never written over it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import sqlalchemy as sa
from sqlmodel import col

from core.api.desk import Desk
from core.errors import ImageRefused
from core.images.library import ImageLibrary, Taken
from core.models import DraftRow, EffectRow
from core.policies import EffectStep, ImageSource
from core.post_body import BodyUnreadable, ImageRef, PostBody
from core.review.queue import ReviewAnswer
from core.setup.config import Config
from core.store.engine import Store


class DraftImages:
    def __init__(self, store: Store, config: Config, library: ImageLibrary, desk: Desk) -> None:
        self.store, self.config, self.library, self.desk = store, config, library, desk

    def draft_of_review_message(self, ts: str) -> str | None:
        """The draft whose review message was posted at `ts` (its receipt's proof)."""
        query = sa.select(col(EffectRow.draft_key)).where(
            col(EffectRow.external_id) == ts, col(EffectRow.step) == EffectStep.REVIEW
        )
        with self.store.read() as session:
            found = session.execute(query).first()
        return None if found is None else str(found[0])

    def refused_drop(self, user: str, draft_key: str) -> str | None:
        """Why an image `user` dropped on a draft is not taken, asked before anything is
        downloaded; None when they may edit it."""
        if not self.desk.may_edit(user, draft_key):
            return "you are not one of this Galley's approvers."
        return None

    def add(
        self,
        draft_key: str,
        data: bytes,
        name: str,
        source: ImageSource,
        *,
        user: str,
        alt: str = "",
    ) -> tuple[ReviewAnswer, Taken | None]:
        """The image shaped for the draft's targets, kept, and added to its current
        revision with the person's `alt` text when they gave one (the answer's `Taken`
        carries it); a refusal says why (an image no target takes, a draft not open)."""
        current = self._current(draft_key)
        if current is None:
            return _refused(draft_key, "There is no such draft."), None
        recipe_name, revision, body = current
        recipe = self.config.recipes.get(recipe_name)
        targets = [] if recipe is None else [t.target for t in recipe.targets]
        try:
            taken = self.library.take(data, name, source, targets)
            if alt.strip():  # the person's words, kept as they wrote them
                taken = dataclasses.replace(
                    taken, ref=dataclasses.replace(taken.ref, alt=alt.strip())
                )
        except ImageRefused as exc:
            return _refused(draft_key, f"Image {name} was not added: {exc}."), None
        if any(image.sha256 == taken.ref.sha256 for image in body.images):
            return _refused(draft_key, f"Image {name} is on the draft already."), taken
        images = [*body.images, taken.ref]
        return self._edit(draft_key, revision, body, images, user), taken

    def remove(self, draft_key: str, revision: int, sha256: str, *, user: str) -> ReviewAnswer:
        """The image taken off the revision the person read."""
        current = self._current(draft_key)
        if current is None:
            return _refused(draft_key, "There is no such draft.")
        _, _, body = current
        kept = [image for image in body.images if image.sha256 != sha256]
        return self._edit(draft_key, revision, body, kept, user)

    def describe(
        self, draft_key: str, revision: int, alts: dict[str, str], *, user: str
    ) -> ReviewAnswer:
        """Alt texts set by image hash (Edit's field per image)."""
        current = self._current(draft_key)
        if current is None:
            return _refused(draft_key, "There is no such draft.")
        _, _, body = current
        images = [
            ImageRef(i.sha256, i.name, alts.get(i.sha256, i.alt).strip()) for i in body.images
        ]
        return self._edit(draft_key, revision, body, images, user)

    def edited_body(self, draft_key: str, text: str, alts: dict[str, str] | None) -> str:
        """What an Edit of a draft with images saves: the edited text (one text, or a set
        of versions and parts) with the draft's images kept and their alt texts as
        submitted (`alts`, by hash prefix). A draft with no image keeps the text as sent."""
        current = self._current(draft_key)
        if current is None or not current[2].images:
            return text
        images = [ImageRef(i.sha256, i.name, _submitted(alts, i)) for i in current[2].images]
        return PostBody.parse(text).with_images(images).to_text()

    def editable(self, text: str) -> tuple[str, tuple[ImageRef, ...]]:
        """What the Edit modal shows of a stored body: a draft of one text as that text
        (never its JSON), any other shape as stored (its versions get fields of their
        own), and its images, each with a field for its alt text."""
        try:
            body = PostBody.parse(text)
        except BodyUnreadable:
            return text, ()
        parts = list(body.versions.values())
        if len(parts) == 1 and len(parts[0]) == 1:
            return parts[0][0], body.images
        return text, body.images

    def _edit(
        self,
        draft_key: str,
        revision: int,
        body: PostBody,
        images: Sequence[ImageRef],
        user: str,
    ) -> ReviewAnswer:
        return self.desk.edit(draft_key, body.with_images(images).to_text(), revision, user=user)

    def _current(self, draft_key: str) -> tuple[str, int, PostBody] | None:
        with self.store.read() as session:
            draft = session.get(DraftRow, draft_key)
            if draft is None or draft.text is None:
                return None
            found = (draft.recipe, draft.revision, draft.text)
        try:
            return found[0], found[1], PostBody.parse(found[2])
        except BodyUnreadable:
            return None


def _submitted(alts: dict[str, str] | None, image: ImageRef) -> str:
    if alts is None:
        return image.alt
    return alts.get(image.sha256[:16], image.alt).strip()


def _refused(draft_key: str, message: str) -> ReviewAnswer:
    return ReviewAnswer(False, message, draft_key)
