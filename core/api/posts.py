"""A person's post checked before it is added (docs/design.md §37): its recipe known, its
time readable and ahead, a version only for the recipe's own targets, each version within
its target's limit (the fit rule every Approve reads). `galley post`, `g.post(...)` and
`/galley post` all come here; `core/api/plans.py` checks a plan's rows the same way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo

from core.drafting.fit import FitRule, refusal
from core.identity import post_content_id, post_run_id
from core.post_body import EVERY_TARGET, ImageRef, PostBody
from core.review.person_posts import PlannedPost, PostRefused, Written, write_posts
from core.setup.config import Config, Recipe

if TYPE_CHECKING:
    from core.api.services import Services


@dataclass(frozen=True)
class PostDraft:
    """What a person wrote: the recipe, the text for every target, a text of its own for
    some targets, an optional time and id, and images already kept (by hash)."""

    recipe: str
    text: str
    targets: Mapping[str, str]
    at: str | datetime | None = None
    post_id: str | None = None
    images: Sequence[ImageRef] = ()


def parse_time(at: str | datetime, zone: ZoneInfo, now: datetime) -> datetime | str:
    """An ISO time (a time without an offset is the recipe's zone's wall time), aware; or
    why it is refused: unreadable, or already past."""
    if isinstance(at, str):
        try:
            at = datetime.fromisoformat(at.strip())
        except ValueError:
            return f"time {at!r} is not an ISO time (2026-12-08T09:00 or with an offset)"
    if at.tzinfo is None:
        at = at.replace(tzinfo=zone)
    if at <= now:
        return f"time {at.isoformat()} has passed"
    return at


def plan_post(
    config: Config, fits: FitRule, draft: PostDraft, now: datetime
) -> PlannedPost | list[str]:
    """The post ready to add, or every reason it cannot be (one line each)."""
    recipe = config.recipes.get(draft.recipe)
    if recipe is None:
        return [f"unknown recipe {draft.recipe!r}"]
    problems: list[str] = []
    at: datetime | str | None = None
    if draft.at is not None and draft.at != "":
        at = parse_time(draft.at, recipe.zone, now)
    if isinstance(at, str):
        problems.append(at)
        at = None
    if not draft.text.strip():
        problems.append("the post has no text")
    known = {target.target for target in recipe.targets}
    problems += [f"{t} is not a target of {recipe.name}" for t in draft.targets if t not in known]
    body = _body(draft)
    over = refusal(fits.measure(recipe, body.to_text()))
    if over:
        problems.append(over)
    if problems:
        return problems
    return PlannedPost(_run_id(recipe, draft, at), recipe.name, body.to_text(), at)


def planned_or_refused(
    config: Config, fits: FitRule, draft: PostDraft, now: datetime
) -> PlannedPost:
    """`plan_post`, its refusal raised as one `PostRefused` naming every reason."""
    planned = plan_post(config, fits, draft, now)
    if isinstance(planned, list):
        raise PostRefused("; ".join(planned))
    return planned


def _body(draft: PostDraft) -> PostBody:
    versions = {EVERY_TARGET: (draft.text,)}
    versions |= {target: (text,) for target, text in draft.targets.items()}
    return PostBody(versions, tuple(draft.images))


def _run_id(recipe: Recipe, draft: PostDraft, at: datetime | None) -> str:
    """The person's id when they gave one, else the hash of the post's content."""
    if draft.post_id:
        return post_run_id(recipe.name, draft.post_id)
    when = "" if at is None else at.isoformat()
    versions = {EVERY_TARGET: draft.text, **draft.targets}
    image = ",".join(i.sha256 for i in draft.images)
    alt = ",".join(i.alt for i in draft.images)
    return post_run_id(recipe.name, post_content_id(recipe.name, when, versions, image, alt))


def write_post(services: Services, draft: PostDraft, *, actor: str) -> Written:
    """One post checked and added as `actor` wrote it (`PostRefused` otherwise): the one
    operation behind `g.post`, `galley post` and `/galley post`."""
    now = services.clock.now()
    planned = planned_or_refused(services.config, services.fits, draft, now)
    return write_posts(services.store, services.config, [planned], actor=actor, now=now)
