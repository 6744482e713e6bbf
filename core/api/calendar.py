"""The publication calendar (docs/design.md §23): per recipe and target, the slots of the last
day and the next `days`, each with its state as the runs table says. Read-only: one
query for the runs in the window (ix_runs_recipe_slot), one for their publish receipts;
the slots nobody has drafted yet come from the schedule.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlmodel import Session, col, select

from core.identity import item_token_of_run, publish_effect_key
from core.models import EffectRow, RunRow
from core.policies import CalendarState, ExpiryReason, FailReason, SkipReason, Trigger
from core.render import Rows
from core.setup.config import Config, Recipe
from core.slots.publish_time import publication_label
from core.slots.schedule import slots_between
from core.sources.polled import ItemLabel, labels_of_runs
from core.states import EffectState, RunState

LOOK_BACK = timedelta(days=1)  # slots this recent are shown too: published, missed
MAX_DAYS = 366
MISSED_REASONS = {ExpiryReason.MISSED_SLOT, FailReason.MISSED_SLOT, SkipReason.MISFIRE}
_BY_RUN_STATE = {
    RunState.PENDING: CalendarState.NOT_DRAFTED,
    RunState.RUNNING: CalendarState.DRAFTING,
    RunState.AWAITING_REVIEW: CalendarState.WAITING_FOR_REVIEW,
    RunState.APPROVED: CalendarState.APPROVED,
    RunState.PUBLISHING: CalendarState.PUBLISHING,
    RunState.UNCERTAIN: CalendarState.PUBLISHING,
}


@dataclass(frozen=True, slots=True)
class CalendarEntry:
    recipe: str
    target: str | None  # the target id (webhook, slack:C…), None: no publish step
    run: str
    slot_at: datetime  # the slot's instant: the publication time when drafting ahead
    state: str  # a CalendarState, or the run's own final state
    run_state: str | None  # as the runs table says; None: no run yet
    publish_at: datetime | None  # approved: when it goes out
    draft_key: str | None
    link: str | None  # published: the post's URL, or its id at the destination
    shown: str  # the state in words: "approved, publishes Mon 2 Nov 09:00 (Europe/London)"
    item: str | None = None  # an item run's item: its title and link (docs/design.md §29)


class Calendar(Rows[CalendarEntry]):
    """A table in a notebook; `galley.plots.calendar(calendar)` draws it."""

    title = "publication calendar"
    row_type = CalendarEntry
    columns = ("recipe", "target", "run", "item", "shown")


def calendar_state(run: RunRow | None, receipt: EffectRow | None) -> str:
    """One rule for a slot's state on the calendar, from its run and its receipt."""
    if run is None:
        return CalendarState.NOT_DRAFTED
    if run.state in _BY_RUN_STATE:
        return _BY_RUN_STATE[run.state]
    if run.reason in MISSED_REASONS:
        return CalendarState.MISSED
    if run.state == RunState.SUCCEEDED and receipt is not None:
        return CalendarState.PUBLISHED
    return RunState(run.state).value


def read_calendar(session: Session, config: Config, now: datetime, days: int) -> Calendar:
    if not 0 < days <= MAX_DAYS:
        raise ValueError(f"days must be between 1 and {MAX_DAYS}, not {days}")
    start, end = now - LOOK_BACK, now + timedelta(days=days)
    recipes = sorted(config.recipes.values(), key=lambda r: r.name)
    runs = _runs(session, [r.name for r in recipes], start, end)
    receipts = _receipts(session, recipes, runs.values())
    items = labels_of_runs(session, [i for i in runs if item_token_of_run(i) is not None])
    entries = [
        _entry(recipe, target, run_id, slot_at, runs.get(run_id), receipts)
        for recipe in recipes
        for run_id, slot_at in _slot_runs(recipe, runs, start, end)
        for target in (tuple(t.target for t in recipe.targets) or (None,))
    ]
    entries = [
        dataclasses.replace(e, item=_item_words(label)) if (label := items.get(e.run)) else e
        for e in entries
    ]
    entries.sort(key=lambda e: (e.slot_at, e.recipe, e.target or ""))
    return Calendar(entries)


def _slot_runs(
    recipe: Recipe, runs: dict[str, RunRow], start: datetime, end: datetime
) -> list[tuple[str, datetime]]:
    """The schedule's slots in the window, and any run of the recipe in it the schedule
    no longer names (a changed cron, a manual run). An items recipe's slots are polls, not
    publications: its item runs only, less those a first poll found already there."""
    named: dict[str, datetime] = {}
    if recipe.trigger == Trigger.SCHEDULE:
        named = {s.run_id(recipe.name): s.fire_at for s in slots_between(recipe, start, end)}
    named |= {
        run.id: run.slot_at
        for run in runs.values()
        if run.recipe == recipe.name and run.reason != SkipReason.BACKFILL
    }
    return sorted(named.items(), key=lambda item: (item[1], item[0]))


def _runs(session: Session, names: list[str], start: datetime, end: datetime) -> dict[str, RunRow]:
    rows = session.exec(
        select(RunRow).where(
            col(RunRow.recipe).in_(names), col(RunRow.slot_at) > start, col(RunRow.slot_at) <= end
        )
    ).all()
    return {row.id: row for row in rows}


def _receipts(
    session: Session, recipes: list[Recipe], runs: Iterable[RunRow]
) -> dict[str, EffectRow]:
    """The succeeded publish receipts of these runs' drafts, by effect key."""
    targets = {r.name: [t.target for t in r.targets] for r in recipes}
    keys = [
        publish_effect_key(run.draft_key, target)
        for run in runs
        if run.draft_key is not None
        for target in targets.get(run.recipe, [])
    ]
    if not keys:
        return {}
    rows = session.exec(
        select(EffectRow).where(
            col(EffectRow.key).in_(keys), col(EffectRow.state) == EffectState.SUCCEEDED
        )
    ).all()
    return {row.key: row for row in rows}


def _entry(
    recipe: Recipe,
    target: str | None,
    run_id: str,
    slot_at: datetime,
    run: RunRow | None,
    receipts: dict[str, EffectRow],
) -> CalendarEntry:
    draft_key = run.draft_key if run is not None else None
    receipt = None
    if draft_key is not None and target is not None:
        receipt = receipts.get(publish_effect_key(draft_key, target))
    state = calendar_state(run, receipt)
    link = _link(receipt) if state == CalendarState.PUBLISHED else None
    publish_at = run.publish_at if run is not None and run.state == RunState.APPROVED else None
    return CalendarEntry(
        recipe=recipe.name,
        target=target,
        run=run_id,
        slot_at=slot_at,
        state=state,
        run_state=None if run is None else RunState(run.state).value,
        publish_at=publish_at,
        draft_key=draft_key,
        link=link,
        shown=_in_words(recipe, state, publish_at, link),
    )


def _item_words(label: ItemLabel) -> str:
    return f"{label.title} <{label.link}>" if label.link else label.title


def _link(receipt: EffectRow | None) -> str | None:
    if receipt is None:
        return None
    try:
        result = json.loads(receipt.result or "{}")
    except ValueError:
        result = {}
    found = result.get("url") or result.get("link") if isinstance(result, dict) else None
    return str(found) if found else receipt.external_id


def _in_words(recipe: Recipe, state: str, publish_at: datetime | None, link: str | None) -> str:
    match state:
        case CalendarState.NOT_DRAFTED:
            return "not drafted yet"
        case CalendarState.WAITING_FOR_REVIEW:
            return "waiting for review"
        case CalendarState.APPROVED if publish_at is not None:
            return f"approved, publishes {publication_label(publish_at, recipe.zone)}"
        case CalendarState.PUBLISHED:
            return f"published → {link}" if link else "published"
    return state
