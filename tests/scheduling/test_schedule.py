"""Slot arithmetic around real 2026 DST transitions (core.slots.schedule).

Transitions used (checked against zoneinfo):
- Europe/London: 2026-03-29 01:00 GMT -> 02:00 BST (gap 01:00-02:00 local);
  2026-10-25 02:00 BST -> 01:00 GMT (01:00-02:00 local happens twice).
- America/New_York: 2026-03-08 02:00 EST -> 03:00 EDT; 2026-11-01 02:00 EDT -> 01:00 EST.
- Australia/Lord_Howe (30-minute shift): 2026-04-05 02:00 -> 01:30 (+11 -> +10:30);
  2026-10-04 02:00 -> 02:30 (+10:30 -> +11).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from croniter import croniter
from hypothesis import given, settings
from hypothesis import strategies as st

from core.policies import DstGap, DstNote, DstRepeat
from core.setup.config import Recipe
from core.slots.schedule import (
    MAX_SLOTS,
    ScheduleSpec,
    Slot,
    describe,
    is_dst_affected,
    latest_slot_at_or_before,
    next_slots,
    slot_at_instant,
    slot_at_wall,
    slots_between,
)

LONDON, NEW_YORK, LORD_HOWE = "Europe/London", "America/New_York", "Australia/Lord_Howe"


@dataclass(frozen=True)
class Spec:
    schedule: str
    timezone: str = "UTC"
    dst_gap: DstGap = DstGap.SHIFT
    dst_repeat: DstRepeat = DstRepeat.FIRST

    @property
    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.timezone)


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, tzinfo=UTC)


def days_around(day: datetime, spec: ScheduleSpec) -> list[Slot]:
    return slots_between(spec, day - timedelta(days=2), day + timedelta(days=2))


def test_transition_dates_used_here_are_real() -> None:
    def offset(zone: str, instant: datetime) -> timedelta | None:
        return instant.astimezone(ZoneInfo(zone)).utcoffset()

    hour = timedelta(hours=1)
    assert offset(LONDON, utc(2026, 3, 29, 0, 59)) == timedelta(0)
    assert offset(LONDON, utc(2026, 3, 29, 1, 0)) == hour
    assert offset(LONDON, utc(2026, 10, 25, 1, 0)) == timedelta(0)
    assert offset(NEW_YORK, utc(2026, 3, 8, 7, 0)) == -4 * hour
    assert offset(NEW_YORK, utc(2026, 11, 1, 6, 0)) == -5 * hour
    assert offset(LORD_HOWE, utc(2026, 4, 4, 14, 59)) == 11 * hour
    assert offset(LORD_HOWE, utc(2026, 4, 4, 15, 0)) == timedelta(hours=10, minutes=30)
    assert offset(LORD_HOWE, utc(2026, 10, 3, 15, 30)) == 11 * hour


def test_daily_0230_in_new_york_spring_forward_fires_once_shifted() -> None:
    spec = Spec("30 2 * * *", NEW_YORK)
    slots = days_around(utc(2026, 3, 8, 12), spec)
    on_day = [s for s in slots if s.wall.date() == datetime(2026, 3, 8).date()]
    assert len(on_day) == 1
    (slot,) = on_day
    assert slot.wall == datetime(2026, 3, 8, 2, 30)
    assert slot.fire_at == utc(2026, 3, 8, 7, 0)  # 03:00 EDT: first instant after the gap
    assert slot.dst is DstNote.GAP_SHIFTED
    assert slot.occurrence == 1
    assert slot.run_id("r") == "r@2026-03-08T02:30"


def test_daily_0130_in_london_spring_forward_fires_at_0200_bst() -> None:
    slots = days_around(utc(2026, 3, 29, 12), Spec("30 1 * * *", LONDON))
    (slot,) = [s for s in slots if s.dst is not None]
    assert slot.wall == datetime(2026, 3, 29, 1, 30)
    assert slot.fire_at == utc(2026, 3, 29, 1, 0)
    assert slot.dst is DstNote.GAP_SHIFTED


def test_daily_0230_in_london_spring_forward_is_untouched_because_the_gap_is_0100() -> None:
    slots = days_around(utc(2026, 3, 29, 12), Spec("30 2 * * *", LONDON))
    (slot,) = [s for s in slots if s.wall == datetime(2026, 3, 29, 2, 30)]
    assert slot.fire_at == utc(2026, 3, 29, 1, 30)
    assert slot.dst is None


def test_daily_gap_slot_under_skip_has_no_slot_that_day_but_keeps_the_days_around() -> None:
    spec = Spec("30 2 * * *", NEW_YORK, dst_gap=DstGap.SKIP)
    walls = [s.wall for s in days_around(utc(2026, 3, 8, 12), spec)]
    assert datetime(2026, 3, 7, 2, 30) in walls
    assert datetime(2026, 3, 9, 2, 30) in walls
    assert all(w.date() != datetime(2026, 3, 8).date() for w in walls)


def test_lord_howe_0215_on_spring_forward_shifts_to_the_end_of_the_30_minute_gap() -> None:
    slots = days_around(utc(2026, 10, 3, 12), Spec("15 2 * * *", LORD_HOWE))
    (slot,) = [s for s in slots if s.wall == datetime(2026, 10, 4, 2, 15)]
    assert slot.fire_at == utc(2026, 10, 3, 15, 30)  # 02:30 +11
    assert slot.dst is DstNote.GAP_SHIFTED
    skip = Spec("15 2 * * *", LORD_HOWE, dst_gap=DstGap.SKIP)
    assert datetime(2026, 10, 4, 2, 15) not in [s.wall for s in days_around(slot.fire_at, skip)]


def test_lord_howe_0245_on_spring_forward_exists_and_is_untouched() -> None:
    slots = days_around(utc(2026, 10, 3, 12), Spec("45 2 * * *", LORD_HOWE))
    (slot,) = [s for s in slots if s.wall == datetime(2026, 10, 4, 2, 45)]
    assert slot.fire_at == utc(2026, 10, 3, 15, 45)
    assert slot.dst is None


def test_daily_0130_on_london_fall_back_under_first_fires_once_at_the_first_pass() -> None:
    slots = days_around(utc(2026, 10, 25, 12), Spec("30 1 * * *", LONDON))
    on_day = [s for s in slots if s.wall == datetime(2026, 10, 25, 1, 30)]
    assert len(on_day) == 1
    assert on_day[0].fire_at == utc(2026, 10, 25, 0, 30)  # 01:30 BST
    assert on_day[0].dst is DstNote.REPEATED_FIRST
    assert on_day[0].run_id("r") == "r@2026-10-25T01:30"


def test_daily_0130_on_new_york_fall_back_under_both_fires_twice_an_hour_apart() -> None:
    spec = Spec("30 1 * * *", NEW_YORK, dst_repeat=DstRepeat.BOTH)
    slots = days_around(utc(2026, 11, 1, 12), spec)
    first, second = [s for s in slots if s.wall == datetime(2026, 11, 1, 1, 30)]
    assert (first.fire_at, second.fire_at) == (utc(2026, 11, 1, 5, 30), utc(2026, 11, 1, 6, 30))
    assert (first.occurrence, second.occurrence) == (1, 2)
    assert (first.dst, second.dst) == (DstNote.REPEATED_FIRST, DstNote.REPEATED_SECOND)
    assert first.run_id("r") == "r@2026-11-01T01:30"
    assert second.run_id("r") == "r@2026-11-01T01:30~2"


def test_lord_howe_fall_back_under_both_fires_twice_30_minutes_apart() -> None:
    spec = Spec("45 1 * * *", LORD_HOWE, dst_repeat=DstRepeat.BOTH)
    slots = days_around(utc(2026, 4, 4, 12), spec)
    first, second = [s for s in slots if s.wall == datetime(2026, 4, 5, 1, 45)]
    assert second.fire_at - first.fire_at == timedelta(minutes=30)
    assert first.fire_at == utc(2026, 4, 4, 14, 45)
    assert first.run_id("r") != second.run_id("r")


def test_shifted_gap_slot_may_share_its_instant_with_a_genuine_slot() -> None:
    slots = slots_between(Spec("0 * * * *", LONDON), utc(2026, 3, 29, 0), utc(2026, 3, 29, 2))
    assert [(s.wall.hour, s.fire_at, s.dst) for s in slots] == [
        (1, utc(2026, 3, 29, 1), DstNote.GAP_SHIFTED),
        (2, utc(2026, 3, 29, 1), None),
        (3, utc(2026, 3, 29, 2), None),
    ]
    assert len({s.run_id("r") for s in slots}) == 3


def test_hourly_half_past_in_london_spring_forward_keeps_every_wall_in_order() -> None:
    slots = slots_between(Spec("30 * * * *", LONDON), utc(2026, 3, 29, 0), utc(2026, 3, 29, 3))
    assert [s.wall.hour for s in slots] == [0, 1, 2, 3]
    assert [s.fire_at for s in slots] == [
        utc(2026, 3, 29, 0, 30),
        utc(2026, 3, 29, 1, 0),
        utc(2026, 3, 29, 1, 30),
        utc(2026, 3, 29, 2, 30),
    ]


def test_slots_between_excludes_start_and_includes_end() -> None:
    spec = Spec("0 9 * * *")
    slots = slots_between(spec, utc(2026, 5, 1, 9), utc(2026, 5, 3, 9))
    assert [s.wall.day for s in slots] == [2, 3]


def test_slots_between_refuses_more_than_max_slots_and_naive_bounds() -> None:
    with pytest.raises(ValueError, match=str(MAX_SLOTS)):
        slots_between(Spec("* * * * *"), utc(2026, 1, 1), utc(2026, 4, 1))
    with pytest.raises(ValueError, match="aware"):
        slots_between(Spec("* * * * *"), datetime(2026, 1, 1), utc(2026, 1, 2))


def test_latest_slot_inside_the_repeated_hour_under_first_is_the_first_pass() -> None:
    spec = Spec("30 * * * *", LONDON)
    for when in (utc(2026, 10, 25, 1, 15), utc(2026, 10, 25, 1, 45)):  # second pass, GMT
        slot = latest_slot_at_or_before(spec, when)
        assert slot is not None
        assert (slot.wall, slot.occurrence) == (datetime(2026, 10, 25, 1, 30), 1)
        assert slot.fire_at == utc(2026, 10, 25, 0, 30)


def test_latest_slot_inside_the_repeated_hour_under_both_sees_the_second_pass() -> None:
    spec = Spec("30 * * * *", LONDON, dst_repeat=DstRepeat.BOTH)
    before = latest_slot_at_or_before(spec, utc(2026, 10, 25, 1, 15))
    after = latest_slot_at_or_before(spec, utc(2026, 10, 25, 1, 30))
    assert before is not None and after is not None
    assert before.run_id("r") == "r@2026-10-25T01:30"
    assert after.run_id("r") == "r@2026-10-25T01:30~2"


def test_latest_slot_finds_a_yearly_slot_and_gives_up_after_400_days() -> None:
    yearly = latest_slot_at_or_before(Spec("0 9 1 1 *"), utc(2026, 12, 31))
    assert yearly is not None and yearly.wall == datetime(2026, 1, 1, 9, 0)
    assert latest_slot_at_or_before(Spec("0 0 29 2 *"), utc(2026, 6, 1)) is None


def test_next_slots_returns_count_slots_in_order() -> None:
    spec = Spec("0 9 * * mon", LONDON)
    slots = next_slots(spec, utc(2026, 10, 20, 12), 3)
    assert [s.wall for s in slots] == [
        datetime(2026, 10, 26, 9),
        datetime(2026, 11, 2, 9),
        datetime(2026, 11, 9, 9),
    ]
    assert slots[0].fire_at == utc(2026, 10, 26, 9)  # GMT again
    assert next_slots(spec, utc(2026, 10, 20), 0) == []
    assert len(next_slots(Spec("*/5 * * * *"), utc(2026, 1, 1), 500)) == 500
    with pytest.raises(ValueError):
        next_slots(spec, utc(2026, 10, 20), -1)


def test_next_slots_stops_for_a_cron_that_never_fires() -> None:
    assert next_slots(Spec("0 0 30 2 *"), utc(2026, 1, 1), 2) == []
    assert next_slots(Spec("0 0 29 2 *"), utc(2026, 3, 1), 1)[0].wall == datetime(2028, 2, 29)


def test_slot_at_wall_returns_the_matching_slot_and_rejects_a_mismatch() -> None:
    spec = Spec("0 9 * * mon", LONDON)
    slot = slot_at_wall(spec, datetime(2026, 10, 19, 9, 0))
    assert slot.run_id("weekly-update") == "weekly-update@2026-10-19T09:00"
    assert slot.fire_at == utc(2026, 10, 19, 8)
    with pytest.raises(ValueError, match="does not match the schedule"):
        slot_at_wall(spec, datetime(2026, 10, 20, 9, 0))  # a Tuesday
    with pytest.raises(ValueError, match="does not match the schedule"):
        slot_at_wall(spec, datetime(2026, 10, 19, 9, 0, 30))
    with pytest.raises(ValueError, match="no offset"):
        slot_at_wall(spec, utc(2026, 10, 19, 9))


def test_slot_at_wall_in_a_gap_shifts_or_refuses_by_policy() -> None:
    wall = datetime(2026, 3, 8, 2, 30)
    shifted = slot_at_wall(Spec("30 2 * * *", NEW_YORK), wall)
    assert shifted.dst is DstNote.GAP_SHIFTED
    with pytest.raises(ValueError, match="does not match the schedule"):
        slot_at_wall(Spec("30 2 * * *", NEW_YORK, dst_gap=DstGap.SKIP), wall)


def test_slot_at_wall_in_a_repeated_hour_is_the_first_pass() -> None:
    spec = Spec("30 1 * * *", LONDON, dst_repeat=DstRepeat.BOTH)
    slot = slot_at_wall(spec, datetime(2026, 10, 25, 1, 30))
    assert (slot.occurrence, slot.fire_at) == (1, utc(2026, 10, 25, 0, 30))


def test_slot_at_instant_finds_each_pass_and_rejects_other_instants() -> None:
    both = Spec("30 1 * * *", LONDON, dst_repeat=DstRepeat.BOTH)
    assert slot_at_instant(both, utc(2026, 10, 25, 1, 30)).occurrence == 2
    assert slot_at_instant(both, utc(2026, 10, 25, 0, 30)).occurrence == 1
    first = Spec("30 1 * * *", LONDON)
    with pytest.raises(ValueError, match="does not match the schedule"):
        slot_at_instant(first, utc(2026, 10, 25, 1, 30))
    with pytest.raises(ValueError, match="aware"):
        slot_at_instant(first, datetime(2026, 10, 25, 1, 30))


def test_slot_at_instant_prefers_the_genuine_slot_over_a_shifted_one() -> None:
    spec = Spec("0 * * * *", LONDON)
    slot = slot_at_instant(spec, datetime.fromisoformat("2026-03-29T02:00+01:00"))
    assert (slot.wall, slot.dst) == (datetime(2026, 3, 29, 2, 0), None)
    shifted = slot_at_instant(Spec("0 1 * * *", LONDON), utc(2026, 3, 29, 1))
    assert (shifted.wall, shifted.dst) == (datetime(2026, 3, 29, 1, 0), DstNote.GAP_SHIFTED)


def test_weekday_0_and_7_are_both_sunday() -> None:
    after = utc(2026, 3, 2)  # a Monday
    for cron in ("0 9 * * 0", "0 9 * * 7", "0 9 * * sun"):
        slots = next_slots(Spec(cron), after, 2)
        assert [s.wall for s in slots] == [datetime(2026, 3, 8, 9), datetime(2026, 3, 15, 9)]
        assert all(s.wall.weekday() == 6 for s in slots)


def test_weekday_names_are_accepted() -> None:
    slots = next_slots(Spec("0 9 * * mon,fri"), utc(2026, 3, 1), 3)
    assert [s.wall.strftime("%a") for s in slots] == ["Mon", "Fri", "Mon"]


def test_describe_speaks_plain_english_with_a_24_hour_clock() -> None:
    assert describe("0 9 * * mon") == "At 09:00, only on Monday"
    assert describe("30 14 * * 7") == "At 14:30, only on Sunday"


def test_is_dst_affected_is_true_only_for_noted_slots() -> None:
    plain = Slot(datetime(2026, 1, 1, 9), utc(2026, 1, 1, 9))
    assert not is_dst_affected(plain)
    assert is_dst_affected(Slot(plain.wall, plain.fire_at, 1, DstNote.REPEATED_FIRST))


def test_a_config_recipe_is_a_schedule_spec() -> None:
    recipe = Recipe(
        name="weekly-update",
        platform="linkedin",
        schedule="0 9 * * mon",
        prompt="Write the weekly update.",
        timezone=LONDON,
    )
    slot = latest_slot_at_or_before(recipe, utc(2026, 10, 21))
    assert slot is not None
    assert slot.run_id(recipe.name) == "weekly-update@2026-10-19T09:00"


def test_a_bad_cron_is_refused() -> None:
    with pytest.raises(ValueError, match="bad cron"):
        slots_between(Spec("0 9 * *"), utc(2026, 1, 1), utc(2026, 1, 2))


CRONS = ["30 1 * * *", "30 2 * * *", "*/20 * * * *", "45 1,2 * * *", "0 9 * * mon-fri", "0 * * * 0"]
TRANSITIONS = {
    LONDON: [utc(2026, 3, 29, 1), utc(2026, 10, 25, 1)],
    NEW_YORK: [utc(2026, 3, 8, 7), utc(2026, 11, 1, 6)],
    LORD_HOWE: [utc(2026, 4, 4, 15), utc(2026, 10, 3, 15, 30)],
}


@st.composite
def cases(draw: st.DrawFn) -> tuple[Spec, datetime]:
    """A spec and an instant in 2026, two times in three within a day of a transition."""
    zone = draw(st.sampled_from(sorted(TRANSITIONS)))
    spec = Spec(
        draw(st.sampled_from(CRONS)),
        zone,
        draw(st.sampled_from(list(DstGap))),
        draw(st.sampled_from(list(DstRepeat))),
    )
    if draw(st.integers(0, 2)) == 0:
        year = st.datetimes(datetime(2026, 1, 1), datetime(2026, 12, 31), timezones=st.just(UTC))
        return spec, draw(year)
    transition = draw(st.sampled_from(TRANSITIONS[zone]))
    return spec, transition + timedelta(minutes=draw(st.integers(-3 * 60, 27 * 60)))


@settings(max_examples=150, deadline=None)
@given(case=cases(), hours=st.integers(1, 8 * 24))
def test_slots_between_has_unique_run_ids_inside_the_window(
    case: tuple[Spec, datetime], hours: int
) -> None:
    spec, end = case
    start = end - timedelta(hours=hours)
    slots = slots_between(spec, start, end)
    assert len({s.run_id("r") for s in slots}) == len(slots)
    assert len({(s.wall, s.occurrence) for s in slots}) == len(slots)
    assert all(start < s.fire_at <= end for s in slots)
    assert slots == sorted(slots, key=lambda s: (s.fire_at, s.wall, s.occurrence))
    for slot in slots:
        assert croniter.match(spec.schedule, slot.wall)
        if slot.dst is not DstNote.GAP_SHIFTED:
            assert slot.fire_at.astimezone(spec.zone).replace(tzinfo=None) == slot.wall


@settings(max_examples=150, deadline=None)
@given(case=cases())
def test_latest_slot_is_the_last_slot_of_the_week_before(case: tuple[Spec, datetime]) -> None:
    spec, when = case
    week = slots_between(spec, when - timedelta(days=8), when)
    latest = latest_slot_at_or_before(spec, when)
    if week:
        assert latest == week[-1]
    upcoming = slots_between(spec, when, when + timedelta(days=8))
    if len(upcoming) >= 3:
        assert next_slots(spec, when, 3) == upcoming[:3]


def brute_force(spec: Spec, start: datetime, end: datetime) -> set[Slot]:
    """An independent oracle: walk every UTC minute in (start, end] and read the clock."""
    found: set[Slot] = set()
    t = start.replace(second=0, microsecond=0) + timedelta(minutes=1)
    while t <= end:
        local = t.astimezone(spec.zone)
        wall = local.replace(tzinfo=None, fold=0)
        if croniter.match(spec.schedule, wall):
            passes = {wall.replace(tzinfo=spec.zone, fold=f).utcoffset() for f in (0, 1)}
            repeated = len(passes) == 2  # a real reading in two offsets: a repeat
            if local.fold == 1 and repeated:
                if spec.dst_repeat is DstRepeat.BOTH:
                    found.add(Slot(wall, t, 2, DstNote.REPEATED_SECOND))
            else:
                found.add(Slot(wall, t, 1, DstNote.REPEATED_FIRST if repeated else None))
        skipped = (t - timedelta(minutes=1)).astimezone(spec.zone).replace(tzinfo=None)
        while spec.dst_gap is DstGap.SHIFT and (skipped := skipped + timedelta(minutes=1)) < wall:
            if croniter.match(spec.schedule, skipped):  # walls the clock jumped over at t
                found.add(Slot(skipped, t, 1, DstNote.GAP_SHIFTED))
        t += timedelta(minutes=1)
    return found


@settings(max_examples=40, deadline=None)
@given(case=cases(), hours=st.integers(1, 24))
def test_slots_between_agrees_with_reading_the_clock_every_minute(
    case: tuple[Spec, datetime], hours: int
) -> None:
    spec, end = case
    start = end - timedelta(hours=hours)
    assert set(slots_between(spec, start, end)) == brute_force(spec, start, end)
