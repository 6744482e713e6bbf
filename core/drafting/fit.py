"""Whether a draft fits each target of its recipe (docs/design.md §24): one rule, read by
the review message (each target's count), by every Approve (Slack, CLI, notebook: all
through `core/review/queue.py` `decide`) and by the model's request (the tightest limit).
It measures; it never sends, and a destination that cannot be measured is skipped.
A draft with a version per target or a thread (docs/design.md §30) is measured per
version and per part: each part is a post of its own where it is published.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from core.identity import text_hash
from core.images.limits import ImageFacts
from core.images.review_fit import image_problems
from core.ports import Fit, Publisher
from core.post_body import EVERY_TARGET, BodyUnreadable, PostBody
from core.setup.config import Config, Recipe
from core.store.engine import Store
from core.store.rows import draft_row

PublishersFor = Callable[[Recipe], Sequence[Publisher]]
ImageFactsOf = Callable[[Sequence[str]], Mapping[str, ImageFacts]]


def _no_images_stored(sha256s: Sequence[str]) -> Mapping[str, ImageFacts]:
    return {}


@dataclass(frozen=True)
class Measured:
    """A draft's text as measured before a decision (`text_hash`), and why it cannot be
    approved (`reason`, None when it fits every target). The decision's transaction
    compares the hash with the draft's: a text changed since was not the one measured."""

    text_hash: str
    reason: str | None


class FitRule:
    """Measures texts against a recipe's targets through their publishers' `fit`."""

    def __init__(
        self, publishers_for: PublishersFor, image_facts: ImageFactsOf = _no_images_stored
    ) -> None:
        self.publishers_for = publishers_for
        self.image_facts = image_facts  # the stored images' facts (core/images/library.py)

    def measure(self, recipe: Recipe, text: str) -> tuple[Fit, ...]:
        """Each target's count against its limit, in the recipe's order, one per part of
        the target's own version (labelled "part 2/3" in a thread); targets with no limit
        (a webhook) or no version of their own (see `missing`) are left out."""
        body = PostBody.parse(text)
        fits: list[Fit] = []
        for publisher in self.publishers_for(recipe):
            if not body_reaches(body, publisher.target):
                continue
            parts = body.parts_for(publisher.target)
            for number, part in enumerate(parts, 1):
                fit = publisher.fit(part)
                if fit is None:
                    break
                label = f"{fit.label}, part {number}/{len(parts)}"
                fits.append(fit if len(parts) == 1 else replace(fit, label=label))
        return tuple(fits)

    def missing(self, recipe: Recipe, text: str) -> list[str]:
        """The recipe's targets the draft has no version for (a target added since)."""
        body = PostBody.parse(text)
        targets = (publisher.target for publisher in self.publishers_for(recipe))
        return [target for target in targets if not body_reaches(body, target)]

    def check(self, recipe: Recipe, text: str) -> Measured:
        """`text` measured against every target, its images too (docs/design.md §32): why
        it cannot be approved, if it cannot."""
        missing = self.missing(recipe, text)
        if missing:
            why = f"No version for {', '.join(missing)}. Redraft it to write one."
            return Measured(text_hash(text), why)
        reasons = [refusal(self.measure(recipe, text)), *self.image_refusals(recipe, text)]
        found = [reason for reason in reasons if reason]
        return Measured(text_hash(text), " ".join(found) if found else None)

    def image_refusals(self, recipe: Recipe, text: str) -> list[str]:
        """Why the images of the body `text` holds cannot be approved (none, alt text
        missing, too many or too big for a target)."""
        try:
            images = PostBody.parse(text).images
        except BodyUnreadable as exc:
            return [str(exc)]
        if not images:
            return []
        targets = [publisher.target for publisher in self.publishers_for(recipe)]
        return image_problems(images, targets, self.image_facts([i.sha256 for i in images]))

    def check_draft(self, store: Store, config: Config, draft_key: str) -> Measured | None:
        """The draft's current text checked (read in its own short transaction: measuring
        may ask a destination for its limit); None when there is no draft or recipe."""
        with store.read() as session:
            draft = draft_row(session, draft_key)
            found = None if draft is None else (draft.recipe, draft.text or "")
        recipe = None if found is None else config.recipes.get(found[0])
        if found is None or recipe is None:
            return None
        return self.check(recipe, found[1])

    def limits(self, recipe: Recipe) -> tuple[Fit, ...]:
        """Each target's limit, in the recipe's order (an empty post measured): what the
        model is told; targets with no limit (a webhook) are left out."""
        return tuple(fit for p in self.publishers_for(recipe) if (fit := p.fit("")) is not None)

    def tightest(self, recipe: Recipe) -> Fit | None:
        """The target with the smallest limit: what the model is told to write within."""
        return tightest(self.limits(recipe))


def body_reaches(body: PostBody, target: str) -> bool:
    """Whether `body` has a version `target` publishes (its own, or the one for all)."""
    return any(key in body.versions for key in (target, EVERY_TARGET))


def over_limit(fits: Sequence[Fit]) -> list[Fit]:
    return [fit for fit in fits if not fit.fits]


def refusal(fits: Sequence[Fit]) -> str | None:
    """`Too long for Mastodon (m.test): 512/500. Edit or redraft it to fit.`, or None."""
    over = over_limit(fits)
    if not over:
        return None
    counts = "; ".join(f"{fit.label}: {fit.count}/{fit.limit}" for fit in over)
    return f"Too long for {counts}. Edit or redraft it to fit before approving."


def tightest(fits: Sequence[Fit]) -> Fit | None:
    return min(fits, key=lambda fit: fit.limit, default=None)


def limit_instruction(fit: Fit) -> str:
    """The sentence the model's request carries (its system prompt's last line)."""
    return (
        f"The post must be at most {fit.limit} characters long: {fit.label}, where it will "
        "be published, allows no more."
    )
