"""The facts a reviewer decides on, added to each review message on its way out: how
much the draft reads like one people already saw, and how the recipe's drafts fared
with reviewers lately (approval rate over 30 days, the last rejection and its reason).

`AnnotatedReviewSurface` wraps any `ReviewSurface`; the outbox posts and updates
through it, so a draft made anywhere reaches people with its facts. Read-only; knows
nothing of Slack markup: the adapter renders the facts.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta

import sqlalchemy as sa
from sqlmodel import Session, col, select

from core.drafting.fit import FitRule
from core.drafting.similarity import similar_post
from core.images.library import image_facts
from core.models import DraftRow
from core.ports import (
    BackpressureNotice,
    BasisItem,
    Clock,
    DraftBasis,
    MessageRef,
    RecipeRecord,
    ReviewItem,
    ReviewSurface,
    ShownImage,
)
from core.post_body import BodyUnreadable, PostBody
from core.publishing.targets import published_links
from core.review.approvals import approval_progress
from core.review.redraft_claims import redraft_note
from core.setup.config import SIMILAR_WARN_DEFAULT, Config
from core.slots.publish_time import with_publication
from core.sources.snapshot import stored_snapshot
from core.states import DRAFT_APPROVED_STATES, DRAFT_DECIDED_STATES, DraftState
from core.store.engine import Store

RECORD_DAYS = 30


def recipe_record(
    session: Session, recipe: str, now: datetime, days: int = RECORD_DAYS
) -> RecipeRecord:
    """Drafts of `recipe` decided in the last `days` (by the time they reached their
    state), and its latest rejection at any time. Reads ix_drafts_recipe_state_updated."""
    counts = dict(
        session.execute(
            sa.select(col(DraftRow.state), sa.func.count())
            .where(
                col(DraftRow.recipe) == recipe,
                col(DraftRow.state).in_(DRAFT_DECIDED_STATES),
                col(DraftRow.updated_at) >= now - timedelta(days=days),
            )
            .group_by(col(DraftRow.state))
        ).all()
    )
    last = session.exec(
        select(DraftRow)
        .where(col(DraftRow.recipe) == recipe, col(DraftRow.state) == DraftState.REJECTED)
        .order_by(col(DraftRow.updated_at).desc())
        .limit(1)
    ).first()
    return RecipeRecord(
        recipe=recipe,
        days=days,
        approved=sum(counts.get(state, 0) for state in DRAFT_APPROVED_STATES),
        decided=sum(counts.values()),
        last_rejected_at=last.updated_at if last else None,
        last_rejection_reason=last.decision_reason if last else None,
    )


def annotate(
    store: Store, config: Config, now: datetime, item: ReviewItem, fits: FitRule | None = None
) -> ReviewItem:
    """`item` with its near-duplicate (when at or above the recipe's `similar_warn`) and
    its recipe's record. Only drafts waiting for a decision carry them; approvals and the
    redraft that made the current revision are shown once decided too (who approved); a
    decided one carries where it was published, from its receipts, and an approved one
    waiting for its slot its publication time (docs/design.md §23)."""
    item = _with_basis(store, config, _reviewer_loop(store, config, item))
    if item.state != DraftState.READY:
        with store.read() as session:
            links = published_links(session, [item.draft_key]).get(item.draft_key, [])
        item = dataclasses.replace(item, published=tuple(links))
        return with_publication(config.recipes, item)
    recipe = config.recipes.get(item.recipe)
    warn = recipe.similar_warn if recipe else SIMILAR_WARN_DEFAULT
    with store.transaction() as session:
        draft = session.get(DraftRow, item.draft_key)
        similar = similar_post(session, draft, warn) if draft else None
        record = recipe_record(session, item.recipe, now)
    measured = () if fits is None or recipe is None else fits.measure(recipe, item.text)
    problems = () if fits is None or recipe is None else fits.image_refusals(recipe, item.text)
    return dataclasses.replace(
        _with_images(store, item),
        similar=similar,
        record=record,
        fits=measured,
        image_problems=tuple(problems),
    )


def _with_images(store: Store, item: ReviewItem) -> ReviewItem:
    """Each image of the draft with its stored size (docs/design.md §32)."""
    try:
        images = PostBody.parse(item.text).images
    except BodyUnreadable:
        return item
    if not images:
        return item
    facts = image_facts(store, [image.sha256 for image in images])
    shown = tuple(
        ShownImage(
            i.sha256,
            i.name,
            i.alt,
            facts[i.sha256].size if i.sha256 in facts else None,
            facts[i.sha256].width if i.sha256 in facts else 0,
            facts[i.sha256].height if i.sha256 in facts else 0,
        )
        for i in images
    )
    return dataclasses.replace(item, images=shown)


def _with_basis(store: Store, config: Config, item: ReviewItem) -> ReviewItem:
    """The items the draft was written from, when its recipe has sources (docs/design.md §27)."""
    recipe = config.recipes.get(item.recipe)
    if recipe is None or not recipe.sources:
        return item
    with store.read() as session:
        snapshot = stored_snapshot(session, item.run_id)
    if snapshot is None:
        return item
    basis = DraftBasis(
        items=tuple(BasisItem(i.title, i.link) for i in snapshot.items),
        left_out=tuple(gone.source for gone in snapshot.left_out),
        image_notes=tuple(i.image.note for i in snapshot.items if i.image and i.image.note),
        closed_at=snapshot.closed_before_read(),
    )
    return dataclasses.replace(item, basis=basis)


def _reviewer_loop(store: Store, config: Config, item: ReviewItem) -> ReviewItem:
    """Approvals of the current revision (where more than one is needed, or several
    people approved), and the reviewer's redraft that wrote it (docs/design.md §22)."""
    with store.read() as session:
        draft = session.get(DraftRow, item.draft_key)
        if draft is None or draft.revision != item.revision:
            return item
        progress = approval_progress(session, config, draft)
        note = redraft_note(session, draft.key, draft.revision)
    several = progress.required > 1 or len(progress.approvers) > 1 or progress.stages > 1
    shown = progress if several else None
    return dataclasses.replace(item, approvals=shown, redrafted=note)


class AnnotatedReviewSurface:
    """A `ReviewSurface` whose review messages carry the facts above."""

    def __init__(
        self,
        surface: ReviewSurface,
        store: Store,
        config: Config,
        clock: Clock,
        fits: FitRule | None = None,
    ) -> None:
        self.surface, self.store, self.config, self.clock = surface, store, config, clock
        self.fits = fits  # each target's count against its limit, on waiting drafts

    def post_review(self, item: ReviewItem) -> MessageRef:
        return self.surface.post_review(self._annotated(item))

    def update_review(self, ref: MessageRef, item: ReviewItem) -> None:
        self.surface.update_review(ref, self._annotated(item))

    def find_review(self, draft_key: str) -> MessageRef | None:
        return self.surface.find_review(draft_key)

    def announce(self, notice: BackpressureNotice) -> MessageRef:
        return self.surface.announce(notice)

    def _annotated(self, item: ReviewItem) -> ReviewItem:
        return annotate(self.store, self.config, self.clock.now(), item, self.fits)
