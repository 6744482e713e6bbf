"""Inbound deliveries seen once: Slack re-sends a Socket Mode envelope whose ack it missed
(same envelope_id, `retry_attempt` > 0), possibly to another replica's connection.

The database decides which delivery is first (a primary key, never check-then-insert), so
a redelivery changes nothing and is not answered as a second click. Rows older than
`KEEP` are pruned by housekeeping: Slack stops redelivering within minutes.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import sqlalchemy as sa
from sqlmodel import col

from core.models import DeliveryRow
from core.store import Store, insert_ignore

KEEP = timedelta(hours=1)


def first_delivery(store: Store, delivery_id: str, now: datetime) -> bool:
    """True for the first delivery of `delivery_id` across every replica, else False."""
    with store.transaction() as session:
        return insert_ignore(session, DeliveryRow, id=delivery_id, received_at=now)


def forget_old_deliveries(store: Store, now: datetime, keep: timedelta = KEEP) -> int:
    """Delete deliveries older than `keep`; returns how many."""
    with store.transaction() as session:
        result = session.execute(
            sa.delete(DeliveryRow).where(col(DeliveryRow.received_at) < now - keep)
        )
        return int(result.rowcount or 0)  # type: ignore[attr-defined]
