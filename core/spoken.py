"""Durations as a message says them to a person ("20 seconds", "1 hour 30 minutes"):
one rule for reminders, alerts and reasons. Core's own words: every stage may use it."""

from __future__ import annotations

from datetime import timedelta

_SPOKEN_UNITS = (("day", 86400), ("hour", 3600), ("minute", 60), ("second", 1))


def spoken_duration(value: timedelta) -> str:
    """A duration as a message says it to a person: its largest whole unit and the next
    one when that is not zero ("20 seconds", "4 hours", "1 hour 30 minutes", "2 days")."""
    remaining = max(int(value.total_seconds()), 0)
    for index, (name, size) in enumerate(_SPOKEN_UNITS):
        if remaining >= size or size == 1:
            words = [_count(remaining // size, name)]
            if index + 1 < len(_SPOKEN_UNITS):
                next_name, next_size = _SPOKEN_UNITS[index + 1]
                rest = remaining % size // next_size
                if rest:
                    words.append(_count(rest, next_name))
            return " ".join(words)
    raise AssertionError("the last unit is one second")  # pragma: no cover


def _count(number: int, unit: str) -> str:
    return f"{number} {unit}" if number == 1 else f"{number} {unit}s"
