"""Human durations for the config file: `30s`, `90m`, `48h`, `7d`, `1h30m`."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Annotated

from pydantic import BeforeValidator

_PART = re.compile(r"(\d+)([smhdw])")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_duration(text: str, *, zero_allowed: bool = False) -> timedelta:
    """Parse `90m`-style text; raises ValueError with a message fit for a person.
    `zero_allowed`: `0s` means "none" (draft_ahead), so it is not refused."""
    cleaned = text.strip().lower()
    if not cleaned or _PART.sub("", cleaned) != "":
        raise ValueError(f"bad duration {text!r}: use a number and a unit, like 90m, 48h or 7d")
    seconds = sum(int(n) * _UNIT_SECONDS[unit] for n, unit in _PART.findall(cleaned))
    if seconds < 0 or (seconds == 0 and not zero_allowed):
        raise ValueError(f"bad duration {text!r}: must be longer than zero")
    return timedelta(seconds=seconds)


def _parsed(value: object) -> object:
    return parse_duration(value) if isinstance(value, str) else value


def _parsed_or_zero(value: object) -> object:
    return parse_duration(value, zero_allowed=True) if isinstance(value, str) else value


# A config key holding a duration, written as text (`"48h"`); `0s` is refused.
Duration = Annotated[timedelta, BeforeValidator(_parsed)]
# `0s` is a value here ("none"), not a mistake: draft_ahead = "0s" drafts at the slot.
ZeroOrDuration = Annotated[timedelta, BeforeValidator(_parsed_or_zero)]


def format_duration(value: timedelta) -> str:
    """The shortest `1h30m`-style text for a duration (whole seconds)."""
    remaining = int(value.total_seconds())
    parts = []
    for unit in ("d", "h", "m", "s"):
        size = _UNIT_SECONDS[unit]
        if remaining >= size:
            parts.append(f"{remaining // size}{unit}")
            remaining %= size
    return "".join(parts) or "0s"
