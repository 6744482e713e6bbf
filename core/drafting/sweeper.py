"""The sweeper: drafting claims whose lease lapsed (docs/design.md §4), returned to the
pool (the draft row goes, its unfinished attempts are abandoned, the run is pending
again). Each delete names the owner and expiry it read, so a claim renewed, taken over
or stored meanwhile is never touched.
"""

from __future__ import annotations

from sqlmodel import select

from core.drafting.attempts import abandon_unfinished_attempts
from core.failpoints import Failpoint, failpoint
from core.models import DraftRow
from core.policies import PendingReason
from core.ports import Clock
from core.states import DraftState, RunState
from core.store.engine import Store
from core.store.leases import DRAFT_CLAIMS, SWEEPER, lapsed_keys, lease_now
from core.store.rows import lock_run, run_holds
from core.store.transitions import guarded_delete, move_run, note_released

SWEEP_BATCH = 100


def sweep_expired_claims(store: Store, clock: Clock, actor: str = SWEEPER) -> list[str]:
    """Return expired claims to the pool: the draft row goes, the run is pending again.

    The delete names the owner and expiry it read: a claim renewed, taken over or stored
    as a draft after the read is left alone (PostgreSQL re-checks the row at delete time).
    """
    swept: list[str] = []
    with store.read() as session:  # most passes find nothing, and take no write lock for it
        if not lapsed_keys(session, DRAFT_CLAIMS, lease_now(session, clock), 1):
            return swept
    with store.transaction() as session:
        now = lease_now(session, clock)
        expired = session.exec(
            select(DraftRow)
            .where(DRAFT_CLAIMS.lapsed(now))
            .limit(SWEEP_BATCH)  # the write lock is held for one batch; the rest next pass
        ).all()
        failpoint(Failpoint.SWEEPER_AFTER_READ)
        for draft in sorted(expired, key=lambda d: d.key):
            holder, lease_until = draft.claimed_by, draft.lease_until
            run = lock_run(session, draft.run_id)  # run, then draft: core/store/rows.py
            if run is None or not guarded_delete(
                session,
                draft,
                state=DraftState.CLAIMED,
                claimed_by=holder,
                lease_until=lease_until,
            ):
                continue  # its holder stored it, renewed it, or someone took it over
            abandon_unfinished_attempts(session, draft.key, now)
            if run_holds(run, draft.key, RunState.RUNNING):
                move_run(
                    session,
                    run,
                    RunState.PENDING,
                    actor=actor,
                    at=now,
                    reason=PendingReason.CLAIM_EXPIRED,
                )
            why = f"lease of {holder} expired at {lease_until}"
            note_released(session, draft, actor=actor, at=now, reason=why)
            swept.append(draft.key)
    return swept
