"""Leases kept alive by heartbeat (docs/design.md §5), and the owner tokens that fence them.

A claim or an effect receipt is held by an owner token unique per attempt (never shared
by two threads of one process). While the work runs, a heartbeat renews the lease every
`heartbeat`; a holder that stops beating is taken over once `takeover_after` has passed
since its last beat. A write by an owner whose lease was taken over matches no row.

Leases are written and judged by one clock, the database's (`lease_now`): replicas'
own clocks drift, and a replica running ahead would take a live, beating claim over.
The time is read inside the transaction that writes or compares it, after its write
lock is held, so a write that waited for SQLite's lock never writes an expired lease.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlmodel import Session

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
