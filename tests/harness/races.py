"""What the forced-interleaving tests share: a call in a thread of its own, and, on
PostgreSQL, whether a backend is waiting for a row lock."""

from __future__ import annotations

import threading
from typing import Any

import pytest
import sqlalchemy as sa

from core.store.engine import Store


def in_thread(target: Any, *args: Any) -> tuple[threading.Thread, list[Any]]:
    results: list[Any] = []
    thread = threading.Thread(target=lambda: results.append(target(*args)), daemon=True)
    thread.start()
    return thread, results


def skip_on_sqlite(db_url: str) -> None:
    if db_url.startswith("sqlite"):
        pytest.skip("SQLite has one writer: this read and write are one locked transaction")


def a_backend_waits_on_a_lock(store: Store) -> bool:
    with store.engine.connect() as watcher:
        waiting = watcher.execute(
            sa.text(
                "SELECT count(*) FROM pg_stat_activity"
                " WHERE datname = current_database() AND wait_event_type = 'Lock'"
            )
        ).scalar_one()
    return bool(waiting)
