"""What becomes of each entry of a Message Batch (docs/design.md §21): its answer stored
under its own claim's fence, a retryable failure sent in the next batch while its wait
allows, a refusal for good failing its run, and an entry past its wait taken over and
drafted synchronously, once.

The batch pass (`core.drafting.batch_pass`) owns the batch rows; this owns the entries.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from functools import partial

from sqlmodel import col, select

from core.drafting.attempts import abandon_unfinished_attempts, attempts_of, finish_attempt
from core.drafting.batch_drafter import EntryFailure
from core.drafting.batch_queue import Entry, add_entry, held_by, late_entries
from core.drafting.claims import Claim
from core.drafting.service import DraftingService
from core.drafting_policies import AttemptOutcome, BatchEntryResult
from core.errors import LostClaim, ModelCallFailed
from core.failpoints import Failpoint, failpoint
from core.identity import batch_custom_id
from core.models import AttemptRow
from core.policies import FailReason
from core.ports import Clock, ModelReply
from core.setup.config import Recipe
from core.slots.schedule import Slot, slot_of_run
from core.store.engine import Store
from core.store.leases import DRAFT_CLAIMS, lease_now, new_owner, take_over
from core.store.rows import lock_draft, lock_run
from core.store.transitions import note_draft
from core.telemetry.observe import batch_entry_ended

log = logging.getLogger(__name__)

RECIPE_GONE = "its recipe left the config file"
MISSING = "missing"  # an entry Galley sent that the batch's results do not hold
# Work handed on (a synchronous fallback call): the bot's drafting pool, or inline in
# tests and one-shot commands.
Later = Callable[[Callable[[], object]], object]


def _inline(work: Callable[[], object]) -> object:
    return work()


class BatchEntries:
    """The entries of every batch: settled once their batch ends, or past their wait."""

    def __init__(
        self,
        store: Store,
        recipes: dict[str, Recipe],
        drafting: DraftingService,
        clock: Clock,
        later: Later | None = None,
    ) -> None:
        self.store, self.recipes, self.drafting, self.clock = store, recipes, drafting, clock
        self.later = later or _inline

    def settle(
        self, entry: Entry, result: ModelReply | EntryFailure | None, ended_at: datetime | None
    ) -> None:
        """One entry of an ended batch: stored, sent again, drafted at once, or failed."""
        recipe, slot = self.recipes.get(entry.recipe), self.slot(entry)
        if recipe is None or slot is None:
            self.fail(entry, FailReason.INVALID_REQUEST, RECIPE_GONE)
            return
        waited = max(0.0, ((ended_at or self.clock.now()) - entry.started_at).total_seconds())
        if isinstance(result, ModelReply):
            reply = replace(result, latency_s=waited)
            batch_entry_ended(entry.recipe, BatchEntryResult.SUCCEEDED, waited, reply)
            try:  # validated as a synchronous call's answer is (docs/design.md §30)
                reply = self.drafting.shaped(recipe, reply)
            except ModelCallFailed as malformed:
                self._failed(entry, recipe, slot, malformed)
                return
            self.drafting.store_answer(recipe, slot, entry.claim(), entry.number, reply)
            return
        batch_entry_ended(entry.recipe, result.result if result else MISSING, waited)
        failure = (
            result.error()
            if result is not None
            else ModelCallFailed(AttemptOutcome.REJECTED_RETRYABLE, "not in the batch's results")
        )
        self._failed(entry, recipe, slot, failure)

    def _failed(self, entry: Entry, recipe: Recipe, slot: Slot, failure: ModelCallFailed) -> None:
        """An entry that brought no usable answer: failed for good, sent in the next batch,
        or drafted at once."""
        self.finish(entry, failure=failure)
        if not failure.outcome.retryable:
            reason = FailReason.AUTH if failure.outcome == AttemptOutcome.AUTH else None
            self.fail(entry, reason or FailReason.INVALID_REQUEST, str(failure))
        elif not self._send_again(entry, recipe):
            self.later(partial(self.drafting.draft_claimed, recipe, slot, entry.claim()))

    def _send_again(self, entry: Entry, recipe: Recipe) -> bool:
        """A retryable failure waits for the next batch while its wait allows, under the
        same claim; False when it must be drafted at once (or its attempts are spent,
        which the synchronous path reports)."""
        with self.store.transaction() as session:
            now = lease_now(session, self.clock)
            if entry.wait_until - now <= recipe.batch_gather:
                return False
            draft = lock_draft(session, entry.draft_key)
            if draft is None or not held_by(draft, entry.owner):
                return True  # no longer ours: nothing to send
            attempts = attempts_of(session, draft)
            if attempts.spent(recipe.max_attempts):
                return False
            add_entry(session, recipe, entry.claim(), attempts.next_number, entry.wait_until, now)
        return True

    def record_late_answers(self, ref: str, results: dict[str, ModelReply | EntryFailure]) -> None:
        """Entries that fell back to a synchronous call meanwhile were answered anyway:
        what they cost was paid, and the ledger says so."""
        with self.store.transaction() as session:
            gone = session.exec(
                select(AttemptRow).where(
                    col(AttemptRow.batch_ref) == ref,
                    col(AttemptRow.outcome) == AttemptOutcome.ABANDONED,
                    col(AttemptRow.input_tokens) == 0,
                )
            ).all()
            for row in gone:
                answer = results.get(batch_custom_id(row.draft_key))
                if isinstance(answer, ModelReply):
                    finish_attempt(session, row.run_id, row.number, {}, reply=answer)

    def fall_back_late(self) -> int:
        """Take over the claim of every entry past its wait and draft it synchronously,
        once: the take-over names the owner it read, so two passes never both call."""
        with self.store.read() as session:
            late = late_entries(session, lease_now(session, self.clock))
        if late:
            failpoint(Failpoint.BATCH_LATE_READ)
        taken = 0
        for entry in late:
            recipe, slot = self.recipes.get(entry.recipe), self.slot(entry)
            if recipe is None or slot is None:
                self.fail(entry, FailReason.INVALID_REQUEST, RECIPE_GONE)
                continue
            claim = self._take_over(entry, recipe)
            if claim is None:
                continue
            taken += 1
            self.later(partial(self.drafting.draft_claimed, recipe, slot, claim))
        return taken

    def _take_over(self, entry: Entry, recipe: Recipe) -> Claim | None:
        owner = new_owner(self.drafting.worker)
        lease = recipe.takeover_after
        with self.store.transaction() as session:
            now = lease_now(session, self.clock)
            lock_run(session, entry.run_id)  # run, then draft: core/store/rows.py
            draft = lock_draft(session, entry.draft_key)
            if draft is None or not take_over(
                session, DRAFT_CLAIMS, draft.key, entry.owner, owner, lease, now, lapsed_only=False
            ):
                return None  # the batch's own pass, or another, has it now
            abandon_unfinished_attempts(session, entry.draft_key, now)
            why = f"waited in a batch until {entry.wait_until:%H:%M:%S}Z: drafted at once"
            note_draft(session, draft, actor=owner, at=now, reason=why)
        return Claim(entry.run_id, entry.draft_key, entry.version, owner, took_over=True)

    # --- inside --------------------------------------------------------------------------

    def slot(self, entry: Entry) -> Slot | None:
        recipe = self.recipes.get(entry.recipe)
        return None if recipe is None else slot_of_run(recipe, entry.run_id, entry.slot_at)

    def fail(self, entry: Entry, reason: FailReason, detail: str) -> None:
        try:
            self.drafting.fail(entry.claim(), reason, detail)
        except LostClaim as lost:  # someone else holds it now, and decides
            log.info("batch entry %s not failed: %s", entry.draft_key, lost)

    def finish(self, entry: Entry, *, failure: ModelCallFailed) -> None:
        with self.store.transaction() as session:
            values: dict[str, object] = {"finished_at": lease_now(session, self.clock)}
            finish_attempt(session, entry.run_id, entry.number, values, failure=failure)
