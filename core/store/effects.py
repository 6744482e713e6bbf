"""Receipts for external effects (docs/design.md §7), as Stripe's idempotency keys work.

One row per effect key, with the hash of its canonical payload. The same key and the
same payload return the recorded result; the same key with a different payload raises
`KeyPayloadConflict` and changes nothing; a live in-flight receipt answers "in
progress". A receipt whose holder died mid-call is `uncertain`: look before you leap.

Every receipt that is acted on or reconciled is held by an owner token unique to that
attempt, renewed by heartbeat while the look-up and the call run (429 waits included);
only that owner can settle it, so a holder whose lease was taken over changes nothing.
`perform` is the one post-once sequence every external effect goes through: look up
under heartbeat, then, immediately before the call, `fence` checks in the database that
the receipt is still ours (owner and unexpired lease, by the database's clock) and that
the action may still happen. The one case left, a call already on the wire when the
lease lapsed, is bounded: a lapsed holder is taken over only once its call's time limit
has passed too, so the taker's look-up sees whatever that call did.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

from core.errors import (
    EffectInProgress,
    EffectNotSent,
    EffectOutcomeUnknown,
    KeyPayloadConflict,
    LeaseLost,
    LookupUnavailable,
)
from core.identity import payload_hash
from core.policies import EffectDecision, EffectOutcome
from core.ports import Clock
from core.states import EffectState, EventSubject
from core.store import leases
from core.store.engine import Store
from core.store.leases import EFFECT_RECEIPTS as RECEIPTS
from core.store.leases import Heartbeat, lease_now, new_owner
from core.store.receipt_rows import SENDING, answer_existing, settle_in, wait_after
from core.store.receipts import EffectSpec, EffectStart, MayAct, Performed, Proof, Receipt
from core.store.rows import effect_row, lock_effect, required
from core.store.transitions import move_effect, record_event

DEFAULT_HEARTBEAT = timedelta(seconds=2)


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
            now = lease_now(session, self.clock)
            row_of: dict[str, Any] = {
                "key": spec.key,
                "draft_key": spec.draft_key,
                "step": spec.step,
            }
            inserted = leases.claim_new(
                session,
                RECEIPTS,
                owner,
                spec.lease,
                now,
                **row_of,
                payload_hash=digest,
                tries=1,
                created_at=now,
                updated_at=now,
            )
            row = required(lock_effect(session, spec.key), f"effect {spec.key}")
            if inserted:
                record_event(
                    session,
                    subject=EventSubject.EFFECT,
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
            return answer_existing(session, row, spec, owner, now)

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
            now = lease_now(session, self.clock)
            leases.release(session, RECEIPTS, start.key, start.owner, now, EffectState.UNCERTAIN)

    def renew(self, start: EffectStart) -> bool:
        """Extend the owner's lease; False when the receipt is no longer its."""
        owner = start.owner or ""
        return leases.renew(self.store, self.clock, RECEIPTS, start.key, owner, start.spec.lease)

    @contextmanager
    def held(self, start: EffectStart) -> Iterator[Heartbeat]:
        """Keep the receipt's lease alive while the look-up and the call run."""
        with Heartbeat(lambda: self.renew(start), self.heartbeat, start.key) as beat:
            yield beat

    def fence(
        self, start: EffectStart, beat: Heartbeat, may_act: MayAct | None = None
    ) -> str | None:
        """The last look before the call, in one transaction: `may_act` first (it locks
        the run and draft it reads), then the receipt, which must still be ours, in flight
        and unexpired by the database's clock; its lease is renewed for the call. None:
        go ahead. A reason: the effect may no longer happen, and the receipt says so.
        `LeaseLost`: it is no longer ours, and nothing may be sent or written."""
        if beat.lost.is_set():
            raise LeaseLost(f"effect {start.key}: the heartbeat of {start.owner} lost it")
        with self.store.transaction() as session:
            refusal = may_act(session, lease_now(session, self.clock)) if may_act else None
            # read again once may_act's row locks are held: waiting for them ages a
            # time read before (docs/design.md §5: lease times are read once the write lock is held)
            now = lease_now(session, self.clock)
            owner, lease = start.owner or "", start.spec.lease
            if not leases.fence(
                session, RECEIPTS, start.key, owner, lease, now, EffectState.IN_FLIGHT
            ):
                raise LeaseLost(f"effect {start.key} is no longer held by {start.owner}")
            if refusal is not None:
                settle_in(session, start, EffectState.FAILED, now, detail=refusal)
            return refusal

    def _mark_sending(self, start: EffectStart, beat: Heartbeat) -> None:
        """The receipt says its call is leaving now, written as the fence is: only while
        it is still ours and unexpired. Before this, a dead holder provably sent nothing."""
        if beat.lost.is_set():
            raise LeaseLost(f"effect {start.key}: the heartbeat of {start.owner} lost it")
        with self.store.transaction() as session:
            now = lease_now(session, self.clock)
            owner, lease, state = start.owner or "", start.spec.lease, EffectState.IN_FLIGHT
            if not leases.fence(
                session, RECEIPTS, start.key, owner, lease, now, state, detail=SENDING
            ):
                raise LeaseLost(f"effect {start.key} is no longer held by {start.owner}")

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
        may_act: MayAct | None = None,
        look_first: bool = False,
        repeatable: bool = False,
        prepare: Callable[[], None] | None = None,
        before_call: Callable[[], None] | None = None,
    ) -> Performed:
        """The post-once sequence: begin → (look up) → fence → act → settle, the look-up
        and the call under one heartbeat. `prepare` (the post's own uploads: effects of
        their own) runs after the fence, and the fence is passed again after it, so the
        call is still made only while the receipt is ours and the effect allowed.

        An uncertain receipt is looked up before any new attempt: found, it is recorded;
        clearly absent, the same owner acts once; `lookup` cannot tell (or there is none),
        it stays uncertain (CANNOT_TELL). A `repeatable` effect (an update: doing it twice
        is harmless) whose holder died is reopened without a look-up and done again.
        `look_first` looks even on a first attempt (a publication: a database restored
        from a backup has no receipt, the world does). `before_call` runs just before the
        call, after the last fence and before a `marks_send` spec's mark (a failpoint).
        """
        start = self._begin_or_answer(spec)
        if isinstance(start, Performed):
            return start
        if start.decision == EffectDecision.WAIT:
            return Performed(EffectOutcome.WAITING, start.receipt, start.receipt.detail)
        try:
            with self.held(start) as beat:
                reconcile = start.decision == EffectDecision.RECONCILE and not repeatable
                if reconcile or (look_first and lookup is not None):
                    looked = self._look(start, lookup, must_know=reconcile)
                    if isinstance(looked, Performed):
                        return looked
                    if reconcile:
                        start = self._reopen(start, "absent at the destination")
                elif start.decision == EffectDecision.RECONCILE:  # repeatable: do it again
                    start = self._reopen(start, "repeatable: done again")
                refusal = self.fence(start, beat, may_act)
                if refusal is None and prepare is not None:
                    unprepared = self._prepare(start, prepare)
                    if unprepared is not None:
                        return unprepared
                    refusal = self.fence(start, beat, may_act)  # it took time: look again
                if refusal is not None:
                    return Performed(EffectOutcome.REFUSED, self.get(spec.key), refusal)
                if before_call is not None:
                    before_call()
                if spec.marks_send:
                    self._mark_sending(start, beat)
                return self._act(start, act, repeatable=repeatable)
        except LeaseLost as exc:
            return Performed(EffectOutcome.LEASE_LOST, detail=str(exc))

    def _begin_or_answer(self, spec: EffectSpec) -> EffectStart | Performed:
        """`begin`, or what needs no call at all: in progress elsewhere, or done."""
        try:
            start = self.begin(spec)
        except EffectInProgress as exc:
            return Performed(EffectOutcome.IN_PROGRESS, detail=str(exc))
        if start.decision == EffectDecision.DONE:
            return Performed(EffectOutcome.DONE, start.receipt)
        return start

    def settle_by_lookup(
        self,
        spec: EffectSpec,
        lookup: Callable[[], Proof | None],
        *,
        not_sent: str,
        record: Callable[[Proof | None], None] | None = None,
    ) -> Performed:
        """Reconcile only, never act: find out what became of an effect that may no
        longer happen (its draft was decided, its run cancelled). Found: succeeded.
        Absent: failed with `not_sent`. A receipt nobody sent yet fails at once. `record`
        is told what was found before the receipt settles, so a caller that notes it
        elsewhere and stops in between finds the receipt unsettled and notes it again."""
        start = self._begin_or_answer(spec)
        if isinstance(start, Performed):
            return start
        if start.decision != EffectDecision.RECONCILE:  # never sent: it never will be now
            return Performed(EffectOutcome.REFUSED, self.fail(start, not_sent), not_sent)
        with self.held(start):
            try:
                found = lookup()
            except LookupUnavailable as exc:
                self.release(start)
                return Performed(EffectOutcome.CANNOT_TELL, self.get(spec.key), str(exc))
            if record is not None:
                record(found)
            if found is None:
                return Performed(EffectOutcome.REFUSED, self.fail(start, not_sent), not_sent)
            return Performed(EffectOutcome.FOUND, self.succeed(start, found))

    def _look(
        self, start: EffectStart, lookup: Callable[[], Proof | None] | None, *, must_know: bool
    ) -> Performed | None:
        """Ask the destination. Found: recorded. None: clearly absent, go on. A first
        attempt may go on when the destination cannot tell (our receipt is all there is);
        a retry of an uncertain one may not."""
        try:
            found = lookup() if lookup is not None else None
        except LookupUnavailable as exc:
            if not must_know:
                return None
            self.release(start)
            return Performed(EffectOutcome.CANNOT_TELL, self.get(start.key), str(exc))
        if lookup is None and must_know:  # nobody can tell: a second ping is worse than none
            self.release(start)
            return Performed(EffectOutcome.CANNOT_TELL, self.get(start.key), "no lookup")
        if found is not None:
            return Performed(EffectOutcome.FOUND, self.succeed(start, found))
        return None

    def _reopen(self, start: EffectStart, why: str) -> EffectStart:
        """Clearly absent (or repeatable, where doing it twice is harmless): the
        reconciler acts once, under the same key and its own token (uncertain → in
        flight), or `LeaseLost` if a person or another reconciler settled it since."""
        with self.store.transaction() as session:
            now = lease_now(session, self.clock)
            row = required(lock_effect(session, start.key), f"effect {start.key}")
            if row.claimed_by != start.owner or row.state != EffectState.UNCERTAIN:
                raise LeaseLost(f"effect {start.key} is no longer held by {start.owner}")
            leases.hold(row, RECEIPTS, start.owner, now + start.spec.lease)
            row.tries += 1
            move_effect(
                session,
                row,
                EffectState.IN_FLIGHT,
                actor=start.owner or "",
                at=now,
                run_id=start.spec.run_id,
                reason=why,
            )
            return EffectStart(EffectDecision.ACT, Receipt.of(row), start.spec, start.owner)

    def _prepare(self, start: EffectStart, prepare: Callable[[], None]) -> Performed | None:
        """What must come before the call; None when it is done. Known not to have
        happened (an upload refused): the call is not made, as if it had refused."""
        try:
            prepare()
        except EffectNotSent as exc:
            return self._not_sent(start, exc)
        return None

    def _not_sent(self, start: EffectStart, exc: EffectNotSent) -> Performed:
        wait = wait_after(exc, start.receipt.tries, start.spec.backoff)
        return Performed(
            EffectOutcome.NOT_SENT, self.fail(start, str(exc), retry_after=wait), str(exc), exc
        )

    def _act(self, start: EffectStart, act: Callable[[], Proof], *, repeatable: bool) -> Performed:
        try:
            proof = act()
        except EffectNotSent as exc:
            return self._not_sent(start, exc)
        except EffectOutcomeUnknown as exc:
            if repeatable:
                return Performed(EffectOutcome.NOT_SENT, self.fail(start, str(exc)), str(exc))
            return Performed(
                EffectOutcome.UNCERTAIN, self.mark_uncertain(start, str(exc)), str(exc)
            )
        return Performed(EffectOutcome.SENT, self.succeed(start, proof))

    def _settle(self, start: EffectStart, target: EffectState, **how: Any) -> Receipt:
        """Only the owner that holds the receipt settles it: a holder whose lease was
        taken over (or settled by a person) raises `ConcurrentChange` and changes nothing.
        `how`: `settle_in`'s proof, detail and not-before."""
        with self.store.transaction() as session:
            return settle_in(session, start, target, lease_now(session, self.clock), **how)
