"""The window a run reads its sources over (docs/design.md §27): (previous slot, this slot].

Both ends come from the schedule, never from the time the code runs, so a catch-up, a
retry, a take-over and a second replica all ask the same question. It never reads.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Protocol

from core.slots.schedule import ScheduleSpec, Slot, latest_slot_at_or_before
from core.sources.items import Window

_JUST_BEFORE = timedelta(microseconds=1)


class WindowSpec(ScheduleSpec, Protocol):
    """What a window is computed from: the schedule, and `window` when a recipe fixes it."""

    @property
    def window(self) -> timedelta | None: ...


def window_for(recipe: WindowSpec, slot: Slot) -> Window:
    """Items dated in (the previous nominal slot, this slot]; `window = "7d"` sets a fixed
    length before this slot instead. A recipe's first slot has no start."""
    if recipe.window is not None:
        return Window.lasting(recipe.window, slot.fire_at)
    previous = latest_slot_at_or_before(recipe, slot.fire_at - _JUST_BEFORE)
    return Window(start=None if previous is None else previous.fire_at, end=slot.fire_at)
