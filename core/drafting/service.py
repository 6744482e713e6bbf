"""Drafting one slot: claim, call the model under the claim, store the draft once.

The model is called only by the holder of a live claim, outside any transaction, and
every call is an attempt row written before the call and finished after it, so the
ledger shows what was paid for even when the process dies mid-call. The claim's
heartbeat runs for as long as the holder works; an answer that arrives after the recipe
was bumped is still stored (superseded), never thrown away.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import time
import uuid
from typing import TYPE_CHECKING

from sqlmodel import Session

from core.drafting.attempts import Backoff, begin_attempt, finish_attempt
from core.drafting.basis import Refused, RunBasis
from core.drafting.causes import attempt_cause
from core.drafting.claim_ends import give_back, kept_images, locked_run, make_ready, still_ours
from core.drafting.claims import Claim, DraftResult, claim_slot, lock_recipe_row, renew_lease
from core.drafting.fit import FitRule
from core.drafting.post_shape import build_request, shape_for, shaped_reply
from core.drafting.similarity import (
    Match,
    RedraftReason,
    avoiding,
    closest_seen,
    redraft_reason,
)
from core.drafting_policies import AttemptOutcome, DraftOutcome
from core.errors import LostClaim, ModelCallFailed
from core.failpoints import Failpoint, failpoint
from core.identity import recipe_of_run
from core.policies import FailReason, Overlap
from core.ports import Clock, Drafter, DraftRequest, ModelReply, SystemClock
from core.post_body import PostBody
from core.setup.config import Recipe
from core.slots.schedule import Slot
from core.sources.snapshot import Snapshot
from core.states import RunState
from core.store.engine import Store
from core.store.leases import Heartbeat, lease_now
from core.store.rows import lock_draft

if TYPE_CHECKING:
    from core.drafting.batch_queue import BatchQueue


def worker_name() -> str:
    """The process that works: readable in a SQL shell, unique per process start. Each
    claim or receipt adds a part unique to its attempt (`core.store.leases.new_owner`)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


class DraftingService:
    """Turns (recipe, slot) into at most one stored draft and one paid model answer."""

    def __init__(
        self,
        store: Store,
        drafter: Drafter,
        *,
        clock: Clock | None = None,
        worker: str | None = None,
        backoff: Backoff | None = None,
        fits: FitRule | None = None,
        batches: BatchQueue | None = None,
        basis: RunBasis | None = None,
    ) -> None:
        """`batches`: the queue of a recipe that drafts in batches (None: every call is
        synchronous); `basis`: where a run with sources reads them (the config's folder)."""
        self.store = store
        self.drafter = drafter
        self.fits = fits  # the model is told the tightest limit of the recipe's targets
        self.clock = clock or SystemClock()
        self.worker = worker or worker_name()
        self.backoff = backoff or Backoff()
        self.batches = batches
        self.basis = basis or RunBasis(store, self.clock)  # what a run with sources drafts from

    def draft_slot(
        self,
        recipe: Recipe,
        slot: Slot,
        *,
        manual: bool = False,
        actor: str | None = None,
        overlap: Overlap | None = None,
        batch: bool | None = None,
    ) -> DraftResult:
        """`batch`: True sends a person's request through a batch too (`galley draft
        --batch`), False never; None follows the recipe's `drafting` for scheduled slots."""
        claimed = claim_slot(
            self.store,
            recipe,
            slot,
            worker=self.worker,
            actor=actor or self.worker,
            manual=manual,
            clock=self.clock,
            overlap=overlap,
        )
        if isinstance(claimed, DraftResult):
            return claimed
        failpoint(Failpoint.AFTER_CLAIM_COMMIT)
        basis = self._basis(recipe, slot, claimed)  # stored before any batch entry is sent
        if isinstance(basis, DraftResult):
            return basis
        if self.batches is not None and self.batches.takes(recipe, slot, manual=manual, ask=batch):
            queued = self.batches.enqueue(recipe, slot, claimed, manual=manual)
            if queued is not None:
                return queued
        return self._draft_from(recipe, slot, claimed, basis)

    def draft_claimed(self, recipe: Recipe, slot: Slot, claim: Claim) -> DraftResult:
        """Call the model under `claim` (ours) and store its answer: a fresh claim, or
        one taken from a batch entry that waited past its deadline."""
        basis = self._basis(recipe, slot, claim)  # the stored snapshot, or read and stored now
        if isinstance(basis, DraftResult):
            return basis
        return self._draft_from(recipe, slot, claim, basis)

    def _draft_from(
        self, recipe: Recipe, slot: Slot, claim: Claim, basis: Snapshot | None
    ) -> DraftResult:
        try:
            return self._write_draft(recipe, slot, claim, basis)
        except LostClaim as lost:
            return DraftResult(DraftOutcome.IN_PROGRESS, claim.run_id, claim.draft_key, str(lost))

    def store_answer(
        self, recipe: Recipe, slot: Slot, claim: Claim, number: int, reply: ModelReply
    ) -> DraftResult:
        """Store a batch entry's answer under its own claim's fence, as a synchronous
        call's would be (near-duplicate check and redraft included)."""
        snapshot = self.basis.stored(recipe, slot.run_id(recipe.name))
        request = self.request_for(recipe, slot, claim.version, snapshot)
        try:
            return self._answer(recipe, claim, request, (reply, number, time.monotonic()), snapshot)
        except LostClaim as lost:
            return DraftResult(DraftOutcome.IN_PROGRESS, claim.run_id, claim.draft_key, str(lost))

    def request_for(
        self, recipe: Recipe, slot: Slot, version: int, snapshot: Snapshot | None
    ) -> DraftRequest:
        """The model's request for a run, from the `snapshot` its claim took (None for a
        recipe that keeps none)."""
        limit = self.fits.tightest(recipe) if self.fits is not None else None
        return build_request(recipe, slot, version, limit, snapshot, shape_for(recipe, self.fits))

    def stored_request(self, recipe: Recipe, slot: Slot, version: int) -> DraftRequest:
        """The request a batch entry was sent with: from the run's stored snapshot, never
        a fresh read."""
        snapshot = self.basis.stored(recipe, slot.run_id(recipe.name))
        return self.request_for(recipe, slot, version, snapshot)

    def shaped(self, recipe: Recipe, reply: ModelReply) -> ModelReply:
        """A batch entry's answer validated as a synchronous call's is (`shaped_reply`)."""
        return shaped_reply(shape_for(recipe, self.fits), reply)

    def _basis(self, recipe: Recipe, slot: Slot, claim: Claim) -> Snapshot | DraftResult | None:
        """The run's snapshot, taken under the claim with its heartbeat running (reads can
        take `call_timeout` each); a run with nothing new or a failed required source
        ends here, before any model call. None for a recipe that keeps no snapshot."""
        if not recipe.takes_snapshot:
            return None
        try:
            with self._heartbeat(recipe, claim) as keeper:
                taken = self.basis.take(recipe, slot, claim, keeper.lost)
            if isinstance(taken, Refused):
                return self._refuse(claim, taken)
        except LostClaim as lost:
            return DraftResult(DraftOutcome.IN_PROGRESS, claim.run_id, claim.draft_key, str(lost))
        return taken

    def _heartbeat(self, recipe: Recipe, claim: Claim) -> Heartbeat:
        """The claim's heartbeat: its lease renewed every `heartbeat` while this holder
        works, `lost` set once it is no longer ours."""

        def renew() -> bool:
            return renew_lease(self.store, claim, recipe.takeover_after, self.clock)

        return Heartbeat(renew, recipe.heartbeat, claim.draft_key)

    def _refuse(self, claim: Claim, refused: Refused) -> DraftResult:
        if isinstance(refused.reason, FailReason):
            return self.fail(claim, refused.reason, refused.detail)
        return give_back(
            self.store,
            self.clock,
            claim,
            RunState.SKIPPED,
            refused.reason,
            refused.detail,
            DraftOutcome.SKIPPED,
        )

    def _write_draft(
        self, recipe: Recipe, slot: Slot, claim: Claim, snapshot: Snapshot | None
    ) -> DraftResult:
        request = self.request_for(recipe, slot, claim.version, snapshot)
        deadline = time.monotonic() + recipe.claim_lease.total_seconds()
        last_cause: str | None = None
        with self._heartbeat(recipe, claim) as keeper:
            while True:
                number = self._begin_attempt(recipe, claim)
                if number is None:
                    detail = _exhausted(recipe) + (f"; last: {last_cause}" if last_cause else "")
                    return self.fail(claim, FailReason.ATTEMPTS_EXHAUSTED, detail)
                started = time.monotonic()
                try:
                    reply = self.drafter.draft(request)
                except ModelCallFailed as failure:
                    self._finish_attempt(claim, number, started, failure=failure)
                    last_cause = attempt_cause(failure.outcome, failure.status, str(failure))
                    if not failure.outcome.retryable:
                        return self.fail(claim, _fail_reason(failure.outcome), last_cause)
                    delay = self.backoff.delay(number, failure.retry_after)
                    if time.monotonic() + delay > deadline:
                        detail = f"no draft within claim_lease; last: {last_cause}"
                        return self.fail(claim, FailReason.DEADLINE_EXCEEDED, detail)
                    if keeper.lost.wait(delay):
                        raise LostClaim(f"claim on {claim.draft_key} was taken over") from None
                    continue
                failpoint(Failpoint.AFTER_MODEL_REPLY)
                return self._answer(recipe, claim, request, (reply, number, started), snapshot)

    def _answer(
        self,
        recipe: Recipe,
        claim: Claim,
        request: DraftRequest,
        answered: tuple[ModelReply, int, float],
        snapshot: Snapshot | None,
    ) -> DraftResult:
        """`answered`: the reply, its attempt's number and when that attempt began."""
        reply, number, started = answered
        why = redraft_reason(self.store, recipe, claim, reply, self.clock.now())
        if why is not None:  # on_similar = redraft, and the answer repeats a seen post
            reply, number, started = self._redraft(recipe, claim, request, why, answered)
        return self._store_draft(recipe, claim, (reply, number, started), snapshot)

    def _begin_attempt(self, recipe: Recipe, claim: Claim, *, redraft: bool = False) -> int | None:
        """Write the attempt row before the call; None when the attempt cap is reached."""
        with self.store.transaction() as session:
            now = lease_now(session, self.clock)
            started = self.clock.now()
            return begin_attempt(session, claim.paid_under, recipe, now, started, redraft=redraft)

    def _finish_attempt(
        self,
        claim: Claim,
        number: int,
        started: float,
        *,
        failure: ModelCallFailed | None = None,
        reply: ModelReply | None = None,
        session: Session | None = None,
    ) -> None:
        timed = reply if reply is not None else failure  # the adapter's own, from sending
        measured = None if timed is None else timed.latency_s
        seconds = time.monotonic() - started if measured is None else measured
        values: dict[str, object] = {
            "finished_at": self.clock.now(),
            "latency_ms": round(seconds * 1000),
        }
        if session is not None:
            finish_attempt(session, claim.run_id, number, values, failure=failure, reply=reply)
            return
        with self.store.transaction() as own_session:
            finish_attempt(own_session, claim.run_id, number, values, failure=failure, reply=reply)

    def _store_draft(
        self,
        recipe: Recipe,
        claim: Claim,
        answered: tuple[ModelReply, int, float],
        snapshot: Snapshot | None,
    ) -> DraftResult:
        reply, number, started = answered
        if not reply.text.strip():
            self._finish_attempt(claim, number, started, reply=reply)
            return self.fail(claim, FailReason.EMPTY_RESPONSE, "the model answered no text")
        kept = kept_images(snapshot)  # docs/design.md §32
        body = PostBody.parse(reply.text)  # read once: as `shaped_reply` wrote it
        if kept:
            reply = dataclasses.replace(reply, text=body.with_images(kept).to_text())
        seen = closest_seen(self.store, recipe, claim.draft_key, body, self.clock.now())
        try:
            detail = self._store_ready(recipe, claim, number, started, reply, seen)
        except LostClaim:
            raise  # its transaction recorded the paid call before refusing the draft
        except Exception:
            # The store was rolled back, the paid call with it: record the call alone.
            self._finish_attempt(claim, number, started, reply=reply)
            raise
        failpoint(Failpoint.AFTER_DRAFT_COMMIT)
        return DraftResult(DraftOutcome.DRAFTED, claim.run_id, claim.draft_key, None, detail)

    def _store_ready(
        self,
        recipe: Recipe,
        claim: Claim,
        number: int,
        started: float,
        reply: ModelReply,
        seen: Match | None,
    ) -> str | None:
        """One transaction: the attempt finished, then the draft ready (or superseded, or
        cancelled). The paid call is on record even when the draft is refused (the claim
        was lost meanwhile: the transaction commits the attempt alone), and the draft is
        never on record without it."""
        refused: LostClaim | None = None
        with self.store.transaction() as session:
            now = self.clock.now()
            recipe_row = lock_recipe_row(session, recipe_of_run(claim.run_id), now)
            run = locked_run(session, claim.run_id)  # recipe, run, then draft: core/store/rows.py
            draft = lock_draft(session, claim.draft_key)
            self._finish_attempt(claim, number, started, reply=reply, session=session)
            try:
                draft = still_ours(draft, claim)
            except LostClaim as lost:
                refused = lost
            else:
                return make_ready(session, draft, run, recipe_row, claim, reply, seen, now)
        assert refused is not None
        raise refused

    def _redraft(
        self,
        recipe: Recipe,
        claim: Claim,
        request: DraftRequest,
        why: RedraftReason,
        first: tuple[ModelReply, int, float],
    ) -> tuple[ModelReply, int, float]:
        """Ask once more under the same claim, avoiding the text people saw; the call is
        an attempt like any other. Returns whichever answer reads less like it."""
        reply, number, started = first
        self._finish_attempt(claim, number, started, reply=reply)  # paid for, whatever follows
        second = self._begin_attempt(recipe, claim, redraft=True)
        if second is None:
            return first
        began = time.monotonic()
        try:
            other = self.drafter.draft(avoiding(request, why.match.text))
        except ModelCallFailed as failure:
            self._finish_attempt(claim, second, began, failure=failure)
            return first
        self._finish_attempt(claim, second, began, reply=other)
        return (other, second, began) if why.prefers(other.text) else first

    def fail(self, claim: Claim, reason: FailReason, detail: str) -> DraftResult:
        """Give the claim back and close the run as failed, with a readable reason."""
        return give_back(
            self.store, self.clock, claim, RunState.FAILED, reason, detail, DraftOutcome.FAILED
        )


def _fail_reason(outcome: AttemptOutcome) -> FailReason:
    return FailReason.AUTH if outcome == AttemptOutcome.AUTH else FailReason.INVALID_REQUEST


def _exhausted(recipe: Recipe) -> str:
    return f"{recipe.max_attempts} model calls for this draft (max_attempts), no draft"
