"""Draft ahead (docs/design.md §23): drafting fires draft_ahead before the slot,
in the recipe's zone across DST changes, and the run id stays the slot.

Clocks are frozen and slots named from the schedule; nothing depends on today's date.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlmodel import col, select

from bot.apscheduler_host import RecipeTrigger, SchedulerHost
from core.api.galley import Galley
from core.api.services import Services
from core.errors import ConfigError
from core.models import RunRow
from core.policies import SkipReason
from core.setup.config import Recipe, parse_config
from core.store.engine import Store
from core.testing import FrozenClock, InstantDrafter
from tests.conftest import config_text, make_config

AHEAD = timedelta(hours=48)


def ahead_recipe(**changes: Any) -> Recipe:
    recipe = make_config().recipes["weekly-update"]  # 0 9 * * mon, Europe/London
    return recipe.model_copy(update={"draft_ahead": AHEAD} | changes)


def fires(recipe: Recipe, start: datetime, end: datetime) -> list[datetime]:
    trigger, found, previous = RecipeTrigger(recipe), [], None
    now = start
    while True:
        fire = trigger.get_next_fire_time(previous, now)
        if fire is None or fire > end:
            return found
        found.append(fire)
        previous = now = fire


# --- config -------------------------------------------------------------------------------


def test_draft_ahead_defaults_to_none_and_publish_late_to_an_hour() -> None:
    recipe = make_config().recipes["weekly-update"]
    assert recipe.draft_ahead == timedelta(0)
    assert recipe.publish_late == timedelta(hours=1)


def test_draft_ahead_takes_zero_and_a_duration_per_recipe() -> None:
    text = config_text().replace(
        'model = "claude-test"', 'model = "claude-test"\ndraft_ahead = "0s"'
    )
    text += 'draft_ahead = "2d"\npublish_late = "30m"\n'
    recipe = parse_config(text).recipes["weekly-update"]
    assert (recipe.draft_ahead, recipe.publish_late) == (timedelta(days=2), timedelta(minutes=30))


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ('draft_ahead = "-1h"', "recipe 'weekly-update': draft_ahead: bad duration"),
        ('draft_ahead = "soon"', "recipe 'weekly-update': draft_ahead: bad duration"),
        ("draft_ahead = 3600", "recipe 'weekly-update': draft_ahead: want a duration in quotes"),
        ('publish_late = "0s"', "recipe 'weekly-update': publish_late: bad duration"),
        ("publish_late = true", "recipe 'weekly-update': publish_late: want a duration in quotes"),
    ],
)
def test_bad_timing_values_are_refused_naming_the_field(line: str, expected: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(config_text() + line + "\n")
    assert any(problem.startswith(expected) for problem in caught.value.problems), caught.value


# --- the drafting fire ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("slot_utc", "fire_utc", "run_id"),
    [
        # spring forward (29 Mar): drafted Sat 08:00 GMT, published Mon 09:00 BST
        (datetime(2026, 3, 30, 8, 0), datetime(2026, 3, 28, 8, 0), "2026-03-30T09:00"),
        # fall back (25 Oct): drafted Sat 10:00 BST, published Mon 09:00 GMT
        (datetime(2026, 10, 26, 9, 0), datetime(2026, 10, 24, 9, 0), "2026-10-26T09:00"),
    ],
)
def test_drafting_fires_draft_ahead_before_the_slot_across_a_dst_change(
    slot_utc: datetime, fire_utc: datetime, run_id: str, sqlite_url: str
) -> None:
    recipe = ahead_recipe()
    start = fire_utc.replace(tzinfo=UTC) - timedelta(days=3)
    [fire] = fires(recipe, start, start + timedelta(days=6))
    assert fire == fire_utc.replace(tzinfo=UTC)
    assert slot_utc.replace(tzinfo=UTC) - fire == AHEAD  # the fire moves with the zone

    clock = FrozenClock(fire + timedelta(seconds=5))
    drafter = InstantDrafter()
    config = make_config()
    config.recipes[recipe.name] = recipe
    services = Services(config, Store(sqlite_url), drafter=drafter, clock=clock)
    host = SchedulerHost(services, drafting_threads=1)
    host._on_fire(recipe.name, scheduled_at=fire)  # what APScheduler's executor calls
    host.wait_idle(10)

    with services.store.read() as session:
        rows = session.exec(select(RunRow.id, RunRow.slot_at, RunRow.state)).all()
    assert [(r[0], r[1].astimezone(UTC)) for r in rows] == [
        (f"weekly-update@{run_id}", slot_utc.replace(tzinfo=UTC))
    ]
    assert drafter.calls == 1


def test_with_no_draft_ahead_the_fire_is_the_slot_as_before() -> None:
    recipe = make_config().recipes["weekly-update"]
    start = datetime(2026, 10, 20, tzinfo=UTC)
    assert fires(recipe, start, start + timedelta(days=8)) == [
        datetime(2026, 10, 26, 9, 0, tzinfo=UTC)
    ]


def test_a_drafting_fire_found_after_the_slot_is_a_misfire(sqlite_url: str) -> None:
    """Nothing ran between the drafting fire and the publication time: the slot is skipped
    (misfire), even inside misfire_grace of the fire, never drafted to go out late."""
    recipe = ahead_recipe(draft_ahead=timedelta(minutes=30))  # misfire_grace 1h > 30m
    slot = datetime(2026, 11, 23, 9, 0, tzinfo=UTC)
    clock = FrozenClock(slot + timedelta(minutes=5))
    drafter = InstantDrafter()
    config = make_config()
    config.recipes[recipe.name] = recipe
    services = Services(config, Store(sqlite_url), drafter=drafter, clock=clock)
    host = SchedulerHost(services, drafting_threads=1)
    host._on_fire(recipe.name, scheduled_at=slot - recipe.draft_ahead)
    host.wait_idle(10)

    with services.store.read() as session:
        [run] = session.exec(select(RunRow).where(col(RunRow.recipe) == recipe.name)).all()
    assert (run.state, run.reason) == ("skipped", SkipReason.MISFIRE)
    assert drafter.calls == 0


def test_catch_up_drafts_a_slot_whose_drafting_fire_came_while_down(sqlite_url: str) -> None:
    recipe = ahead_recipe()
    slot = datetime(2026, 11, 23, 9, 0, tzinfo=UTC)
    clock = FrozenClock(slot - AHEAD + timedelta(minutes=20))  # the slot itself is 2 days off
    drafter = InstantDrafter()
    config = make_config()
    config.recipes[recipe.name] = recipe
    services = Services(config, Store(sqlite_url), drafter=drafter, clock=clock)
    host = SchedulerHost(services, drafting_threads=1)
    host._catch_up([recipe])
    host.wait_idle(10)

    with services.store.read() as session:
        ids = session.exec(select(RunRow.id)).all()
    assert ids == ["weekly-update@2026-11-23T09:00"]
    assert drafter.calls == 1


def test_galley_draft_without_a_slot_takes_the_latest_whose_drafting_fire_came(
    sqlite_url: str,
) -> None:
    recipe = ahead_recipe()
    config = make_config()
    config.recipes[recipe.name] = recipe
    clock = FrozenClock(datetime(2026, 11, 21, 10, 0, tzinfo=UTC))  # Sat: Monday's fire came
    galley = Galley(config, Store(sqlite_url), drafter=InstantDrafter(), clock=clock)
    assert galley.draft(recipe.name).run == "weekly-update@2026-11-23T09:00"
