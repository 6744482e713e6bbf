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
from datetime import timedelta

import sqlalchemy as sa
from sqlmodel import Session, col, select

from core.drafting.attempts import Backoff
from core.drafting.batch_drafter import BatchDrafter, Pending
from core.drafting.batch_entries import RECIPE_GONE, BatchEntries, Later
from core.drafting.batch_queue import (
    Entry,
    entries_of,
    gathered_for,
    unsent_entries,
)
from core.drafting.service import DraftingService
from core.drafting_policies import AttemptOutcome
from core.errors import ModelCallFailed
from core.failpoints import Failpoint, failpoint
from core.identity import attempt_id
from core.models import AttemptRow, BatchRow
from core.policies import FailReason
from core.ports import Clock, DraftRequest
from core.setup.config import Recipe
from core.states import BatchState
from core.store.engine import Store
from core.store.leases import BATCHES, acquire, fence, hold, lease_now, new_owner, release

log = logging.getLogger(__name__)

LIVE = (BatchState.SUBMITTING, BatchState.WAITING)


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
        self.entries = BatchEntries(store, recipes, drafting, clock, later)

    def run_once(self) -> None:
        self.gather()
        for ref in self.due_batches():
            self.advance(ref)
        self.entries.fall_back_late()

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
            batch = BatchRow(
                id=ref, state=BatchState.SUBMITTING, size=0, created_at=now, next_poll_at=now
            )
            hold(batch, BATCHES, owner, now + self.lease)
            session.add(batch)
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
                release(
                    session,
                    BATCHES,
                    ref,
                    owner,
                    now,
                    BatchState.SUBMITTING,
                    state=BatchState.ENDED,
                    ended_at=now,
                )
                return None
        self._send(ref, owner, entries)
        return ref

    def _send(self, ref: str, owner: str, entries: list[Entry]) -> None:
        sendable = [(e, self._request(e)) for e in entries]
        requests = [(e.custom_id, request) for e, request in sendable if request is not None]
        for entry, request in sendable:
            if request is None:
                self.entries.fail(entry, FailReason.INVALID_REQUEST, RECIPE_GONE)
        if not requests:
            self._end(ref, owner)
            return
        if not self._fence(ref, owner, size=len(requests)):
            return  # lapsed or taken over meanwhile: the pass that holds it sends
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
            if release(
                session,
                BATCHES,
                ref,
                owner,
                now,
                BatchState.SUBMITTING,
                batch_id=batch_id,
                state=BatchState.WAITING,
                submitted_at=now,
                may_exist=False,
                next_poll_at=now + self.poll_every,
            ):
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
            self.entries.finish(entry, failure=failure)
            self.entries.fail(entry, reason or FailReason.INVALID_REQUEST, str(failure))
        with self.store.transaction() as session:
            now = lease_now(session, self.clock)
            failed = {"state": BatchState.FAILED, "error": str(failure)[:2000]}
            release(session, BATCHES, ref, owner, now, BatchState.SUBMITTING, **failed)

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
        self._send(row.id, owner, entries)  # the world has none: send it now, fenced

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
            self.entries.settle(entry, results.get(entry.custom_id), status.ended_at)
        self.entries.record_late_answers(row.id, results)
        self._end(row.id, owner)

    # --- inside --------------------------------------------------------------------------

    def _request(self, entry: Entry) -> DraftRequest | None:
        recipe, slot = self.recipes.get(entry.recipe), self.entries.slot(entry)
        if recipe is None or slot is None:
            return None
        return self.drafting.stored_request(recipe, slot, entry.version)

    def _take(self, ref: str, owner: str) -> BatchRow | None:
        with self.store.transaction() as session:
            now = lease_now(session, self.clock)
            due = col(BatchRow.next_poll_at) <= now
            if not acquire(session, BATCHES, owner, self.lease, now, col(BatchRow.id) == ref, due):
                return None
            return session.get(BatchRow, ref)

    def _fence(self, ref: str, owner: str, *, size: int) -> bool:
        """The last look before a create: the row is still ours, submitting and unexpired
        by the database's clock; its lease is extended for the call, and it records the
        size sent (a lost create is looked for by it) and that a batch may now exist."""
        with self.store.transaction() as session:
            now = lease_now(session, self.clock)
            submitting = BatchState.SUBMITTING
            return fence(
                session, BATCHES, ref, owner, self.lease, now, submitting, size=size, may_exist=True
            )

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
                "next_poll_at": now + delay,
                "polls": col(BatchRow.polls) + 1,
            }
            if may_exist is not None:
                values["may_exist"] = may_exist
            release(session, BATCHES, ref, owner, now, *LIVE, **values)

    def _end(self, ref: str, owner: str) -> None:
        with self.store.transaction() as session:
            now = lease_now(session, self.clock)
            release(session, BATCHES, ref, owner, now, *LIVE, state=BatchState.ENDED, ended_at=now)

    def _delay(self, polls: int, retry_after: float | None) -> timedelta:
        backoff = Backoff(self.poll_every.total_seconds(), self.poll_cap.total_seconds())
        seconds = backoff.delay(polls, retry_after)
        return timedelta(seconds=max(seconds, self.poll_every.total_seconds() / 2))


def _set(session: Session, ref: str, **values: object) -> None:
    """An update of a batch row this transaction wrote itself."""
    session.execute(sa.update(BatchRow).where(col(BatchRow.id) == ref).values(**values))


def _attempt_of(entry: Entry) -> str:
    return attempt_id(entry.run_id, entry.number)


def _keys(entries: list[Entry]) -> str:
    return ", ".join(f"{e.custom_id} ({e.draft_key})" for e in entries)
