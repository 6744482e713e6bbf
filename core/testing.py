"""Fakes of the ports, shipped next to them (as procrastinate ships its testing module):
a drafter that answers at once and counts its calls, a clock that moves only when told,
and a clock that runs at real speed from a fixed instant.

Tests and `bench/` import them from here (the small config they build services from is
core/setup/sample_config.py); the running bot never does. Nothing here touches
the network or imports from `tests/` or pytest: a bench needs no test tool.
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta

from core.ports import DraftRequest, ModelReply

FROZEN_AT = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)  # a Monday, noon UTC


class FrozenClock:
    """The `Clock` port, standing still until told to move: for lease and expiry logic.
    It also stands in for the database's clock, which judges leases in production."""

    judges_leases = True

    def __init__(self, start: datetime = FROZEN_AT) -> None:
        self.current = start

    def now(self) -> datetime:
        return self.current

    def advance(self, delta: timedelta) -> None:
        self.current += delta

    def set(self, instant: datetime) -> None:
        self.current = instant


class RunningClock:
    """The `Clock` port at real speed, shifted to start at `start`: leases and timeouts
    still pass in real seconds, but "today" is always the same day. Leases are judged
    by it too, not by the database's clock."""

    judges_leases = True

    def __init__(self, start: datetime) -> None:
        self._start = start
        self._origin = time.monotonic()

    def now(self) -> datetime:
        return self._start + timedelta(seconds=time.monotonic() - self._origin)


class SkewedClock:
    """A replica whose own clock runs `ahead` of the others' and of the database's (a
    negative `ahead` lags). Leases and every time rule are the database's to judge, as
    in production: it does not judge leases."""

    judges_leases = False

    def __init__(self, ahead: timedelta) -> None:
        self.ahead = ahead

    def now(self) -> datetime:
        return datetime.now(UTC) + self.ahead


class InstantDrafter:
    """The `Drafter` port answering at once from memory: `text`, or "draft N" for the
    N-th call, with fixed usage. Counts its calls and keeps their requests.

    Given an unset `release`, each call stays open until it is set (at most `hold_for`
    seconds), so a test can act while a draft is being written; `started` is set by the
    first call.
    """

    def __init__(
        self,
        text: str | None = None,
        *,
        release: threading.Event | None = None,
        hold_for: float = 30,
    ) -> None:
        self.text = text
        self.calls = 0
        self.requests: list[DraftRequest] = []
        self.started = threading.Event()
        if release is None:
            release = threading.Event()
            release.set()
        self.release = release
        self.hold_for = hold_for
        self._lock = threading.Lock()

    def draft(self, request: DraftRequest) -> ModelReply:
        with self._lock:
            self.calls += 1
            number = self.calls
            self.requests.append(request)
        self.started.set()
        self.release.wait(self.hold_for)
        text = self.text if self.text is not None else f"draft {number}"
        return ModelReply(text, request.model, f"req_{number}", "end_turn", 10, 20, 0, 0)
