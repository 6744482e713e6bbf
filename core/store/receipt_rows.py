"""What the effect ledger writes on one receipt row, locked in the caller's transaction
(docs/design.md §7): what `begin` makes of a receipt that exists already (done, held
elsewhere, never sent, uncertain, waiting, or free to act on again), a receipt settled
by its owner only, and how long a refused effect waits. `core/store/effects.py`
`EffectLedger` is the one caller; nothing here calls a destination.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta

from sqlmodel import Session

from core.errors import ConcurrentChange, EffectInProgress, EffectNotSent
from core.models import EffectRow
from core.policies import EffectDecision
from core.states import EffectState
from core.store import leases
from core.store.leases import EFFECT_RECEIPTS as RECEIPTS
from core.store.receipts import EffectSpec, EffectStart, Proof, Receipt
from core.store.rows import lock_effect, required
from core.store.transitions import as_read, guarded_update, move_effect

MAX_BACKOFF = timedelta(seconds=300)
SENDING = "sending: the call left, its outcome not yet recorded"
NEVER_SENT = "its holder stopped before sending: not sent, so it is sent again"


def _from_dead_holder(
    session: Session,
    row: EffectRow,
    state: EffectState,
    why: str,
    run_id: str | None,
    owner: str,
    now: datetime,
) -> None:
    """A receipt whose holder died, released and moved to `state` by `owner`, saying why."""
    leases.hold(row, RECEIPTS, None, None)
    move_effect(session, row, state, actor=owner, at=now, run_id=run_id, reason=why)


def answer_existing(
    session: Session, row: EffectRow, spec: EffectSpec, owner: str, now: datetime
) -> EffectStart:
    """What `begin` makes of a receipt that is there already, for `owner`."""
    live = row.lease_until is not None and row.lease_until > now
    if row.state == EffectState.SUCCEEDED:
        return EffectStart(EffectDecision.DONE, Receipt.of(row), spec)
    if row.state in (EffectState.IN_FLIGHT, EffectState.UNCERTAIN) and live:
        raise EffectInProgress(f"effect {row.key} is held by {row.claimed_by}")
    if row.state == EffectState.IN_FLIGHT and spec.marks_send and row.detail != SENDING:
        # it never marked its call as leaving: nothing can be on the wire, and a late
        # mark by that holder matches no row once this owner holds it (fencing)
        _from_dead_holder(session, row, EffectState.FAILED, NEVER_SENT, spec.run_id, owner, now)
    if row.state == EffectState.IN_FLIGHT:
        assert row.lease_until is not None
        if leases.on_the_wire(row.lease_until, now, spec.on_wire):  # it may still land
            raise EffectInProgress(
                f"effect {row.key}: the call of {row.claimed_by} may still be on the wire"
            )
        why = f"holder {row.claimed_by} stopped mid-call; outcome unknown"
        _from_dead_holder(session, row, EffectState.UNCERTAIN, why, spec.run_id, owner, now)
    if row.state == EffectState.UNCERTAIN:
        # one reconciler at a time: the lookup and what follows it belong to `owner`
        leases.hold(row, RECEIPTS, owner, now + spec.lease)
        guarded_update(
            session, row, state=EffectState.UNCERTAIN, claimed_by=as_read(row, "claimed_by")
        )
        return EffectStart(EffectDecision.RECONCILE, Receipt.of(row), spec, owner)
    if live:  # a failed one's not-before (Retry-After)
        return EffectStart(EffectDecision.WAIT, Receipt.of(row), spec)
    leases.hold(row, RECEIPTS, owner, now + spec.lease)
    row.tries += 1
    move_effect(session, row, EffectState.IN_FLIGHT, actor=owner, at=now, run_id=spec.run_id)
    return EffectStart(EffectDecision.ACT, Receipt.of(row), spec, owner)


def settle_in(
    session: Session,
    start: EffectStart,
    target: EffectState,
    now: datetime,
    *,
    proof: Proof | None = None,
    detail: str | None = None,
    not_before: timedelta | None = None,
) -> Receipt:
    row = required(lock_effect(session, start.key), f"effect {start.key}")
    if row.claimed_by != start.owner or start.owner is None:
        raise ConcurrentChange(
            f"effect {start.key} is no longer held by {start.owner} "
            f"(now {row.state}, {row.claimed_by or 'unheld'}): nothing was changed"
        )
    if proof is not None:
        row.external_id = proof.external_id
        if proof.result is not None:
            row.result = json.dumps(proof.result, sort_keys=True)
    leases.hold(row, RECEIPTS, None, now + not_before if not_before else None)
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


def wait_after(exc: EffectNotSent, tries: int, backoff: bool) -> timedelta | None:
    """How long a refused effect waits before its next try: the destination's
    Retry-After, else (with `backoff`) 2, 4, 8 … seconds, capped; nothing when permanent."""
    if exc.permanent:
        return None
    if exc.retry_after is not None:
        return min(timedelta(seconds=exc.retry_after), MAX_BACKOFF)
    return min(timedelta(seconds=2.0**tries), MAX_BACKOFF) if backoff else None
