"""The batch pass: gather waiting entries into one Message Batch, find a lost create
again before sending anything twice, poll with backoff, and store each answer under its
own claim's fence (docs/design.md §21).

Each batch is a row leased to one pass at a time across replicas, judged by the
database's clock like a claim. The row is written, and its entries tied to it, before
the create is sent; the API's id is stored the moment it answers. A row whose create
has no answer on record (a timeout, a SIGKILL between the two) is looked for among the
batches created since it began (`BatchDrafter.find_again`) and only re-sent when the
world clearly has none. An entry whose wait runs out is drafted synchronously, once.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timedelta
from functools import partial

import sqlalchemy as sa
from sqlmodel import Session, col, select

from core.drafting.attempts import Backoff, add_attempt, finish_attempt
from core.drafting.batch_drafter import BatchDrafter, EntryFailure, Pending
from core.drafting.batch_queue import (
    Entry,
    entries_of,
    gathered_for,
    held_by,
    late_entries,
    unsent_entries,
)
from core.drafting.claims import Claim, abandon_unfinished_attempts
from core.drafting.service import DraftingService
from core.errors import LostClaim, ModelCallFailed
from core.failpoints import Failpoint, failpoint
from core.identity import attempt_id, batch_custom_id
from core.models import AttemptRow, BatchRow
from core.policies import AttemptOutcome, BatchEntryResult, Drafting, FailReason
from core.ports import Clock, DraftRequest, ModelReply
from core.setup.config import Recipe
from core.slots.schedule import Slot, slot_of_run
from core.states import BatchState
from core.store.engine import Store
from core.store.leases import lease_now, new_owner
from core.store.rows import lock_draft, lock_run
from core.store.transitions import note_draft
from core.telemetry.observe import batch_entry_ended

log = logging.getLogger(__name__)

LIVE = (BatchState.SUBMITTING, BatchState.WAITING)
MISSING = "missing"  # an entry Galley sent that the batch's results do not hold
# Work the pass hands on (a synchronous fallback call): the bot's drafting pool, or
# inline in tests and one-shot commands.
Later = Callable[[Callable[[], object]], object]


def _inline(work: Callable[[], object]) -> object:
    return work()


class BatchPass:
    """One pass over every batch recipe's entries and every live batch."""

    def __init__(
        self,
        store: Store,
        recipes: dict[str, Recipe],
        drafting: DraftingService,
        client: BatchDrafter,
        *,
        clock: Clock,
        lease: timedelta,
        poll_every: timedelta = timedelta(seconds=5),
        poll_cap: timedelta = timedelta(seconds=60),
        later: Later | None = None,
    ) -> None:
        self.store, self.recipes, self.drafting, self.client = store, recipes, drafting, client
        self.clock = clock
        self.lease = lease  # longer than one request to the batches API, end to end
        self.poll_every, self.poll_cap = poll_every, poll_cap
        self.backoff = Backoff(poll_every.total_seconds(), poll_cap.total_seconds())
        self.later = later or _inline

    def run_once(self) -> None:
        self.gather()
        for ref in self.due_batches():
            self.advance(ref)
        self.fall_back_late()

    # --- gathering and sending -----------------------------------------------------------

    def gather(self) -> str | None:
        """Tie every unsent entry to a new batch row and send it, once some entry has
        waited its batch_gather; the row's id, or None when nothing was due."""
        with self.store.read() as session:
            now = lease_now(session, self.clock)
            waiting = unsent_entries(session)
        if not waiting or not gathered_for(waiting, self.recipes, now):
            return None
        failpoint(Failpoint.BATCH_GATHER_READ)
        owner = new_owner("batch")
        ref = f"gb-{uuid.uuid4().hex[:20]}"
        with self.store.transaction() as session:
            now = lease_now(session, self.clock)
            session.add(
                BatchRow(
                    id=ref,
                    state=BatchState.SUBMITTING,
                    size=0,
                    created_at=now,
                    next_poll_at=now,
                    leased_by=owner,
                    lease_until=now + self.lease,
                )
            )
            session.flush()
            session.execute(  # another pass may have tied some of them already
                sa.update(AttemptRow)
                .where(
                    col(AttemptRow.id).in_([_attempt_of(e) for e in waiting]),
                    col(AttemptRow.batch_ref).is_(None),
                    col(AttemptRow.finished_at).is_(None),
                )
                .values(batch_ref=ref)
            )
            entries = entries_of(session, ref)
            _set(session, ref, size=len(entries), state=BatchState.SUBMITTING)
            if not entries:
                _set(session, ref, state=BatchState.ENDED, ended_at=now, leased_by=None)
                return None
        self._send(ref, owner, entries)
        return ref

    def _send(self, ref: str, owner: str, entries: list[Entry]) -> None:
        sendable = [(e, self._request(e)) for e in entries]
        requests = [(e.custom_id, request) for e, request in sendable if request is not None]
        for entry, request in sendable:
            if request is None:
                self._fail(entry, FailReason.INVALID_REQUEST, "its recipe left the config file")
        if not requests:
            self._end(ref, owner)
            return
        log.info("batch %s: sending %d entries: %s", ref, len(requests), _keys(entries))
        try:
            batch_id = self.client.submit(requests)
        except ModelCallFailed as failure:
            self._create_failed(ref, owner, entries, failure)
            return
        failpoint(Failpoint.AFTER_BATCH_CREATE)
        self._created(ref, owner, batch_id)

    def _created(self, ref: str, owner: str, batch_id: str) -> None:
        """Store the API's id at once; a pass that took this row over meanwhile and
        found another batch for it keeps that one, and ours is cancelled unused."""
        with self.store.transaction() as session:
            now = lease_now(session, self.clock)
            stored = _fenced(ref, owner, BatchState.SUBMITTING).values(
                batch_id=batch_id,
                state=BatchState.WAITING,
                submitted_at=now,
                may_exist=False,
                next_poll_at=now + self.poll_every,
                leased_by=None,
                lease_until=None,
            )
            if session.execute(stored).rowcount == 1:  # type: ignore[attr-defined]
                return
            kept = session.get(BatchRow, ref)
        if kept is None or kept.batch_id != batch_id:
            log.warning("batch %s: %s created after its row moved on; cancelled", ref, batch_id)
            self.client.cancel(batch_id)

    def _create_failed(
        self, ref: str, owner: str, entries: list[Entry], failure: ModelCallFailed
    ) -> None:
        """Unknown: the batch may exist, so it is looked for first next time. Refused for
        now (529, a refused connection): sent again after a backoff. Refused for good:
        its entries fail with the reason."""
        log.warning("batch %s: create failed (%s): %s", ref, failure.outcome, failure)
        if failure.outcome.retryable:
            may_exist = failure.outcome == AttemptOutcome.OUTCOME_UNKNOWN
            self._release(ref, owner, self._delay(1, failure.retry_after), may_exist=may_exist)
            return
        reason = FailReason.AUTH if failure.outcome == AttemptOutcome.AUTH else None
        for entry in entries:
            self._finish(entry, failure=failure)
            self._fail(entry, reason or FailReason.INVALID_REQUEST, str(failure))
        with self.store.transaction() as session:
            session.execute(
                _fenced(ref, owner, BatchState.SUBMITTING).values(
                    state=BatchState.FAILED, error=str(failure)[:2000], leased_by=None
                )
            )

    # --- a live batch, one pass at a time ----------------------------------------------

    def due_batches(self) -> list[str]:
        with self.store.read() as session:
            now = lease_now(session, self.clock)
            found = session.exec(
                select(BatchRow.id).where(
                    col(BatchRow.state).in_(LIVE), col(BatchRow.next_poll_at) <= now
                )
            ).all()
        return list(found)

    def advance(self, ref: str) -> None:
        """Take the batch's lease, then look again at a create without an answer, or
        poll a waiting batch and store its results once it has ended."""
        owner = new_owner("batch")
        row = self._take(ref, owner)
        if row is None:
            return
        with self.store.read() as session:
            entries = entries_of(session, ref)
        if not entries and row.state == BatchState.SUBMITTING:
            self._end(ref, owner)  # every entry fell back to a synchronous call
            return
        try:
            if row.state == BatchState.SUBMITTING:
                self._resubmit(row, owner, entries)
            else:
                self._poll(row, owner, entries)
        except ModelCallFailed as failure:
            log.warning("batch %s: %s; trying again later", ref, failure)
            self._release(ref, owner, self._delay(row.polls + 1, failure.retry_after))

    def _resubmit(self, row: BatchRow, owner: str, entries: list[Entry]) -> None:
        if row.may_exist:
            with self.store.read() as session:
                known = session.exec(
                    select(BatchRow.batch_id)
                    .where(col(BatchRow.batch_id).is_not(None))
                    .where(col(BatchRow.created_at) >= row.created_at - timedelta(hours=1))
                ).all()
            found = self.client.find_again(
                [e.custom_id for e in entries],
                row.created_at,
                size=row.size,
                known=[k for k in known if k is not None],
            )
            if isinstance(found, str):
                log.info("batch %s: its lost create is %s", row.id, found)
                self._created(row.id, owner, found)
                return
            if isinstance(found, Pending):
                self._release(row.id, owner, self._delay(row.polls + 1, None))
                return
        with self.store.transaction() as session:  # the world has none: send it now
            _set(session, row.id, size=len(entries), may_exist=True)
        self._send(row.id, owner, entries)

    def _poll(self, row: BatchRow, owner: str, entries: list[Entry]) -> None:
        assert row.batch_id is not None  # a waiting batch has its id
        if not entries:  # every entry fell back: no answer is wanted any more
            self.client.cancel(row.batch_id)
            self._end(row.id, owner)
            return
        status = self.client.poll(row.batch_id)
        if not status.ended:
            self._release(row.id, owner, self._delay(row.polls + 1, None))
            return
        results = self.client.results(row.batch_id)
        for entry in entries:
            self._settle(entry, results.get(entry.custom_id), status.ended_at)
        self._record_late_answers(row.id, results)
        self._end(row.id, owner)

    def _settle(
        self, entry: Entry, result: ModelReply | EntryFailure | None, ended_at: datetime | None
    ) -> None:
        """One entry of an ended batch: stored, sent again, drafted at once, or failed."""
        recipe, slot = self.recipes.get(entry.recipe), self._slot(entry)
        if recipe is None or slot is None:
            self._fail(entry, FailReason.INVALID_REQUEST, "its recipe left the config file")
            return
        waited = max(0.0, ((ended_at or self.clock.now()) - entry.started_at).total_seconds())
        if isinstance(result, ModelReply):
            reply = replace(result, latency_s=waited)
            batch_entry_ended(entry.recipe, BatchEntryResult.SUCCEEDED, waited, reply)
            self.drafting.store_answer(recipe, slot, entry.claim(), entry.number, reply)
            return
        batch_entry_ended(entry.recipe, result.result if result else MISSING, waited)
        failure = (
            result.error()
            if result is not None
            else ModelCallFailed(AttemptOutcome.REJECTED_RETRYABLE, "not in the batch's results")
        )
        self._finish(entry, failure=failure)
        if not failure.outcome.retryable:
            reason = FailReason.AUTH if failure.outcome == AttemptOutcome.AUTH else None
            self._fail(entry, reason or FailReason.INVALID_REQUEST, str(failure))
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
            used = session.exec(
                select(sa.func.count())
                .select_from(AttemptRow)
                .where(col(AttemptRow.draft_key) == entry.draft_key)
            ).one()
            draft = lock_draft(session, entry.draft_key)
            if draft is None or draft.claimed_by != entry.owner:
                return True  # no longer ours: nothing to send
            if used - draft.attempts_before >= recipe.max_attempts:
                return False
            add_attempt(
                session,
                run_id=entry.run_id,
                number=entry.number + 1,
                draft_key=entry.draft_key,
                recipe=recipe.name,
                worker=entry.owner,
                model=recipe.model,
                started_at=now,
                mode=Drafting.BATCH.value,
                wait_until=entry.wait_until,
            )
        return True

    def _record_late_answers(self, ref: str, results: dict[str, ModelReply | EntryFailure]) -> None:
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

    # --- entries whose wait ran out ------------------------------------------------------

    def fall_back_late(self) -> int:
        """Take over the claim of every entry past its wait and draft it synchronously,
        once: the take-over names the owner it read, so two passes never both call."""
        with self.store.read() as session:
            late = late_entries(session, lease_now(session, self.clock))
        if late:
            failpoint(Failpoint.BATCH_LATE_READ)
        taken = 0
        for entry in late:
            recipe, slot = self.recipes.get(entry.recipe), self._slot(entry)
            if recipe is None or slot is None:
                self._fail(entry, FailReason.INVALID_REQUEST, "its recipe left the config file")
                continue
            claim = self._take_over(entry, recipe)
            if claim is None:
                continue
            taken += 1
            self.later(partial(self.drafting.draft_claimed, recipe, slot, claim))
        return taken

    def _take_over(self, entry: Entry, recipe: Recipe) -> Claim | None:
        owner = new_owner(self.drafting.worker)
        takeover_after = recipe.takeover_after
        with self.store.transaction() as session:
            now = lease_now(session, self.clock)
            lock_run(session, entry.run_id)  # run, then draft: core/store/rows.py
            draft = lock_draft(session, entry.draft_key)
            if draft is None or not held_by(draft, entry.owner):
                return None
            draft.claimed_by, draft.lease_until, draft.updated_at = owner, now + takeover_after, now
            session.add(draft)
            abandon_unfinished_attempts(session, entry.draft_key, now)
            why = f"waited in a batch until {entry.wait_until:%H:%M:%S}Z: drafted at once"
            note_draft(session, draft, actor=owner, at=now, reason=why)
        return Claim(entry.run_id, entry.draft_key, entry.version, owner, took_over=True)

    # --- inside --------------------------------------------------------------------------

    def _request(self, entry: Entry) -> DraftRequest | None:
        recipe, slot = self.recipes.get(entry.recipe), self._slot(entry)
        if recipe is None or slot is None:
            return None
        return self.drafting.request_for(recipe, slot, entry.version)

    def _slot(self, entry: Entry) -> Slot | None:
        recipe = self.recipes.get(entry.recipe)
        return None if recipe is None else slot_of_run(recipe, entry.run_id, entry.slot_at)

    def _fail(self, entry: Entry, reason: FailReason, detail: str) -> None:
        try:
            self.drafting.fail(entry.claim(), reason, detail)
        except LostClaim as lost:  # someone else holds it now, and decides
            log.info("batch entry %s not failed: %s", entry.draft_key, lost)

    def _finish(self, entry: Entry, *, failure: ModelCallFailed) -> None:
        with self.store.transaction() as session:
            values: dict[str, object] = {"finished_at": lease_now(session, self.clock)}
            finish_attempt(session, entry.run_id, entry.number, values, failure=failure)

    def _take(self, ref: str, owner: str) -> BatchRow | None:
        with self.store.transaction() as session:
            now = lease_now(session, self.clock)
            taken = session.execute(
                sa.update(BatchRow)
                .where(
                    col(BatchRow.id) == ref,
                    col(BatchRow.state).in_(LIVE),
                    col(BatchRow.next_poll_at) <= now,
                    col(BatchRow.leased_by).is_(None) | (col(BatchRow.lease_until) < now),
                )
                .values(leased_by=owner, lease_until=now + self.lease)
            )
            if taken.rowcount != 1:  # type: ignore[attr-defined]
                return None
            return session.get(BatchRow, ref)

    def _release(
        self,
        ref: str,
        owner: str,
        delay: timedelta,
        *,
        may_exist: bool | None = None,
    ) -> None:
        with self.store.transaction() as session:
            now = lease_now(session, self.clock)
            values: dict[str, object] = {
                "leased_by": None,
                "lease_until": None,
                "next_poll_at": now + delay,
                "polls": col(BatchRow.polls) + 1,
            }
            if may_exist is not None:
                values["may_exist"] = may_exist
            session.execute(_fenced(ref, owner, *LIVE).values(**values))

    def _end(self, ref: str, owner: str) -> None:
        with self.store.transaction() as session:
            now = lease_now(session, self.clock)
            session.execute(
                _fenced(ref, owner, *LIVE).values(
                    state=BatchState.ENDED, ended_at=now, leased_by=None, lease_until=None
                )
            )

    def _delay(self, polls: int, retry_after: float | None) -> timedelta:
        seconds = self.backoff.delay(polls, retry_after)
        return timedelta(seconds=max(seconds, self.poll_every.total_seconds() / 2))


def _fenced(ref: str, owner: str, *states: BatchState) -> sa.Update:
    """An update of batch `ref` that matches only while `owner` holds its lease."""
    return sa.update(BatchRow).where(
        col(BatchRow.id) == ref,
        col(BatchRow.state).in_(states),
        col(BatchRow.leased_by) == owner,
    )


def _set(session: Session, ref: str, **values: object) -> None:
    """An update of a batch row this transaction wrote itself."""
    session.execute(sa.update(BatchRow).where(col(BatchRow.id) == ref).values(**values))


def _attempt_of(entry: Entry) -> str:
    return attempt_id(entry.run_id, entry.number)


def _keys(entries: list[Entry]) -> str:
    return ", ".join(f"{e.custom_id} ({e.draft_key})" for e in entries)
