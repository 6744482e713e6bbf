"""Receipts for external effects (DESIGN.md §4.3), as Stripe's idempotency keys work.

One row per effect key, with the hash of its canonical payload. The same key and the
same payload return the recorded result; the same key with a different payload raises
`KeyPayloadConflict` and changes nothing; a live in-flight receipt answers "in
progress". A receipt whose holder died mid-call is `uncertain`: look before you leap.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from sqlmodel import Session, col, select

from core.errors import EffectInProgress, KeyPayloadConflict
from core.history import move_effect, record_event
from core.identity import payload_hash
from core.models import EffectRow
from core.ports import Clock
from core.states import EffectState
from core.store import Store, insert_ignore


class EffectDecision(StrEnum):
    ACT = "act"  # you hold the in-flight receipt: perform the effect once, under this key
    DONE = "done"  # it already happened: here is the recorded result
    RECONCILE = "reconcile"  # it may have happened: ask the destination before acting
    WAIT = "wait"  # it was refused with a time to wait (Retry-After) that has not passed


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
class EffectStart:
    decision: EffectDecision
    receipt: Receipt


class EffectLedger:
    def __init__(self, store: Store, clock: Clock, worker: str) -> None:
        self.store, self.clock, self.worker = store, clock, worker

    def begin(
        self,
        key: str,
        *,
        draft_key: str,
        step: str,
        payload: Any,
        lease: timedelta,
        run_id: str | None = None,
    ) -> EffectStart:
        """Claim the right to perform an effect, or learn what became of it."""
        digest = payload_hash(payload)
        with self.store.transaction() as session:
            now = self.clock.now()
            inserted = insert_ignore(
                session,
                EffectRow,
                key=key,
                draft_key=draft_key,
                step=step,
                payload_hash=digest,
                state=EffectState.IN_FLIGHT,
                claimed_by=self.worker,
                lease_until=now + lease,
                tries=1,
                created_at=now,
                updated_at=now,
            )
            row = self._locked(session, key)
            if inserted:
                record_event(
                    session,
                    subject="effect",
                    subject_id=key,
                    run_id=run_id,
                    to_state=EffectState.IN_FLIGHT,
                    actor=self.worker,
                    at=now,
                )
                return EffectStart(EffectDecision.ACT, Receipt.of(row))
            if row.payload_hash != digest and row.state == EffectState.FAILED:
                # It is known not to have happened, so nothing is bound to the old payload
                # (an approved draft edited after a failed publish, for example).
                row.payload_hash = digest
            if row.payload_hash != digest:
                raise KeyPayloadConflict(
                    f"effect {key} was recorded with another payload "
                    f"({row.payload_hash[:12]} ≠ {digest[:12]}): nothing was changed"
                )
            return self._answer_existing(session, row, lease, now, run_id)

    def _answer_existing(
        self, session: Session, row: EffectRow, lease: timedelta, now: datetime, run_id: str | None
    ) -> EffectStart:
        state = EffectState(row.state)
        if state == EffectState.SUCCEEDED:
            return EffectStart(EffectDecision.DONE, Receipt.of(row))
        if state == EffectState.UNCERTAIN:
            return EffectStart(EffectDecision.RECONCILE, Receipt.of(row))
        if state == EffectState.IN_FLIGHT:
            if row.lease_until is not None and row.lease_until > now:
                raise EffectInProgress(f"effect {row.key} is in flight at {row.claimed_by}")
            why = f"holder {row.claimed_by} stopped mid-call; outcome unknown"
            move_effect(
                session,
                row,
                EffectState.UNCERTAIN,
                actor=self.worker,
                at=now,
                run_id=run_id,
                reason=why,
            )
            return EffectStart(EffectDecision.RECONCILE, Receipt.of(row))
        if row.lease_until is not None and row.lease_until > now:  # a failed one's not-before
            return EffectStart(EffectDecision.WAIT, Receipt.of(row))
        row.claimed_by, row.lease_until, row.tries = self.worker, now + lease, row.tries + 1
        move_effect(session, row, EffectState.IN_FLIGHT, actor=self.worker, at=now, run_id=run_id)
        return EffectStart(EffectDecision.ACT, Receipt.of(row))

    def succeed(
        self,
        key: str,
        external_id: str,
        result: dict[str, Any] | None = None,
        *,
        run_id: str | None = None,
    ) -> Receipt:
        """It happened (we saw it, or the destination says so): record the proof."""
        return self._settle(
            key, EffectState.SUCCEEDED, run_id, external_id=external_id, result=result
        )

    def fail(
        self,
        key: str,
        detail: str,
        *,
        run_id: str | None = None,
        retry_after: timedelta | None = None,
    ) -> Receipt:
        """It is known not to have happened: a later `begin` may act again, but not
        before `retry_after` has passed (`begin` answers WAIT until then)."""
        return self._settle(key, EffectState.FAILED, run_id, detail=detail, not_before=retry_after)

    def mark_uncertain(self, key: str, detail: str, *, run_id: str | None = None) -> Receipt:
        """It may have happened: nobody acts again before the destination is asked."""
        return self._settle(key, EffectState.UNCERTAIN, run_id, detail=detail)

    def get(self, key: str) -> Receipt | None:
        with self.store.transaction() as session:
            row = session.exec(select(EffectRow).where(col(EffectRow.key) == key)).one_or_none()
            return Receipt.of(row) if row else None

    def _settle(
        self,
        key: str,
        target: EffectState,
        run_id: str | None,
        *,
        external_id: str | None = None,
        result: dict[str, Any] | None = None,
        detail: str | None = None,
        not_before: timedelta | None = None,
    ) -> Receipt:
        with self.store.transaction() as session:
            row = self._locked(session, key)
            now = self.clock.now()
            live = row.lease_until is not None and row.lease_until > now
            if row.state == EffectState.IN_FLIGHT and live and row.claimed_by != self.worker:
                raise EffectInProgress(f"effect {key} is in flight at {row.claimed_by}")
            if external_id is not None:
                row.external_id = external_id
            if result is not None:
                row.result = json.dumps(result, sort_keys=True)
            row.claimed_by = None
            row.lease_until = now + not_before if not_before else None
            move_effect(
                session, row, target, actor=self.worker, at=now, run_id=run_id, reason=detail
            )
            return Receipt.of(row)

    @staticmethod
    def _locked(session: Session, key: str) -> EffectRow:
        return session.exec(
            select(EffectRow).where(col(EffectRow.key) == key).with_for_update()
        ).one()
