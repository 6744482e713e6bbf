"""Leases kept alive by heartbeat (docs/design.md §5), and the owner tokens that fence them.

A claim or an effect receipt is held by an owner token unique per attempt (never shared
by two threads of one process). While the work runs, a heartbeat renews the lease every
`heartbeat`; a holder that stops beating is taken over once `takeover_after` has passed
since its last beat. A write by an owner whose lease was taken over matches no row.

Leases are written and judged by one clock, the database's (`lease_now`): replicas'
own clocks drift, and a replica running ahead would take a live, beating claim over.
The time is read inside the transaction that writes or compares it, after its write
lock is held, so a write that waited for SQLite's lock never writes an expired lease.

One lease machine serves every table that holds leases (`LeaseTable`: slot claims,
redraft claims, effect receipts, batch rows): `acquire` a free or lapsed row, `extend`
it by heartbeat, `fence` it just before a call (ours, unexpired, in a held state),
`take_over` a lapsed holder's (after an on-the-wire grace where its call may still
land), `release` it, `claim_again` a row nobody holds, and find the lapsed ones to reap
(`lapsed_keys`). Every statement names the owner, the states and, where it matters, the
expiry in its WHERE clause. `hold` sets a loaded row's lease for a caller that writes it
with its own guarded state change. No other module writes a lease's columns.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlmodel import Session, col, select

from core.drafting_policies import RedraftState
from core.models import BatchRow, DraftRow, EffectRow, RedraftRow
from core.states import BatchState, DraftState, EffectState
from core.store.engine import Store, insert_ignore

log = logging.getLogger(__name__)


JUDGES_LEASES = (
    "judges_leases"  # a test clock with this attribute true stands in for the database's
)


def database_now(session: Session) -> datetime:
    """The database's own clock, read in `session`'s transaction. On SQLite the first
    statement of a read-write transaction is its BEGIN IMMEDIATE, so the time is read
    once the write lock is held; PostgreSQL's `clock_timestamp()` is the time of the
    statement itself, not of the transaction's start."""
    if session.get_bind().dialect.name == "postgresql":
        value: Any = session.execute(sa.text("SELECT clock_timestamp()")).scalar_one()
        return value.astimezone(UTC)  # type: ignore[no-any-return]
    text = session.execute(sa.text("SELECT strftime('%Y-%m-%d %H:%M:%f', 'now')")).scalar_one()
    return datetime.fromisoformat(str(text)).replace(tzinfo=UTC)


def lease_now(session: Session, clock: object) -> datetime:
    """The instant leases are written and compared by in this transaction: the
    database's, unless `clock` is a test clock that drives leases itself (`FrozenClock`,
    `RunningClock`), so unit tests still move time by hand. The transaction is begun
    first either way: a time taken before SQLite's write lock would be stale once held."""
    session.connection()
    if getattr(clock, JUDGES_LEASES, False):
        now: datetime = clock.now()  # type: ignore[attr-defined]
        return now
    return database_now(session)


SCHEDULER, SWEEPER, PUBLISHER = "scheduler", "sweeper", "publisher"  # Galley's own passes
PASSES = frozenset({SCHEDULER, SWEEPER, PUBLISHER})


def is_person(actor: str) -> bool:
    """Whether an event's actor is a person (a Slack id, `cli`, a notebook's user) rather
    than a process (`host:pid:…` from `worker_name`, `…/token` from `new_owner`) or one of
    Galley's passes."""
    return ":" not in actor and "/" not in actor and actor not in PASSES


def new_owner(worker: str) -> str:
    """A fresh owner token for one attempt: readable (host:pid:…), unique per call."""
    return f"{worker}/{uuid.uuid4().hex[:8]}"


class Heartbeat:
    """Calls `renew()` every `every` while the `with` block runs.

    `lost` is set when `renew()` answers False (the lease is no longer ours); a database
    error is retried at the next beat, since a few missed beats are allowed for.
    """

    def __init__(self, renew: Callable[[], bool], every: timedelta, name: str) -> None:
        self._renew = renew
        self._every = every.total_seconds()
        self._stop = threading.Event()
        self.lost = threading.Event()
        self._thread = threading.Thread(target=self._beat, name=f"heartbeat:{name}", daemon=True)

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _beat(self) -> None:
        while not self._stop.wait(self._every):
            try:
                if not self._renew():
                    self.lost.set()
                    return
            except sa.exc.SQLAlchemyError as exc:
                log.warning("heartbeat missed a beat: %s", exc)


@dataclass(frozen=True)
class LeaseTable:
    """Where one kind of lease is kept: the table, its key, owner and expiry columns, the
    states a lease may be held in, and a column stamped with each write's time, if any."""

    model: Any
    key: str
    owner: str
    expiry: str
    held_in: tuple[str, ...]
    touched: str | None = None

    def column(self, name: str) -> Any:
        return col(getattr(self.model, name))

    def held_by(self, key: str, owner: str | None, states: tuple[str, ...] = ()) -> Any:
        """The row `key`, held by `owner`, in one of `states` (default: any held state)."""
        return sa.and_(
            self.column(self.key) == key,
            self.column(self.owner) == owner,
            self.column("state").in_(states or self.held_in),
        )

    def lapsed(self, now: datetime, grace: timedelta = timedelta(0)) -> Any:
        """Held, and its lease ran out more than `grace` before `now`. One held state is
        compared with `=`, which a partial index on that state (`ix_drafts_claimed`) serves."""
        state = self.column("state")
        held = state == self.held_in[0] if len(self.held_in) == 1 else state.in_(self.held_in)
        return sa.and_(held, self.column(self.expiry) < now - grace)

    def stamp(self, now: datetime, until: datetime | None, **values: object) -> dict[str, Any]:
        """The columns a lease write sets: its expiry, its time, and `values`."""
        stamped: dict[str, Any] = {self.expiry: until, **values}
        if self.touched is not None:
            stamped[self.touched] = now
        return stamped


DRAFT_CLAIMS = LeaseTable(
    DraftRow, "key", "claimed_by", "lease_until", (DraftState.CLAIMED,), touched="updated_at"
)
REDRAFT_CLAIMS = LeaseTable(RedraftRow, "key", "claimed_by", "lease_until", (RedraftState.CLAIMED,))
EFFECT_RECEIPTS = LeaseTable(
    EffectRow, "key", "claimed_by", "lease_until", (EffectState.IN_FLIGHT, EffectState.UNCERTAIN)
)
BATCHES = LeaseTable(
    BatchRow, "id", "leased_by", "lease_until", (BatchState.SUBMITTING, BatchState.WAITING)
)


def _write(session: Session, table: LeaseTable, where: Any, values: dict[str, Any]) -> bool:
    done = session.execute(sa.update(table.model).where(where).values(**values))
    return bool(done.rowcount == 1)  # type: ignore[attr-defined]


def claim_new(
    session: Session,
    table: LeaseTable,
    owner: str,
    lease: timedelta,
    now: datetime,
    *,
    binds: dict[str, Any] | None = None,
    **row: Any,
) -> bool:
    """Insert `row` held by `owner` in the table's first held state, or nothing when its
    key exists (ON CONFLICT DO NOTHING: the database decides who wins a key)."""
    held = table.stamp(now, now + lease, **{table.owner: owner, "state": table.held_in[0]})
    return insert_ignore(session, table.model, binds=binds, **row, **held)


def acquire(
    session: Session, table: LeaseTable, owner: str, lease: timedelta, now: datetime, *match: Any
) -> bool:
    """Take the row `match` names (its key, and any more conditions) if it is in a held
    state and nobody holds it or its holder's lease ran out."""
    free = table.column(table.owner).is_(None) | (table.column(table.expiry) < now)
    where = sa.and_(table.column("state").in_(table.held_in), free, *match)
    return _write(session, table, where, table.stamp(now, now + lease, **{table.owner: owner}))


def extend(
    session: Session, table: LeaseTable, key: str, owner: str, lease: timedelta, now: datetime
) -> bool:
    """A heartbeat: `owner`'s lease runs `lease` from `now`; False when no longer its."""
    return _write(session, table, table.held_by(key, owner), table.stamp(now, now + lease))


def fence(
    session: Session,
    table: LeaseTable,
    key: str,
    owner: str,
    lease: timedelta,
    now: datetime,
    *states: str,
    **values: object,
) -> bool:
    """The last look before a call: the row is still `owner`'s, in one of `states`, and
    its lease unexpired by `now`; it is extended for the call (and `values` written).
    False, and nothing written, otherwise."""
    where = sa.and_(table.held_by(key, owner, states), table.column(table.expiry) > now)
    return _write(session, table, where, table.stamp(now, now + lease, **values))


def take_over(
    session: Session,
    table: LeaseTable,
    key: str,
    previous: str | None,
    owner: str,
    lease: timedelta,
    now: datetime,
    *,
    grace: timedelta = timedelta(0),
    lapsed_only: bool = True,
) -> bool:
    """`owner` takes the lease of `previous` (the holder the caller read), once it ran
    out more than `grace` ago (the time its last call may still be on the wire); with
    `lapsed_only` false, a live one too (its holder gave up waiting: a batch entry)."""
    where = table.held_by(key, previous)
    if lapsed_only:
        where = sa.and_(where, table.lapsed(now, grace))
    return _write(session, table, where, table.stamp(now, now + lease, **{table.owner: owner}))


def release(
    session: Session,
    table: LeaseTable,
    key: str,
    owner: str | None,
    now: datetime,
    *states: str,
    **values: object,
) -> bool:
    """`owner` lets the lease go, writing `values` (a new state, what came of it) only
    while the row is still its own and in one of `states`."""
    stamped = table.stamp(now, None, **{table.owner: None, **values})
    return _write(session, table, table.held_by(key, owner, states), stamped)


def claim_again(
    session: Session,
    table: LeaseTable,
    key: str,
    owner: str,
    lease: timedelta,
    now: datetime,
    *states: str,
    **values: object,
) -> bool:
    """`owner` holds the row `key` afresh from one of `states`, which nobody holds (a
    failed redraft asked again): back in the table's first held state, with `values`.
    False, and nothing written, when the row has left those states."""
    where = sa.and_(table.column(table.key) == key, table.column("state").in_(states))
    held = {table.owner: owner, "state": table.held_in[0], **values}
    return _write(session, table, where, table.stamp(now, now + lease, **held))


def hold(row: Any, table: LeaseTable, owner: str | None, until: datetime | None) -> None:
    """Set a loaded row's lease: `owner`'s until `until`, or nobody's (`until` then a
    not-before, or None). For a row the caller has locked, or is inserting, and writes
    with its own guarded state change in the same statement."""
    setattr(row, table.owner, owner)
    setattr(row, table.expiry, until)


def on_the_wire(expiry: datetime | None, now: datetime, grace: timedelta) -> bool:
    """Whether a lapsed holder's last call may still land: its lease ran out less than
    `grace` (one call's time limit) before `now`."""
    return expiry is not None and expiry + grace > now


def lapsed_keys(session: Session, table: LeaseTable, now: datetime, limit: int) -> list[str]:
    """The keys of up to `limit` rows whose holders stopped renewing them, in key order
    (sorted here: an ORDER BY on the key would walk the primary key, the whole history,
    instead of the index on the lease)."""
    key = table.column(table.key)
    found = session.exec(select(key).where(table.lapsed(now)).limit(limit)).all()
    return sorted(str(k) for k in found)


def renew(
    store: Store, clock: object, table: LeaseTable, key: str, owner: str, lease: timedelta
) -> bool:
    """One heartbeat in its own transaction, timed by the database's clock."""
    with store.transaction() as session:
        return extend(session, table, key, owner, lease, lease_now(session, clock))
