"""Fires, misfires, catch-up, overlap and DST with an injected clock (issue: scheduling).

Each test counts model calls and run rows; the slot always comes from the schedule.
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlmodel import col, select

from bot.apscheduler_host import RecipeTrigger
from core.api.services import Services
from core.drafting.claims import Claim, DraftResult, claim_slot
from core.drafting_policies import DraftOutcome
from core.models import EventRow, RunRow
from core.policies import DstGap, DstRepeat, Overlap, SkipReason
from core.scheduling.catch_up import (
    SharedSchedules,
    latest_recorded_slots,
    plan_catch_up,
    record_skips,
)
from core.scheduling.dispatch import SlotDispatcher
from core.setup.config import Recipe
from core.slots.schedule import slot_at_instant, slots_between
from core.states import RunState
from core.store.engine import Store
from core.testing import FrozenClock, InstantDrafter
from tests.conftest import make_config

MONDAY = datetime(2026, 11, 23, 9, 0, tzinfo=UTC)  # 09:00 in London in winter
WEEK = timedelta(weeks=1)


def setup(
    store: Store, clock: FrozenClock, drafter: Any = None, **recipe_changes: Any
) -> tuple[SlotDispatcher, Recipe, InstantDrafter]:
    drafter = drafter or InstantDrafter()
    galley = Services(make_config(), store, drafter=drafter, clock=clock)
    recipe = galley.recipe("weekly-update").model_copy(update=recipe_changes)
    galley.config.recipes[recipe.name] = recipe
    dispatcher = SlotDispatcher(store, galley.drafting, clock, queue_poll_seconds=0.05)
    return dispatcher, recipe, drafter


def runs(store: Store) -> dict[str, tuple[str, str | None]]:
    with store.transaction() as session:
        rows = session.exec(select(RunRow).order_by(col(RunRow.slot_at))).all()
        return {r.id: (r.state, r.reason) for r in rows}


def test_a_late_fire_inside_the_grace_window_drafts(store: Store) -> None:
    clock = FrozenClock(MONDAY + timedelta(minutes=59))
    dispatcher, recipe, drafter = setup(store, clock)

    [result] = dispatcher.fire(recipe, MONDAY)

    assert result.outcome == DraftOutcome.DRAFTED
    assert result.run == "weekly-update@2026-11-23T09:00"
    assert drafter.calls == 1


def test_a_late_fire_outside_the_grace_window_is_recorded_as_a_misfire(store: Store) -> None:
    clock = FrozenClock(MONDAY + timedelta(minutes=61))
    dispatcher, recipe, drafter = setup(store, clock)

    [result] = dispatcher.fire(recipe, MONDAY)

    assert (result.outcome, result.reason) == (DraftOutcome.SKIPPED, SkipReason.MISFIRE)
    assert drafter.calls == 0
    assert runs(store) == {"weekly-update@2026-11-23T09:00": (RunState.SKIPPED, SkipReason.MISFIRE)}


def test_a_host_that_sleeps_across_six_slots_runs_one_and_records_five_skips(
    store: Store,
) -> None:
    before_sleep = MONDAY - 4 * WEEK  # 26 October, the first Monday on GMT
    clock = FrozenClock(before_sleep + timedelta(minutes=1))
    dispatcher, recipe, drafter = setup(store, clock, pending_limit=10)
    dispatcher.fire(recipe, before_sleep)  # the last slot before the sleep
    wake = before_sleep + 6 * WEEK
    clock.current = wake + timedelta(minutes=5)  # wakes six slots later

    results = dispatcher.fire(recipe, wake)

    assert [r.outcome for r in results] == [DraftOutcome.SKIPPED] * 5 + [DraftOutcome.DRAFTED]
    assert drafter.calls == 2
    states = list(runs(store).values())
    assert states[0][0] == RunState.AWAITING_REVIEW
    assert states[1:6] == [(RunState.SKIPPED, SkipReason.MISFIRE)] * 5
    assert states[6][0] == RunState.AWAITING_REVIEW


def test_two_fires_of_the_same_slot_make_one_run(store: Store) -> None:
    clock = FrozenClock(MONDAY + timedelta(seconds=1))
    dispatcher, recipe, drafter = setup(store, clock)

    dispatcher.fire(recipe, MONDAY)
    second = dispatcher.fire(recipe, MONDAY)

    replica = dispatcher.run_slot(recipe, slot_at_instant(recipe, MONDAY))  # another replica

    assert second == []
    assert replica.outcome == DraftOutcome.EXISTS
    assert drafter.calls == 1
    assert len(runs(store)) == 1


def test_catch_up_on_a_fresh_database_runs_only_the_latest_due_slot(store: Store) -> None:
    clock = FrozenClock(MONDAY + timedelta(minutes=10))
    dispatcher, recipe, drafter = setup(store, clock)

    def catch_up() -> list[DraftResult]:  # what the host does at start-up
        with store.read() as session:
            recorded = latest_recorded_slots(session)
        plan = plan_catch_up([recipe], recorded, clock.now(), SharedSchedules())
        record_skips(store, plan.to_skip, clock.now())
        return [dispatcher.run_slot(r, slot) for r, slot in plan.to_run]

    [result] = catch_up()
    again = catch_up()

    assert result.outcome == DraftOutcome.DRAFTED and again == []
    assert list(runs(store)) == ["weekly-update@2026-11-23T09:00"]
    assert drafter.calls == 1


def _hold_claim(
    store: Store, recipe: Recipe, clock: FrozenClock, dispatcher: SlotDispatcher
) -> None:
    slot = dispatcher._unrun_slots(recipe, MONDAY - WEEK)[0]
    held = claim_slot(store, recipe, slot, worker="other", actor="other", manual=False, clock=clock)
    assert isinstance(held, Claim)


def test_overlap_skip_records_the_slot_and_calls_nothing(store: Store) -> None:
    clock = FrozenClock(MONDAY + timedelta(seconds=1))
    dispatcher, recipe, drafter = setup(store, clock, overlap=Overlap.SKIP)
    _hold_claim(store, recipe, clock, dispatcher)  # last week's run is still drafting

    result = dispatcher.run_slot(recipe, dispatcher._unrun_slots(recipe, MONDAY)[-1])

    assert (result.outcome, result.reason) == (DraftOutcome.SKIPPED, SkipReason.OVERLAP)
    assert drafter.calls == 0


def test_an_overlap_skip_fired_again_by_another_replica_is_recorded_once(db_url: str) -> None:
    """Every replica fires the slot: the second finds it skipped for overlap already and
    writes nothing (no `skipped -> skipped` event)."""
    clock = FrozenClock(MONDAY + timedelta(seconds=1))
    first_store, second_store = Store(db_url), Store(db_url)
    first, recipe, _ = setup(first_store, clock, overlap=Overlap.SKIP)
    second, _, drafter = setup(second_store, clock, overlap=Overlap.SKIP)
    _hold_claim(first_store, recipe, clock, first)
    slot = first._unrun_slots(recipe, MONDAY)[-1]

    results = [first.run_slot(recipe, slot), second.run_slot(recipe, slot)]

    assert {(r.outcome, r.reason) for r in results} == {(DraftOutcome.SKIPPED, SkipReason.OVERLAP)}
    with first_store.transaction() as session:
        skips = session.exec(
            select(EventRow).where(
                col(EventRow.subject_id) == results[0].run,
                col(EventRow.to_state) == RunState.SKIPPED,
            )
        ).all()
    assert [e.from_state for e in skips] == [RunState.PENDING]
    assert drafter.calls == 0
    first_store.dispose()
    second_store.dispose()


def test_overlap_queue_one_waits_for_the_running_draft_and_skips_a_third(store: Store) -> None:
    clock = FrozenClock(MONDAY + WEEK + timedelta(seconds=1))
    release = threading.Event()
    slow = InstantDrafter(release=release)
    dispatcher, recipe, _ = setup(
        store,
        clock,
        drafter=slow,
        overlap=Overlap.QUEUE_ONE,
        pending_limit=9,
        misfire_grace=timedelta(weeks=3),  # the clock stands still: no slot is late
    )

    a, b, c = slots_between(recipe, MONDAY - WEEK - timedelta(hours=1), MONDAY + WEEK)
    results: dict[str, Any] = {}

    def run(name: str, slot: Any) -> None:
        results[name] = dispatcher.run_slot(recipe, slot)

    running = threading.Thread(target=run, args=("a", a))
    running.start()
    _wait_until(lambda: slow.calls == 1)
    queued = threading.Thread(target=run, args=("b", b))
    queued.start()
    _wait_until(lambda: runs(store).get(b.run_id(recipe.name), ("", ""))[1] == "queued")
    run("c", c)  # a third slot while one is already queued: skipped
    assert (results["c"].outcome, results["c"].reason) == (DraftOutcome.SKIPPED, SkipReason.OVERLAP)

    release.set()
    running.join()
    queued.join()

    assert results["a"].outcome == DraftOutcome.DRAFTED
    assert results["b"].outcome == DraftOutcome.DRAFTED
    assert slow.calls == 2


def _wait_until(condition: Any, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail("condition not reached")
        time.sleep(0.02)


def _daily(
    zone: str, at: str, gap: DstGap = DstGap.SHIFT, repeat: DstRepeat = DstRepeat.FIRST
) -> Recipe:
    hour, minute = (int(part) for part in at.split(":"))
    base = make_config().recipes["weekly-update"]
    return base.model_copy(
        update={
            "timezone": zone,
            "schedule": f"{minute} {hour} * * *",
            "dst_gap": gap,
            "dst_repeat": repeat,
        }
    )


def _fires(recipe: Recipe, start: datetime, end: datetime) -> list[datetime]:
    trigger, fires, previous = RecipeTrigger(recipe), [], None
    now = start
    while True:
        fire = trigger.get_next_fire_time(previous, now)
        if fire is None or fire > end:
            return fires
        fires.append(fire)
        previous = now = fire


@pytest.mark.parametrize(
    ("zone", "at", "gap", "day", "expected_utc"),
    [
        ("America/New_York", "02:30", DstGap.SHIFT, datetime(2026, 3, 8), ["07:00"]),
        ("America/New_York", "02:30", DstGap.SKIP, datetime(2026, 3, 8), []),
        ("Europe/London", "01:30", DstGap.SHIFT, datetime(2026, 3, 29), ["01:00"]),
        ("Europe/London", "02:30", DstGap.SHIFT, datetime(2026, 3, 29), ["01:30"]),
        ("Australia/Lord_Howe", "02:15", DstGap.SHIFT, datetime(2026, 10, 4), ["15:30"]),
    ],
)
def test_spring_forward_fires_once_or_not_at_all_by_policy(
    zone: str, at: str, gap: DstGap, day: datetime, expected_utc: list[str]
) -> None:
    recipe = _daily(zone, at, gap=gap)
    local_day = day.replace(tzinfo=recipe.zone)
    start = local_day.astimezone(UTC)
    fires = _fires(recipe, start, start + timedelta(hours=24) - timedelta(minutes=1))
    assert [f.strftime("%H:%M") for f in fires] == expected_utc


@pytest.mark.parametrize(
    ("zone", "at", "day", "first_utc", "second_utc"),
    [
        ("Europe/London", "01:30", datetime(2026, 10, 25), "00:30", "01:30"),
        ("America/New_York", "01:30", datetime(2026, 11, 1), "05:30", "06:30"),
        ("Australia/Lord_Howe", "01:45", datetime(2026, 4, 5), "14:45", "15:15"),
    ],
)
def test_fall_back_fires_once_under_first_and_twice_under_both(
    zone: str, at: str, day: datetime, first_utc: str, second_utc: str
) -> None:
    once = _daily(zone, at, repeat=DstRepeat.FIRST)
    twice = _daily(zone, at, repeat=DstRepeat.BOTH)
    start = day.replace(tzinfo=once.zone).astimezone(UTC)
    end = start + timedelta(hours=24)
    assert [f.strftime("%H:%M") for f in _fires(once, start, end)] == [first_utc]
    assert [f.strftime("%H:%M") for f in _fires(twice, start, end)] == [first_utc, second_utc]


def test_a_daily_0230_recipe_neither_vanishes_nor_runs_twice_across_both_changes(
    store: Store,
) -> None:
    recipe_zone = "America/New_York"
    clock = FrozenClock()
    dispatcher, recipe, drafter = setup(
        store, clock, timezone=recipe_zone, schedule="30 2 * * *", pending_limit=1000
    )
    # a week around each change (New York: 8 March springs forward over 02:30, 1 November
    # falls back); the days between them change nothing a fire could notice
    weeks = [
        (datetime(2026, 3, 5), datetime(2026, 3, 12)),
        (datetime(2026, 10, 28), datetime(2026, 11, 4)),
    ]
    fires = [
        fire
        for start, end in weeks
        for fire in _fires(recipe, start.replace(tzinfo=UTC), end.replace(tzinfo=UTC))
    ]
    for fire in fires:
        clock.current = fire + timedelta(seconds=5)
        dispatcher.fire(recipe, fire)
        dispatcher.fire(recipe, fire)  # a duplicate fire changes nothing

    days = sum((end - start).days for start, end in weeks)
    assert len(fires) == days
    assert drafter.calls == days
    drafted = [run for run, (state, _) in runs(store).items() if state != RunState.SKIPPED]
    assert len(drafted) == days  # the days between the weeks were caught up as misfires


def test_overlap_holds_between_two_hosts_sharing_the_database(db_url: str) -> None:
    """Two stores (two engines, as two processes have) on one database: the second host
    sees the first host's live claim and skips its slot."""
    release = threading.Event()
    clock = FrozenClock(MONDAY + timedelta(seconds=1))
    first_store, second_store = Store(db_url), Store(db_url)
    first, recipe, slow = setup(first_store, clock, drafter=InstantDrafter(release=release))
    second, _, idle = setup(second_store, clock, misfire_grace=timedelta(weeks=2))
    earlier, latest = slots_between(recipe, MONDAY - WEEK - timedelta(hours=1), MONDAY)
    running = threading.Thread(target=first.run_slot, args=(recipe, latest))
    running.start()
    _wait_until(lambda: slow.calls == 1)

    result = second.run_slot(
        recipe.model_copy(update={"misfire_grace": timedelta(weeks=2)}), earlier
    )

    release.set()
    running.join()
    assert (result.outcome, result.reason) == (DraftOutcome.SKIPPED, SkipReason.OVERLAP)
    assert idle.calls == 0
    first_store.dispose()
    second_store.dispose()
