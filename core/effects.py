"""Receipts for external effects (DESIGN.md §4.3), as Stripe's idempotency keys work.

One row per effect key, with the hash of its canonical payload. The same key and the
same payload return the recorded result; the same key with a different payload raises
`KeyPayloadConflict` and changes nothing; a live in-flight receipt answers "in
progress". A receipt whose holder died mid-call is `uncertain`: look before you leap.

Every receipt that is acted on or reconciled is held by an owner token unique to that
attempt, renewed by heartbeat while the call runs (429 waits included); only that owner
can settle it, so a holder whose lease was taken over changes nothing.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlmodel import Session, col

from core.errors import (
    ConcurrentChange,
    EffectInProgress,
    EffectNotSent,
    EffectOutcomeUnknown,
    KeyPayloadConflict,
)
from core.history import guarded_update, move_effect, record_event
from core.identity import payload_hash
from core.leases import Heartbeat, new_owner
from core.models import EffectRow
from core.policies import EffectDecision
from core.ports import Clock
from core.rows import effect_row, lock_effect, required
from core.states import EffectState
from core.store import Store, insert_ignore

DEFAULT_HEARTBEAT = timedelta(seconds=2)


@dataclass(frozen=True)
class Receipt:
    key: str
    state: EffectState
    external_id: str | None
    result: dict[str, Any] | None
    detail: str | None
    tries: int

    @classmethod
    def of(cls, row: EffectRow) -> Receipt:
        return cls(
            key=row.key,
            state=EffectState(row.state),
            external_id=row.external_id,
            result=json.loads(row.result) if row.result else None,
            detail=row.detail,
            tries=row.tries,
        )


@dataclass(frozen=True)
class EffectSpec:
    """One external effect: its key, what it is bound to, and how long one call may hold it."""

    key: str
    draft_key: str
    step: str
    payload: Any
    lease: timedelta
    run_id: str | None = None


@dataclass(frozen=True)
class EffectStart:
    """What `begin` decided. For ACT and RECONCILE, `owner` holds the receipt: only it
    may settle it."""

    decision: EffectDecision
    receipt: Receipt
    spec: EffectSpec
    owner: str | None = None

    @property
    def key(self) -> str:
        return self.spec.key


@dataclass(frozen=True)
class Proof:
    """What shows an effect happened: the destination's id, and anything worth keeping."""

    external_id: str
    result: dict[str, Any] | None = None


class EffectLedger:
    def __init__(
        self, store: Store, clock: Clock, worker: str, heartbeat: timedelta = DEFAULT_HEARTBEAT
    ) -> None:
        self.store, self.clock, self.worker = store, clock, worker
        self.heartbeat = heartbeat

    def begin(self, spec: EffectSpec) -> EffectStart:
        """Claim the right to perform an effect, or learn what became of it."""
        digest = payload_hash(spec.payload)
        owner = new_owner(self.worker)
        with self.store.transaction() as session:
            now = self.clock.now()
            inserted = insert_ignore(
                session,
                EffectRow,
                key=spec.key,
                draft_key=spec.draft_key,
                step=spec.step,
                payload_hash=digest,
                state=EffectState.IN_FLIGHT,
                claimed_by=owner,
                lease_until=now + spec.lease,
                tries=1,
                created_at=now,
                updated_at=now,
            )
            row = required(lock_effect(session, spec.key), f"effect {spec.key}")
            if inserted:
                record_event(
                    session,
                    subject="effect",
                    subject_id=spec.key,
                    run_id=spec.run_id,
                    to_state=EffectState.IN_FLIGHT,
                    actor=owner,
                    at=now,
                )
                return EffectStart(EffectDecision.ACT, Receipt.of(row), spec, owner)
            if row.payload_hash != digest and row.state == EffectState.FAILED:
                # It is known not to have happened, so nothing is bound to the old payload
                # (an approved draft edited after a failed publish, for example).
                row.payload_hash = digest
            if row.payload_hash != digest:
                raise KeyPayloadConflict(
                    f"effect {spec.key} was recorded with another payload "
                    f"({row.payload_hash[:12]} ≠ {digest[:12]}): nothing was changed"
                )
            return self._answer_existing(session, row, spec, owner, now)

    def _answer_existing(
        self, session: Session, row: EffectRow, spec: EffectSpec, owner: str, now: datetime
    ) -> EffectStart:
        live = row.lease_until is not None and row.lease_until > now
        if row.state == EffectState.SUCCEEDED:
            return EffectStart(EffectDecision.DONE, Receipt.of(row), spec)
        if row.state in (EffectState.IN_FLIGHT, EffectState.UNCERTAIN) and live:
            raise EffectInProgress(f"effect {row.key} is held by {row.claimed_by}")
        if row.state == EffectState.IN_FLIGHT:
            why = f"holder {row.claimed_by} stopped mid-call; outcome unknown"
            row.claimed_by, row.lease_until = None, None
            move_effect(
                session,
                row,
                EffectState.UNCERTAIN,
                actor=owner,
                at=now,
                run_id=spec.run_id,
                reason=why,
            )
        if row.state == EffectState.UNCERTAIN:
            # one reconciler at a time: the lookup and what follows it belong to `owner`
            row.claimed_by, row.lease_until = owner, now + spec.lease
            guarded_update(session, row, state=EffectState.UNCERTAIN)
            return EffectStart(EffectDecision.RECONCILE, Receipt.of(row), spec, owner)
        if live:  # a failed one's not-before (Retry-After)
            return EffectStart(EffectDecision.WAIT, Receipt.of(row), spec)
        row.claimed_by, row.lease_until, row.tries = owner, now + spec.lease, row.tries + 1
        move_effect(session, row, EffectState.IN_FLIGHT, actor=owner, at=now, run_id=spec.run_id)
        return EffectStart(EffectDecision.ACT, Receipt.of(row), spec, owner)

    def succeed(self, start: EffectStart, proof: Proof) -> Receipt:
        """It happened (we saw it, or the destination says so): record the proof."""
        return self._settle(start, EffectState.SUCCEEDED, proof=proof)

    def fail(
        self, start: EffectStart, detail: str, *, retry_after: timedelta | None = None
    ) -> Receipt:
        """It is known not to have happened: a later `begin` may act again, but not
        before `retry_after` has passed (`begin` answers WAIT until then)."""
        return self._settle(start, EffectState.FAILED, detail=detail, not_before=retry_after)

    def mark_uncertain(self, start: EffectStart, detail: str) -> Receipt:
        """It may have happened: nobody acts again before the destination is asked."""
        return self._settle(start, EffectState.UNCERTAIN, detail=detail)

    def release(self, start: EffectStart) -> None:
        """Give up holding an uncertain receipt we could not settle (the lookup could not
        tell): it stays uncertain, free for the next reconciler or a person."""
        with self.store.transaction() as session:
            session.execute(
                sa.update(EffectRow)
                .where(
                    col(EffectRow.key) == start.key,
                    col(EffectRow.claimed_by) == start.owner,
                    col(EffectRow.state) == EffectState.UNCERTAIN,
                )
                .values(claimed_by=None, lease_until=None)
            )

    def renew(self, start: EffectStart) -> bool:
        """Extend the owner's lease; False when the receipt is no longer its."""
        with self.store.transaction() as session:
            renewed = session.execute(
                sa.update(EffectRow)
                .where(
                    col(EffectRow.key) == start.key,
                    col(EffectRow.claimed_by) == start.owner,
                    col(EffectRow.state).in_([EffectState.IN_FLIGHT, EffectState.UNCERTAIN]),
                )
                .values(lease_until=self.clock.now() + start.spec.lease)
            )
            return bool(renewed.rowcount == 1)  # type: ignore[attr-defined]

    @contextmanager
    def held(self, start: EffectStart) -> Iterator[Heartbeat]:
        """Keep the receipt's lease alive while the call runs, however long it waits."""
        with Heartbeat(lambda: self.renew(start), self.heartbeat, start.key) as beat:
            yield beat

    def get(self, key: str) -> Receipt | None:
        with self.store.transaction() as session:
            row = effect_row(session, key)
            return Receipt.of(row) if row else None

    def perform(
        self,
        spec: EffectSpec,
        act: Callable[[], Proof],
        *,
        lookup: Callable[[], Proof | None] | None = None,
        repeatable: bool = False,
    ) -> Receipt | None:
        """The post-once sequence: begin → act under heartbeat → succeed, fail or uncertain.

        Returns the receipt when the effect is known to have happened, else None (in
        progress elsewhere, refused, waiting, or unknown). An uncertain receipt is looked up
        with `lookup` before any new attempt (`LookupUnavailable` propagates once the
        receipt is released); without one it stays uncertain, unless the effect is
        `repeatable` (an update: doing it twice is harmless).
        """
        try:
            start = self.begin(spec)
        except EffectInProgress:
            return None
        if start.decision == EffectDecision.DONE:
            return start.receipt
        if start.decision == EffectDecision.WAIT:
            return None
        if start.decision == EffectDecision.RECONCILE and not repeatable:
            if lookup is None:
                self.release(start)  # nobody can tell: a second ping is worse than none
                return None
            try:
                found = lookup()
            except Exception:
                self.release(start)
                raise
            if found is not None:
                return self.succeed(start, found)
            self.fail(start, "absent at the destination")
            return self.perform(spec, act, lookup=lookup)  # clearly absent: act once now
        return self._act(start, act, repeatable=repeatable)

    def _act(
        self, start: EffectStart, act: Callable[[], Proof], *, repeatable: bool
    ) -> Receipt | None:
        try:
            with self.held(start):
                proof = act()
        except EffectNotSent as exc:
            wait = timedelta(seconds=exc.retry_after) if exc.retry_after else None
            self.fail(start, str(exc), retry_after=wait)
            return None
        except EffectOutcomeUnknown as exc:
            if repeatable:
                self.fail(start, str(exc))
            else:
                self.mark_uncertain(start, str(exc))
            return None
        return self.succeed(start, proof)

    def _settle(
        self,
        start: EffectStart,
        target: EffectState,
        *,
        proof: Proof | None = None,
        detail: str | None = None,
        not_before: timedelta | None = None,
    ) -> Receipt:
        """Only the owner that holds the receipt settles it: a holder whose lease was
        taken over (or settled by a person) raises `ConcurrentChange` and changes nothing."""
        with self.store.transaction() as session:
            row = required(lock_effect(session, start.key), f"effect {start.key}")
            if row.claimed_by != start.owner or start.owner is None:
                raise ConcurrentChange(
                    f"effect {start.key} is no longer held by {start.owner} "
                    f"(now {row.state}, {row.claimed_by or 'unheld'}): nothing was changed"
                )
            now = self.clock.now()
            if proof is not None:
                row.external_id = proof.external_id
                if proof.result is not None:
                    row.result = json.dumps(proof.result, sort_keys=True)
            row.claimed_by = None
            row.lease_until = now + not_before if not_before else None
            move_effect(
                session,
                row,
                target,
                actor=start.owner,
                at=now,
                run_id=start.spec.run_id,
                reason=detail,
            )
            return Receipt.of(row)
