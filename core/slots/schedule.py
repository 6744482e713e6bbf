"""Slot arithmetic for a recipe's cron in its own time zone: which wall times a schedule
names, and the UTC instant each one fires at, DST gaps and repeats included
(docs/design.md §2, §14); and a recipe's prompt filled in for one slot (`render_template`,
for the model's request, a redraft, and the config's check at load). Pure functions of
their arguments: never use now() to name a slot.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Protocol
from zoneinfo import ZoneInfo

from croniter import CroniterBadDateError, croniter

from core import identity
from core.policies import DstGap, DstNote, DstRepeat

MAX_SLOTS = 100_000  # slots_between refuses wider requests
LOOKBACK = timedelta(days=400)  # latest_slot_at_or_before looks no further back
LOOKAHEAD = timedelta(days=5 * 366)  # next_slots looks no further ahead (covers 29 Feb)
_MAX_OFFSET_SWING = timedelta(hours=26)  # UTC offsets lie within -12h..+14h
_PROBE = timedelta(minutes=30)  # no zone keeps an offset for less than this
_MINUTE = timedelta(minutes=1)
_MIN_WINDOW = timedelta(hours=1)


class ScheduleSpec(Protocol):
    """What slot arithmetic needs from a recipe; `core.setup.config.Recipe` satisfies it.

    Members are read-only properties so that frozen models (Recipe) match under mypy.
    """

    @property
    def schedule(self) -> str: ...  # 5-field cron, read in `zone`'s wall clock
    @property
    def dst_gap(self) -> DstGap: ...
    @property
    def dst_repeat(self) -> DstRepeat: ...
    @property
    def zone(self) -> ZoneInfo: ...


@dataclass(frozen=True)
class Slot:
    """One scheduled firing. `wall` names the run; `fire_at` is when it fires.

    A gap-shifted slot may fire at the same instant as a genuine one (`0 * * * *` in
    London on 2026-03-29: 01:00 shifted and 02:00 BST both fire at 01:00 UTC). Both are
    kept: different walls, different run ids; ties are ordered by wall.
    """

    wall: datetime  # naive local wall time the cron matched, minute precision
    fire_at: datetime  # aware, UTC
    occurrence: int = 1  # 2 only for the second pass of a repeat under dst_repeat=both
    dst: DstNote | None = None
    # an item run's token (docs/design.md §29): the run is the item's, at its poll's slot
    item: str | None = None

    def run_id(self, recipe_name: str) -> str:
        if self.item is not None:
            return identity.item_run_id(recipe_name, self.item)
        return identity.run_id(recipe_name, self.wall, self.occurrence)

    @property
    def wall_text(self) -> str:
        """`runs.slot_wall`: the slot's wall time (an item run's is its poll's)."""
        return identity.wall_text(self.wall, self.occurrence)


TEMPLATE_FIELDS = ("recipe", "platform", "slot", "version")


def render_template(
    template: str, *, recipe: str, platform: str, slot: datetime, version: int
) -> str:
    """A recipe's prompt for one slot: `{recipe}`, `{platform}`, `{slot:%d %B}` (the
    slot's instant in the recipe's zone), `{version}` filled; ValueError on others."""
    try:
        return template.format(recipe=recipe, platform=platform, slot=slot, version=version)
    except (KeyError, IndexError, AttributeError) as exc:
        raise ValueError(
            f"bad template field {exc}: use {', '.join('{' + f + '}' for f in TEMPLATE_FIELDS)}"
        ) from None
    except ValueError as exc:
        raise ValueError(f"bad template: {exc}") from None


def is_dst_affected(slot: Slot) -> bool:
    return slot.dst is not None


def describe(cron: str) -> str:
    """Plain English, 24-hour clock: `0 9 * * mon` -> "At 09:00, only on Monday".
    cron-descriptor loads here: `galley status` computes slots but describes none."""
    from cron_descriptor import ExpressionDescriptor, Options

    options = Options(locale_code="en_US", use_24hour_time_format=True)
    return str(ExpressionDescriptor(cron, options).get_description())


def slots_between(spec: ScheduleSpec, start: datetime, end: datetime) -> list[Slot]:
    """Every slot with start < fire_at <= end, ordered by (fire_at, wall, occurrence).

    ValueError if the window holds more than MAX_SLOTS slots.
    """
    return _between(spec, start, end, cap=MAX_SLOTS)


def latest_slot_at_or_before(spec: ScheduleSpec, when: datetime) -> Slot | None:
    """The slot with the greatest fire_at <= when, or None within LOOKBACK."""
    window = min(_first_window(spec, when, forward=False), LOOKBACK)
    while True:
        found = _between(spec, when - window, when, cap=None)
        if found:
            return found[-1]
        if window >= LOOKBACK:
            return None
        window = min(window * 4, LOOKBACK)


def next_slots(spec: ScheduleSpec, after: datetime, count: int) -> list[Slot]:
    """The first `count` slots with fire_at > after (fewer if LOOKAHEAD runs out)."""
    if not 0 <= count <= MAX_SLOTS:
        raise ValueError(f"count must be between 0 and {MAX_SLOTS}, not {count}")
    window = min(_first_window(spec, after, forward=True), LOOKAHEAD) if count else _MIN_WINDOW
    while True:
        found = _between(spec, after, after + window, cap=None) if count else []
        if len(found) >= count or window >= LOOKAHEAD:
            return found[:count]
        window = min(window * 4, LOOKAHEAD)


def slot_at_wall(spec: ScheduleSpec, wall: datetime) -> Slot:
    """The slot a person names by naive local wall time (`--slot` without an offset).

    Always occurrence 1 (the first pass of a repeated time); ValueError if the cron does
    not match that minute, or the minute falls in a DST gap under dst_gap=skip.
    """
    if wall.tzinfo is not None:
        raise ValueError(f"{wall.isoformat()}: a wall time has no offset")
    cron = _cron(spec)
    label = f"{wall:%Y-%m-%dT%H:%M}"
    if wall.second or wall.microsecond or not croniter.match(cron, wall):
        raise ValueError(f"{label} does not match the schedule {cron!r} ({describe(cron)})")
    slots = _slots_for_wall(spec, wall)
    if not slots:
        raise ValueError(
            f"{label} does not match the schedule {cron!r}: it does not exist in "
            f"{spec.zone.key} (DST gap) and dst_gap is {spec.dst_gap.value}"
        )
    return slots[0]


def slot_at_instant(spec: ScheduleSpec, instant: datetime) -> Slot:
    """The slot firing exactly at `instant` (an ISO `--slot` with an offset).

    When a genuine slot and gap-shifted ones share the instant, the one whose wall is
    the instant's local reading wins; several shifted ones alone are ambiguous.
    """
    _require_aware(instant, "instant")
    at = [
        s
        for s in _between(spec, instant - timedelta(microseconds=1), instant, cap=None)
        if s.fire_at == instant
    ]
    local = instant.astimezone(spec.zone)
    reading = local.replace(tzinfo=None)
    for slot in at:
        if slot.wall == reading:
            return slot
    if len(at) == 1:
        return at[0]
    label = f"{instant.isoformat()} ({reading:%Y-%m-%dT%H:%M} in {spec.zone.key})"
    if not at:
        raise ValueError(f"{label} does not match the schedule {spec.schedule!r}")
    walls = ", ".join(f"{s.wall:%H:%M}" for s in at)
    raise ValueError(f"{label}: shifted slots {walls} all fire then; give the wall time")


def _first_window(spec: ScheduleSpec, when: datetime, *, forward: bool) -> timedelta:
    """A first window likely to hold the nearest slot: the distance to the nearest
    matching wall time, plus an hour for an offset change. Only a starting size: the
    callers widen it until a slot is found, so a short guess costs time, never a slot.
    (Growing from one hour instead took five passes for a weekly schedule.)"""
    local = when.astimezone(spec.zone).replace(tzinfo=None, second=0, microsecond=0)
    try:
        it = _iterator(_cron(spec), local)
        wall: datetime = it.get_next(datetime) if forward else it.get_prev(datetime)
    except CroniterBadDateError:
        return _MIN_WINDOW
    return max(_MIN_WINDOW, abs(wall - local) + _MIN_WINDOW)


def _between(spec: ScheduleSpec, start: datetime, end: datetime, cap: int | None) -> list[Slot]:
    _require_aware(start, "start")
    _require_aware(end, "end")
    if end <= start:
        return []
    zone, cron = spec.zone, _cron(spec)
    # Every candidate wall is the local reading of some instant in [start, end] (or lies
    # in a gap whose transition is in there), so it lies within these bounds.
    lo_offset = min(_offsets(zone, start, min(end, start + _MAX_OFFSET_SWING)))
    hi_offset = max(_offsets(zone, max(start, end - _MAX_OFFSET_SWING), end))
    lo = (start.astimezone(UTC) + lo_offset).replace(tzinfo=None)
    hi = (end.astimezone(UTC) + hi_offset).replace(tzinfo=None)
    found: list[Slot] = []
    for wall in _walls(cron, lo, hi):
        for slot in _slots_for_wall(spec, wall):
            if start < slot.fire_at <= end:
                found.append(slot)
        if cap is not None and len(found) > cap:
            raise ValueError(f"more than {cap} slots requested between {start} and {end}")
    found.sort(key=lambda s: (s.fire_at, s.wall, s.occurrence))
    return found


def _walls(cron: str, lo: datetime, hi: datetime) -> Iterator[datetime]:
    """Naive wall times matching the cron with lo <= wall <= hi (minute grain)."""
    it = _iterator(cron, lo.replace(second=0, microsecond=0) - _MINUTE)
    while True:
        try:
            wall: datetime = it.get_next(datetime)
        except CroniterBadDateError:  # the cron never matches again (30 February)
            return
        if wall > hi:
            return
        yield wall


def _slots_for_wall(spec: ScheduleSpec, wall: datetime) -> list[Slot]:
    """The 0, 1 or 2 slots one matched wall time gives under the recipe's DST policies."""
    first = wall.replace(tzinfo=spec.zone, fold=0).astimezone(UTC)
    second = wall.replace(tzinfo=spec.zone, fold=1).astimezone(UTC)
    if first == second:
        return [Slot(wall, first)]
    if first > second:  # fold=0 reads it with the pre-gap offset: the wall does not exist
        if spec.dst_gap is DstGap.SKIP:
            return []
        return [Slot(wall, _transition(spec.zone, second, first), 1, DstNote.GAP_SHIFTED)]
    slots = [Slot(wall, first, 1, DstNote.REPEATED_FIRST)]
    if spec.dst_repeat is DstRepeat.BOTH:
        slots.append(Slot(wall, second, 2, DstNote.REPEATED_SECOND))
    return slots


def _transition(zone: ZoneInfo, before: datetime, after: datetime) -> datetime:
    """The first instant in (before, after] whose UTC offset differs from `before`'s."""
    old = _offset(zone, before)
    lo, hi = 0, int((after - before).total_seconds())
    while hi - lo > 1:  # offset(before + lo) == old, offset(before + hi) != old
        mid = (lo + hi) // 2
        if _offset(zone, before + timedelta(seconds=mid)) == old:
            lo = mid
        else:
            hi = mid
    return before + timedelta(seconds=hi)


def _offsets(zone: ZoneInfo, a: datetime, b: datetime) -> set[timedelta]:
    """The zone's UTC offsets over [a, b], probed every 30 minutes and at both ends."""
    found = {_offset(zone, b)}
    while a < b:
        found.add(_offset(zone, a))
        a += _PROBE
    return found


def _offset(zone: ZoneInfo, instant: datetime) -> timedelta:
    offset = instant.astimezone(zone).utcoffset()
    assert offset is not None
    return offset


def _cron(spec: ScheduleSpec) -> str:
    cron = spec.schedule
    if not _valid_cron(cron):
        raise ValueError(f"bad cron {cron!r}: want 5 fields (minute hour day month weekday)")
    return cron


_ITERATORS = threading.local()


def _iterator(cron: str, start: datetime) -> croniter:
    """A croniter at `start`, reused per cron and thread: building one parses the cron
    again, which costs more than the steps taken with it. Each use runs to its end
    before the next starts in the same thread, so none is shared mid-walk."""
    cache: dict[str, croniter] = _ITERATORS.__dict__.setdefault("by_cron", {})
    it = cache.get(cron)
    if it is None:
        it = cache[cron] = croniter(cron, start)
    else:
        it.set_current(start, force=True)
    return it


@functools.lru_cache(maxsize=4096)
def _valid_cron(cron: str) -> bool:
    """Parsing a cron costs more than using it: once per distinct string."""
    return len(cron.split()) == 5 and bool(croniter.is_valid(cron))


def _require_aware(value: datetime, name: str) -> None:
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"{name} must be an aware datetime, not {value.isoformat()}")


def slot_of_run(spec: ScheduleSpec, run_id: str, fire_at: datetime) -> Slot | None:
    """The slot a run was made for, from its id and the instant it fires (a DST repeat
    gives two slots one instant apart in wall time; the id tells them apart). An item
    run's slot is the poll's that recorded it, whatever the schedule says now."""
    token = identity.item_token_of_run(run_id)
    if token is not None:
        wall = fire_at.astimezone(spec.zone).replace(tzinfo=None, second=0, microsecond=0)
        return Slot(wall=wall, fire_at=fire_at, item=token)
    candidates = slots_between(spec, fire_at - timedelta(microseconds=1), fire_at)
    return next((s for s in candidates if s.run_id(identity.recipe_of_run(run_id)) == run_id), None)
