"""Inbound deliveries seen once: Slack re-sends a Socket Mode envelope whose ack it missed
(same envelope_id, `retry_attempt` > 0), possibly to another replica's connection.

The database decides which delivery is first (a primary key, never check-then-insert), so
a redelivery changes nothing and is not answered as a second click. Rows older than
`KEEP` are pruned by housekeeping: Slack stops redelivering within minutes.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import sqlalchemy as sa
from sqlmodel import col

from core.models import DeliveryRow
from core.ports import Clock
from core.store.engine import Store, insert_ignore

KEEP = timedelta(hours=1)


def first_delivery(store: Store, delivery_id: str, now: datetime) -> bool:
    """True for the first delivery of `delivery_id` across every replica, else False."""
    with store.transaction() as session:
        return insert_ignore(session, DeliveryRow, id=delivery_id, received_at=now)


@dataclass
class _Ask:
    delivery_id: str
    done: threading.Event = field(default_factory=threading.Event)
    first: bool = False
    error: BaseException | None = None


class DeliveryBook:
    """`first_delivery` for a burst: the envelopes that arrive while one write is under
    way are recorded together by the next one (a group commit), so ten listener threads
    take SQLite's write lock once or twice, not ten times in a queue, before they ack."""

    def __init__(self, store: Store, clock: Clock) -> None:
        self.store, self.clock = store, clock
        self._lock = threading.Lock()
        self._waiting: list[_Ask] = []
        self._writing = False

    def first(self, delivery_id: str) -> bool:
        """True for the first delivery of `delivery_id` across every replica, else False."""
        ask = _Ask(delivery_id)
        with self._lock:
            self._waiting.append(ask)
            leads = not self._writing
            self._writing = True
        if leads:
            self._write_until_empty()
        ask.done.wait()
        if ask.error is not None:
            raise ask.error
        return ask.first

    def _write_until_empty(self) -> None:
        """The leading caller writes batch after batch until nobody waits."""
        while True:
            with self._lock:
                batch, self._waiting = self._waiting, []
                if not batch:
                    self._writing = False
                    return
            try:
                with self.store.transaction() as session:
                    now = self.clock.now()
                    for ask in batch:  # one id twice in a batch: the second is a redelivery
                        ask.first = insert_ignore(
                            session, DeliveryRow, id=ask.delivery_id, received_at=now
                        )
            except Exception as exc:  # each caller raises it, as first_delivery would
                for ask in batch:
                    ask.error, ask.first = exc, False
            finally:
                for ask in batch:
                    ask.done.set()


def forget_old_deliveries(store: Store, now: datetime, keep: timedelta = KEEP) -> int:
    """Delete deliveries older than `keep`; returns how many."""
    with store.transaction() as session:
        result = session.execute(
            sa.delete(DeliveryRow).where(col(DeliveryRow.received_at) < now - keep)
        )
        return int(result.rowcount or 0)  # type: ignore[attr-defined]
