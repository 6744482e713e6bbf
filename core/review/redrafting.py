"""A reviewer's redraft (docs/design.md §22): the model is given the recipe's system
prompt, the current text and the reviewer's note, and its answer becomes the next
revision of the same draft (same key, revision + 1), in place on the review message.

`ask` checks and claims in one transaction with the recipe, run and draft rows locked
(the same staleness checks as a decision: `core/review/queue.py`), so a redelivered or
repeated request finds the claim and never calls the model again. `run` makes the
call outside any transaction, under a heartbeat, as an attempt with cause `redraft`,
and stores the answer only while the claim is still its own and the revision it
rewrites is still current. Knows nothing of Slack.
"""

from __future__ import annotations

import logging
import time
from datetime import datetime

from core.drafting.attempts import Backoff, UnderClaim, begin_attempt, finish_attempt
from core.drafting.causes import attempt_cause
from core.drafting.fit import FitRule
from core.drafting.post_shape import shape_for, shown_to_model, system_ending, with_basis
from core.drafting.revisions import keep_revisions, model_author
from core.drafting.service import worker_name
from core.drafting.similarity import record_similarity
from core.drafting_policies import AttemptCause, RedraftState
from core.errors import LostClaim, ModelCallFailed
from core.failpoints import Failpoint, failpoint
from core.identity import text_hash
from core.models import DraftRow, RedraftRow, RunRow
from core.policies import Refusal
from core.ports import Clock, Drafter, DraftRequest, Fit, ModelReply, PostShape, ReviewItem
from core.post_body import BodyUnreadable, PostBody
from core.review.queue import ReviewAnswer, open_for_change, review_item
from core.review.redraft_claims import (
    RedraftClaim,
    claim_redraft,
    finish_redraft,
    renew_redraft,
    take_over,
)
from core.setup.config import Config, Recipe
from core.slots.schedule import render_template
from core.sources.snapshot import stored_snapshot
from core.store.engine import Store
from core.store.leases import REDRAFT_CLAIMS, Heartbeat, lease_now, new_owner
from core.store.transitions import note_draft

log = logging.getLogger(__name__)
REDRAFT_INSTRUCTIONS = (
    "A reviewer read the draft below and asks for a new version. Rewrite it as they ask; "
    "answer with the post only."
)
REDRAFT_SET_INSTRUCTIONS = (
    "A reviewer read the draft below, a version per destination, and asks for a new set. "
    "Rewrite every version as they ask."
)


def redraft_request(
    recipe: Recipe,
    slot_at: datetime,
    version: int,
    text: str,
    note: str,
    limit: Fit | None = None,
    shape: PostShape | None = None,
) -> DraftRequest:
    """The recipe's system prompt, ending, as a first draft's does, with the tightest
    target's limit (a refusal to approve says "edit or redraft it to fit") or the set of
    versions asked for (docs/design.md §30); the current text and the note. A set is
    rewritten whole, through the same structured request as its first draft."""
    rendered = render_template(
        recipe.system,
        recipe=recipe.name,
        platform=recipe.platform,
        slot=slot_at.astimezone(recipe.zone),
        version=version,
    )
    system = "\n\n".join(part for part in (rendered, system_ending(limit, shape)) if part)
    instructions = REDRAFT_INSTRUCTIONS if shape is None else REDRAFT_SET_INSTRUCTIONS
    prompt = (
        f"{instructions}\n\n<draft>\n{shown_to_model(text)}\n</draft>\n\n"
        f"<reviewer_note>\n{note}\n</reviewer_note>"
    )
    return DraftRequest(
        model=recipe.model,
        system=system,
        prompt=prompt,
        max_tokens=recipe.max_tokens,
        timeout=recipe.model_timeout,
        recipe=recipe.name,
        shape=shape,
    )


class RedraftService:
    """A reviewer's note in, at most one paid answer and one new revision out."""

    def __init__(
        self,
        store: Store,
        config: Config,
        clock: Clock,
        drafter: Drafter | None,
        *,
        worker: str | None = None,
        backoff: Backoff | None = None,
        fits: FitRule | None = None,
    ) -> None:
        self.store, self.config, self.clock, self.drafter = store, config, clock, drafter
        self.worker = worker or worker_name()
        self.backoff = backoff or Backoff()
        self.fits = fits  # the model is told the tightest limit, as for a first draft

    def ask(
        self, *, draft_key: str, revision: int, note: str, user: str, permitted: bool
    ) -> RedraftClaim | ReviewAnswer:
        """Claim the redraft of `revision`, or the answer saying why not (stale, asked for
        already, a limit reached: which one)."""
        if not permitted:
            return _refusal(
                draft_key, Refusal.NOT_APPROVER, "You are not one of this Galley's approvers."
            )
        if not note.strip():
            return _refusal(draft_key, Refusal.EMPTY_NOTE, "Say what to change: the note is empty.")
        with self.store.transaction() as session:
            found = open_for_change(session, draft_key, revision, self.config, self.clock.now())
            if isinstance(found, ReviewAnswer):
                return found
            draft, run = found
            recipe = self.config.recipes.get(draft.recipe)
            if recipe is None:
                return _refusal(
                    draft_key, Refusal.GONE, f"Recipe {draft.recipe} is not in the config."
                )
            claimed = claim_redraft(
                session,
                recipe,
                draft,
                note=note.strip(),
                user=user,
                owner=new_owner(self.worker),
                clock=self.clock,
            )
            if isinstance(claimed, RedraftClaim):
                return claimed
            refusal, why = claimed
            # asked for already: the message shows it as it is, and needs no rewrite
            shown = None if refusal == Refusal.REDRAFTING else review_item(draft, run)
            return _refusal(draft_key, refusal, _limit_sentence(refusal, why), shown)

    def take_over_expired(self, key: str) -> RedraftClaim | None:
        """The claim of a holder that stopped renewing it, now ours; None if it is live,
        finished or taken by someone else first."""
        with self.store.transaction() as session:
            row = session.get(RedraftRow, key)
            recipe = self.config.recipes.get(row.recipe) if row is not None else None
            if row is None or recipe is None or row.state != RedraftState.CLAIMED:
                return None
            now = lease_now(session, self.clock)
            taken = take_over(session, row, new_owner(self.worker), recipe.takeover_after, now)
            return taken if isinstance(taken, RedraftClaim) else None

    def run(self, claim: RedraftClaim) -> ReviewAnswer:
        """Call the model for a claimed redraft and store its answer as the next revision;
        a holder whose claim was taken over stores nothing and says so."""
        try:
            return self._call_and_store(claim)
        except LostClaim as lost:
            return _refusal(claim.draft_key, Refusal.REDRAFTING, str(lost))

    def _call_and_store(self, claim: RedraftClaim) -> ReviewAnswer:
        recipe = self.config.recipes.get(claim.recipe)
        if recipe is None or self.drafter is None:
            why = "no drafter (ANTHROPIC_API_KEY is not set)" if recipe else "recipe not in config"
            return self._fail(claim, why)
        request = self._request(recipe, claim)
        if request is None:
            return self._fail(claim, f"revision {claim.from_revision} is no longer current")
        deadline = time.monotonic() + recipe.claim_lease.total_seconds()

        def renew() -> bool:
            return renew_redraft(self.store, claim, recipe.takeover_after, self.clock)

        with Heartbeat(renew, recipe.heartbeat, claim.key) as keeper:
            while True:
                number = self._begin_attempt(recipe, claim)
                if number is None:
                    return self._fail(claim, f"max_attempts ({recipe.max_attempts}) reached")
                try:
                    reply = self.drafter.draft(request)
                except ModelCallFailed as failure:
                    self._finish_attempt(claim, number, failure=failure)
                    cause = attempt_cause(failure.outcome, failure.status, str(failure))
                    delay = self.backoff.delay(number, failure.retry_after)
                    if not failure.outcome.retryable or time.monotonic() + delay > deadline:
                        return self._fail(claim, cause)
                    if keeper.lost.wait(delay):
                        raise LostClaim(f"redraft {claim.key} was taken over") from None
                    continue
                failpoint(Failpoint.AFTER_REDRAFT_REPLY)
                self._finish_attempt(claim, number, reply=reply)
                return self._store(recipe, claim, reply)

    def _request(self, recipe: Recipe, claim: RedraftClaim) -> DraftRequest | None:
        with self.store.read() as session:
            draft = session.get(DraftRow, claim.draft_key)
            run = session.get(RunRow, claim.run_id)
            if draft is None or run is None or draft.revision != claim.from_revision:
                return None
            limit = self.fits.tightest(recipe) if self.fits is not None else None
            text, note, shape = draft.text or "", claim.note, shape_for(recipe, self.fits)
            request = redraft_request(recipe, run.slot_at, draft.version, text, note, limit, shape)
            basis = (
                stored_snapshot(session, run.id) if recipe.takes_snapshot else None
            )  # docs/design.md §27
            return with_basis(request, recipe, basis)

    def _begin_attempt(self, recipe: Recipe, claim: RedraftClaim) -> int | None:
        """The attempt row, written before the call under the claim's fence
        (`begin_attempt`): `LostClaim` and no call when it is no longer ours; None at
        `max_attempts`."""
        held = UnderClaim(REDRAFT_CLAIMS, claim.key, claim.owner, claim.draft_key, claim.run_id)
        with self.store.transaction() as session:
            now = lease_now(session, self.clock)
            return begin_attempt(
                session, held, recipe, now, self.clock.now(), cause=AttemptCause.REDRAFT
            )

    def _finish_attempt(
        self,
        claim: RedraftClaim,
        number: int,
        *,
        failure: ModelCallFailed | None = None,
        reply: ModelReply | None = None,
    ) -> None:
        values: dict[str, object] = {"finished_at": self.clock.now()}
        with self.store.transaction() as session:
            finish_attempt(session, claim.run_id, number, values, failure=failure, reply=reply)

    def _store(self, recipe: Recipe, claim: RedraftClaim, reply: ModelReply) -> ReviewAnswer:
        if not reply.text.strip():
            return self._fail(claim, "the model answered no text")
        with self.store.transaction() as session:
            now = self.clock.now()
            found = open_for_change(session, claim.draft_key, claim.from_revision, self.config, now)
            if isinstance(found, ReviewAnswer):  # edited, decided, bumped meanwhile
                finish_redraft(session, claim, RedraftState.FAILED, now, found.message)
                return found
            draft, run = found
            finish_redraft(session, claim, RedraftState.DONE, now)  # fenced: ours, or nothing
            text = _with_images_of(draft.text or "", reply.text)
            keep_revisions(session, draft, new_text=text, editor=model_author(reply.model), at=now)
            draft.text, draft.text_hash, draft.revision = text, text_hash(text), draft.revision + 1
            draft.model, draft.decision_reason, draft.updated_at = reply.model, None, now
            draft.input_tokens, draft.output_tokens = reply.input_tokens, reply.output_tokens
            session.add(draft)
            record_similarity(session, draft, recipe.similar_window, now)
            why = f"redrafted: revision {draft.revision} for {claim.requested_by}: {claim.note}"
            note_draft(session, draft, actor=claim.owner, at=now, reason=why[:2000])
            item = review_item(draft, run)
        failpoint(Failpoint.AFTER_REDRAFT_COMMIT)
        return ReviewAnswer(True, f"Redrafted as revision {item.revision}.", claim.draft_key, item)

    def _fail(self, claim: RedraftClaim, why: str) -> ReviewAnswer:
        with self.store.transaction() as session:
            finish_redraft(session, claim, RedraftState.FAILED, self.clock.now(), why)
        log.warning("redraft %s failed: %s", claim.key, why)
        return ReviewAnswer(False, f"The redraft failed: {why}.", claim.draft_key)


def _refusal(
    key: str, refusal: Refusal, sentence: str, item: ReviewItem | None = None
) -> ReviewAnswer:
    return ReviewAnswer(False, sentence, key, item, refusal)


def _limit_sentence(refusal: Refusal, why: str) -> str:
    match refusal:
        case Refusal.REDRAFT_LIMIT:
            return f"No more redrafts of this draft: {why}. Edit it, or reject it."
        case Refusal.ATTEMPT_LIMIT:
            return f"No more model calls for this draft: {why}. Edit it, or reject it."
        case Refusal.BUDGET:
            return f"The recipe's {why}; ask again tomorrow, or edit the draft."
    return f"Not redrafted: {why}."


def _with_images_of(current: str, answer: str) -> str:
    """The model's new text with the current revision's images and their alt texts: a
    redraft rewrites the words, never drops a picture (docs/design.md §32)."""
    try:
        images = PostBody.parse(current).images
        return PostBody.parse(answer).with_images(images).to_text() if images else answer
    except BodyUnreadable:
        return answer
