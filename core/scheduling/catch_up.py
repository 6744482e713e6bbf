"""Catch-up at start-up for every recipe at once (docs/design.md §14: a fresh start runs each
recipe's latest due slot if it is within misfire_grace).

One query reads the latest recorded run of every recipe; slot arithmetic is shared by
recipes with the same schedule; slots that are only to be recorded as skipped (missed,
or past misfire_grace) are written in batches, one transaction each. Only the slots
that may still be drafted go to `SlotDispatcher.run_slot`, one by one, as before.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlmodel import Session, col, select

from core.drafting.claims import skip_slot
from core.identity import POST_MARK, RUN_MARK, slot_wall_of_run
from core.models import EventRow, RecipeRow, RunRow
from core.policies import SkipReason
from core.setup.config import Recipe
from core.slots.publish_time import slots_due_by, too_late_to_draft
from core.slots.schedule import Slot, latest_slot_at_or_before, next_slots, slots_between
from core.states import EventSubject, RunState
from core.store.engine import Store
from core.store.leases import SCHEDULER
from core.telemetry import observe

MAX_RECORDED_MISSES = (
    500  # as core.scheduling.dispatch: a long outage records its latest misses only
)
WRITE_BATCH = 500  # skipped runs per transaction: the write lock is held for one batch


def latest_recorded_slots(session: Session) -> dict[str, datetime]:
    """Each recipe's latest slot with a run that is no longer pending: one query, one
    index probe per recipe (ix_runs_recipe_slot, newest first)."""
    latest = (
        select(RunRow.slot_at)
        .where(
            col(RunRow.recipe) == col(RecipeRow.name),
            col(RunRow.state) != RunState.PENDING,
            # a person's post records no slot (docs/design.md §37)
            col(RunRow.id).not_like(col(RecipeRow.name) + f"{RUN_MARK}{POST_MARK}%"),
        )
        .order_by(col(RunRow.slot_at).desc())
        .limit(1)
        .scalar_subquery()
    )
    rows = session.exec(select(RecipeRow.name, latest)).all()
    return {name: slot_at for name, slot_at in rows if slot_at is not None}


class SharedSchedules:
    """Slot arithmetic for one instant, shared by recipes with the same schedule, zone
    and DST policies (it is a pure function of those): 10,000 recipes on a few dozen
    schedules compute a few dozen of them."""

    def __init__(self) -> None:
        self._latest: dict[tuple[Any, ...], Slot | None] = {}
        self._next: dict[tuple[Any, ...], Slot | None] = {}

    @staticmethod
    def _key(recipe: Recipe, when: datetime) -> tuple[Any, ...]:
        return (recipe.schedule, recipe.timezone, recipe.dst_gap, recipe.dst_repeat, when)

    def latest_at_or_before(self, recipe: Recipe, when: datetime) -> Slot | None:
        key = self._key(recipe, when)
        if key not in self._latest:
            self._latest[key] = latest_slot_at_or_before(recipe, when)
        return self._latest[key]

    def next_after(self, recipe: Recipe, when: datetime) -> Slot | None:
        key = self._key(recipe, when)
        if key not in self._next:
            upcoming = next_slots(recipe, when, 1)
            self._next[key] = upcoming[0] if upcoming else None
        return self._next[key]


@dataclass(frozen=True)
class Skip:
    recipe: Recipe
    slot: Slot
    detail: str


@dataclass
class CatchUpPlan:
    to_run: list[tuple[Recipe, Slot]] = field(default_factory=list)  # within misfire_grace
    to_skip: list[Skip] = field(default_factory=list)  # recorded as skipped (misfire)


def plan_catch_up(
    recipes: Iterable[Recipe],
    recorded: dict[str, datetime],
    now: datetime,
    schedules: SharedSchedules,
) -> CatchUpPlan:
    """What start-up catch-up does for each recipe, decided without the database: slots
    since the latest recorded run coalesce into the latest due one, which runs (through
    `SlotDispatcher.run_slot`) if it is within misfire_grace and is recorded as a misfire
    otherwise."""
    plan = CatchUpPlan()
    for recipe in recipes:
        latest = schedules.latest_at_or_before(recipe, slots_due_by(recipe, now))
        if latest is None:
            continue
        last = recorded.get(recipe.name)
        due = [latest] if last is None else slots_between(recipe, last, latest.fire_at)
        due = due[-MAX_RECORDED_MISSES:]
        if not due:
            continue
        newest = due[-1].fire_at
        newest_slots = [s for s in due if s.fire_at == newest]  # a DST shift may share it
        coalesced = "missed; coalesced into " + ", ".join(
            s.run_id(recipe.name) for s in newest_slots
        )
        plan.to_skip += [Skip(recipe, s, coalesced) for s in due if s.fire_at < newest]
        for slot in newest_slots:
            late = too_late_to_draft(recipe, slot.fire_at, now)
            if late is None:
                plan.to_run.append((recipe, slot))
            else:
                plan.to_skip.append(Skip(recipe, slot, late))
    return plan


def record_skips(store: Store, skips: Sequence[Skip], now: datetime) -> int:
    """Record slots as skipped (misfire), WRITE_BATCH per transaction; returns how many
    runs were created. A slot whose run exists already (a fire got there first) goes
    the dispatcher's way: skipped only if it is still pending."""
    created = 0
    for start in range(0, len(skips), WRITE_BATCH):
        batch = skips[start : start + WRITE_BATCH]
        with store.transaction() as session:
            created += _record_batch(session, batch, now)
    return created


def _record_batch(session: Session, batch: Sequence[Skip], now: datetime) -> int:
    names = sorted({s.recipe.name for s in batch})
    session.execute(
        _insert(session, RecipeRow)
        .values([{"name": n, "version": 1, "paused": False, "updated_at": now} for n in names])
        .on_conflict_do_nothing()
    )
    rows = [_skipped_run(skip, now) for skip in batch]
    inserted = set(
        session.execute(
            _insert(session, RunRow).values(rows).on_conflict_do_nothing().returning(RunRow.id)
        ).scalars()
    )
    events: list[dict[str, Any]] = []
    for skip, row in zip(batch, rows, strict=True):
        if row["id"] in inserted:
            events += _events(skip, row, now)
        else:
            _skip_existing(session, skip, now)
    if events:
        session.execute(sa.insert(EventRow), events)
        for event in events:  # logged and counted like every other state change
            observe.state_changed(
                session,
                subject=event["subject"],
                subject_id=event["subject_id"],
                run_id=event["run_id"],
                from_state=event["from_state"],
                to_state=event["to_state"],
                actor=event["actor"],
                reason=event["reason"],
                run_reason=SkipReason.MISFIRE,
            )
    return len(inserted)


def _skipped_run(skip: Skip, now: datetime) -> dict[str, Any]:
    run_id = skip.slot.run_id(skip.recipe.name)
    return {
        "id": run_id,
        "recipe": skip.recipe.name,
        "slot_wall": slot_wall_of_run(run_id),
        "slot_at": skip.slot.fire_at,
        "state": RunState.SKIPPED,
        "reason": SkipReason.MISFIRE,
        "version": 1,
        "manual": False,
        "created_at": now,
        "updated_at": now,
    }


def _events(skip: Skip, row: dict[str, Any], now: datetime) -> list[dict[str, Any]]:
    """The two history lines `open_run` and `move_run` would have written."""
    common = {"at": now, "subject": EventSubject.RUN, "subject_id": row["id"], "run_id": row["id"]}
    opened = f"slot {row['slot_wall']} fires at {skip.slot.fire_at.isoformat()}"
    return [
        common
        | {"from_state": None, "to_state": RunState.PENDING, "actor": SCHEDULER, "reason": opened},
        common
        | {
            "from_state": RunState.PENDING,
            "to_state": RunState.SKIPPED,
            "actor": SCHEDULER,
            "reason": skip.detail,
        },
    ]


def _skip_existing(session: Session, skip: Skip, now: datetime) -> None:
    reason, detail = SkipReason.MISFIRE, skip.detail
    skip_slot(session, skip.recipe, skip.slot, reason, detail, actor=SCHEDULER, now=now)


def _insert(session: Session, table: type[Any]) -> Any:
    """The dialect's INSERT, which has ON CONFLICT DO NOTHING (as `insert_ignore`)."""
    if session.get_bind().dialect.name == "postgresql":
        return postgresql.insert(table)
    return sqlite.insert(table)
