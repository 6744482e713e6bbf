"""What the forced-interleaving tests share: a call in a thread of its own, and, on
PostgreSQL, whether a backend is waiting for a row lock."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
import sqlalchemy as sa

from core.failpoints import hook
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


def two_clicks_at_once(click: Callable[[str], Any], first: str, second: str) -> dict[str, Any]:
    """`first` clicks and is held inside its transaction, once its approval is counted,
    while `second` clicks: the locks keep `second` out until `first` has committed, so the
    hold ends by its timeout; without them `second` would be judged against no approval
    of `first`'s. Each one's answer, by user."""
    first_inside, second_counted = threading.Event(), threading.Event()

    def meet_the_other() -> None:
        if first_inside.is_set():
            second_counted.set()
            return
        first_inside.set()
        second_counted.wait(timeout=2.0)

    answers: dict[str, Any] = {}

    def clicks(user: str, after: threading.Event | None) -> None:
        if after is not None:
            assert after.wait(timeout=30)
        answers[user] = click(user)

    with hook("after_approval_counted", meet_the_other):
        threads = [
            threading.Thread(target=clicks, args=(first, None)),
            threading.Thread(target=clicks, args=(second, first_inside)),
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
    return answers
