"""The work a Slack listener may start, each by its name: show a review message, publish a
run soon, redraft on a reviewer's note, draft a person's slot. What calls the model or a
destination goes to the pool named after it (bot/pools.py), never runs on the listener's
thread; what it runs is core's (`PublishingService.publish_run`, `RedraftService.run`, …).
"""

from __future__ import annotations

from collections.abc import Callable

from bot.apscheduler_host import SchedulerHost
from bot.blocks import review_reply
from bot.wiring import BotServices
from core.policies import Trigger
from core.ports import MessageRef, ReviewItem
from core.post_body import BODY_MARK
from core.review.redraft_claims import RedraftClaim, expired_redrafts
from core.setup.config import Recipe
from core.slots.schedule import Slot

Tell = Callable[[str], object]  # a later message to the person who asked


class Work:
    """What the listeners and the bot's passes start, over the bot's services and the
    host's pools."""

    def __init__(self, services: BotServices, host: SchedulerHost) -> None:
        self.services: BotServices = services
        self.host: SchedulerHost = host

    def show_review(self, item: ReviewItem) -> None:
        """The draft's review message posted, or rewritten to show it as it is now."""
        self.services.outbox.show_now(item)

    def publish_soon(self, run_id: str) -> None:
        """The run published on the publishing pool: `publish_run` sends nothing before
        its publication time (the reconcile pass takes it up then)."""
        self.host.publishing.take(self.services.publishing.publish_run, run_id)

    def post_review_soon(self, item: ReviewItem) -> None:
        """A person's post (docs/design.md §37): its review message posted now, on the
        publishing pool, not at the next outbox pass (the receipt makes either one post)."""
        self.host.publishing.take(self.services.outbox.post_one, item)

    def redraft_soon(self, claim: RedraftClaim, tell: Tell | None) -> None:
        """A reviewer's claimed redraft, on the drafting pool: the model's answer shown in
        place on the review message; a failure told to the reviewer."""
        self.host.drafting.take(self.redraft, claim, tell)

    def redraft(self, claim: RedraftClaim, tell: Tell | None) -> None:
        answer = self.services.core.redrafting.run(claim)
        if answer.item is not None:
            self.show_review(answer.item)
        if not answer.accepted and tell is not None:
            tell(review_reply(answer))

    def resume_redrafts(self) -> None:
        """Take over redrafts whose holder stopped renewing them, and finish them once."""
        core = self.services.core
        for key in expired_redrafts(core.store, core.clock):
            claim = core.redrafting.take_over_expired(key)
            if claim is not None:
                self.redraft_soon(claim, None)

    def take_image_soon(self, take: Callable[[], object]) -> None:
        """An image dropped in a review thread, downloaded and shaped (Pillow: seconds of
        CPU for a large photo) on the drafting pool, never on the listener's thread."""
        self.host.drafting.take(take)

    def describe_source_images_soon(self, item: ReviewItem, ref: MessageRef) -> None:
        """Once a draft's review message is posted: alt text proposed for each image its
        source items brought (docs/design.md §32), on the drafting pool (a model call),
        the new revision shown and a failure told in the message's thread."""
        if item.text.startswith(BODY_MARK):  # a plain text carries no image
            self.host.drafting.take(self.describe_source_images, item.draft_key, ref)

    def describe_unasked_source_images(self) -> None:
        """At start: the alt text of every waiting draft's source images that a process
        before this one posted the review message for, then died before asking (claimed
        proposals are not asked again; docs/design.md §32)."""
        proposer = self.services.core.alt_texts
        if proposer is None:
            return
        for draft_key in proposer.waiting_with_images():
            ref = self.services.outbox.review_ref(draft_key)
            if ref is not None:
                self.describe_source_images(draft_key, ref)

    def describe_source_images(self, draft_key: str, ref: MessageRef) -> None:
        proposer = self.services.core.alt_texts
        if proposer is None:
            return
        for proposal in proposer.propose_for_source_images(draft_key):
            if proposal.answer is not None and proposal.answer.item is not None:
                self.show_review(proposal.answer.item)
            if proposal.told:
                self.services.channels.post(ref.channel, text=proposal.told, thread_ts=ref.ts)

    def start_draft(self, recipe: Recipe, slot: Slot | None, actor: str, tell: Tell) -> None:
        """A person's `/galley run` (the most recent slot) or `retry` of a failed one, on
        the drafting pool; the person is told the outcome (drafted, exists, skipped and
        why, failed and why)."""
        core = self.services.core
        chosen = slot or core.resolve_slot(recipe, None)
        if slot is None and recipe.trigger == Trigger.ITEMS:  # docs/design.md §29: poll now

            def poll_and_tell() -> None:
                tell(self.services.items.poll(recipe, chosen).describe())

            self.host.drafting.take(poll_and_tell)
            return

        def draft_and_tell() -> None:
            result = core.drafting.draft_slot(recipe, chosen, manual=True, actor=actor)
            tell(f"*{recipe.name}* {result.describe()}")

        self.host.drafting.take(draft_and_tell)
