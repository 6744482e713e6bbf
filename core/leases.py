"""Leases kept alive by heartbeat (DESIGN.md §4.1), and the owner tokens that fence them.

A claim or an effect receipt is held by an owner token unique per attempt (never shared
by two threads of one process). While the work runs, a heartbeat renews the lease every
`heartbeat`; a holder that stops beating is taken over once `takeover_after` has passed
since its last beat. A write by an owner whose lease was taken over matches no row.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable
from datetime import timedelta

import sqlalchemy as sa

log = logging.getLogger(__name__)


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
