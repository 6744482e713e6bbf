"""The clock port: every time Galley acts on comes from a `Clock` (or the database's
clock, `lease_now`). Its own module, re-exported by core/ports.py, so that a read that
needs only the time (`galley status`) does not build every port's values first."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Protocol


class Clock(Protocol):
    def now(self) -> datetime:
        """The current instant, aware, in UTC."""
        ...


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)
