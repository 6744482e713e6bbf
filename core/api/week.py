"""The week at a glance (docs/design.md §36): the next 7 days, today first, in the team's
zone (`[slack] digest_timezone`), each day's slots and planned posts per recipe and
target with their state (the publication calendar's entries: runs of any kind, a
person's post among them), and the items each items recipe has found and not drafted
yet. One value: the Home tab, `galley calendar` and `g.week()` render it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from itertools import pairwise
from typing import Any
from zoneinfo import ZoneInfo

from sqlmodel import Session, col, func, select

from core.api.calendar import CalendarEntry, read_calendar
from core.identity import item_run_range
from core.models import RunRow
from core.policies import CalendarState, Trigger
from core.render import jsonable
from core.setup.config import Config
from core.sources.polled import labels_of_runs
from core.states import RunState

WEEK_DAYS = 7
ITEMS_SHOWN = 3  # the oldest items waiting named per recipe; the rest counted


@dataclass(frozen=True)
class WeekDay:
    day: date
    entries: tuple[CalendarEntry, ...]  # by time, then recipe and target


@dataclass(frozen=True)
class ItemsWaiting:
    """An items recipe's items found and not drafted yet (runs still `pending`)."""

    recipe: str
    count: int
    oldest: tuple[str, ...]  # the titles of the oldest few


@dataclass(frozen=True)
class Week:
    zone: str
    days: tuple[WeekDay, ...]
    items_waiting: tuple[ItemsWaiting, ...]

    def waiting_for_review(self) -> list[CalendarEntry]:
        """The week's drafts at review, soonest first: what a reviewer decides first."""
        return [
            entry
            for day in self.days
            for entry in day.entries
            if entry.state == CalendarState.WAITING_FOR_REVIEW
        ]

    def to_json(self) -> dict[str, Any]:
        return {
            "zone": self.zone,
            "days": [
                {"day": d.day.isoformat(), "entries": [jsonable(e) for e in d.entries]}
                for d in self.days
            ],
            "items_waiting": [jsonable(i) for i in self.items_waiting],
        }


def read_week(session: Session, config: Config, now: datetime) -> Week:
    zone = ZoneInfo(config.slack.digest_timezone)
    today = now.astimezone(zone).date()
    bounds = [
        datetime.combine(today + timedelta(days=n), time(0), zone) for n in range(WEEK_DAYS + 1)
    ]
    calendar = read_calendar(session, config, now, WEEK_DAYS + 1)
    days = tuple(
        WeekDay(
            start.date(),
            tuple(e for e in calendar if start <= e.slot_at.astimezone(zone) < end),
        )
        for start, end in pairwise(bounds)
    )
    return Week(config.slack.digest_timezone, days, _items_waiting(session, config))


def _items_waiting(session: Session, config: Config) -> tuple[ItemsWaiting, ...]:
    found = []
    for recipe in sorted(config.recipes.values(), key=lambda r: r.name):
        if recipe.trigger != Trigger.ITEMS:
            continue
        after, before = item_run_range(recipe.name)
        pending = (
            col(RunRow.id) > after,
            col(RunRow.id) < before,
            col(RunRow.state) == RunState.PENDING,
        )
        count = session.exec(select(func.count()).select_from(RunRow).where(*pending)).one()
        if not count:
            continue
        oldest = session.exec(
            select(RunRow.id)
            .where(*pending)
            .order_by(col(RunRow.slot_at), col(RunRow.created_at))
            .limit(ITEMS_SHOWN)
        ).all()
        labels = labels_of_runs(session, oldest)
        titles = tuple(labels[run].title if run in labels else run for run in oldest)
        found.append(ItemsWaiting(recipe.name, int(count), titles))
    return tuple(found)


def entry_text(entry: CalendarEntry, zone: str) -> str:
    """One entry as a line: its time in the week's zone, recipe, target, run and state."""
    at = entry.slot_at.astimezone(ZoneInfo(zone)).strftime("%H:%M")
    target = f" → {entry.target}" if entry.target else ""
    item = f" · {entry.item}" if entry.item else ""
    return f"{at} {entry.recipe}{target} · {entry.run}{item} · {entry.shown}"
