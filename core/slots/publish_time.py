"""Draft ahead, publish on time (docs/design.md §23): when a slot's drafting fires, when an
approved draft goes out, and how long an approval and a waiting draft stay good.

Pure functions of a recipe and instants: the one home of each timing rule, read by the
scheduler, the dispatcher, the publish queue, the review message and the calendar. The
slot instant stays the run's identity; nothing here ever names a run by now().
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Protocol
from zoneinfo import ZoneInfo

from core.identity import ASAP_WALL, post_id_of_run
from core.ports import ReviewItem
from core.slots.schedule import ScheduleSpec, Slot, next_slots
from core.spoken import spoken_duration
from core.states import DraftState


class Timing(ScheduleSpec, Protocol):
    """What the timing rules read of a recipe; `core.setup.config.Recipe` satisfies it."""

    @property
    def draft_ahead(self) -> timedelta: ...
    @property
    def publish_late(self) -> timedelta: ...
    @property
    def misfire_grace(self) -> timedelta: ...
    @property
    def approval_ttl(self) -> timedelta: ...
    @property
    def targets(self) -> tuple[object, ...]: ...
    @property
    def batch_deadline(self) -> timedelta: ...


def ahead(recipe: Timing) -> bool:
    """With draft_ahead > 0 the slot is the publication time; with 0s, as before, a
    draft is published when it is approved."""
    return recipe.draft_ahead > timedelta(0)


def drafting_fire(recipe: Timing, slot_at: datetime) -> datetime:
    """The instant a slot's drafting fires: draft_ahead of elapsed time before the
    slot's own instant (its zone and DST policies already applied), so the fire
    moves with the zone's offset exactly as the slot does."""
    return slot_at - recipe.draft_ahead


def slots_due_by(recipe: Timing, now: datetime) -> datetime:
    """The latest slot instant whose drafting has fired by `now`."""
    return now + recipe.draft_ahead


def next_drafting(recipe: Timing, after: datetime, count: int) -> list[Slot]:
    """The next `count` slots whose drafting fires after `after`, in fire order (the
    fire is the slot minus a constant, so fire order is slot order)."""
    return next_slots(recipe, slots_due_by(recipe, after), count)


def drafting_lateness(recipe: Timing, slot_at: datetime, now: datetime) -> timedelta:
    return now - drafting_fire(recipe, slot_at)


def too_late_to_draft(recipe: Timing, slot_at: datetime, now: datetime) -> str | None:
    """Why a scheduled slot is not drafted now (a misfire), or None if it still may be:
    found later than misfire_grace after its drafting fire, or (drafting ahead) after
    its publication time, which nothing drafted now could make."""
    lateness = drafting_lateness(recipe, slot_at, now)
    if lateness > recipe.misfire_grace:
        return (
            f"found {spoken_duration(lateness)} late; "
            f"misfire_grace is {spoken_duration(recipe.misfire_grace)}"
        )
    if ahead(recipe) and now > slot_at:
        return "its publication time passed before it was drafted"
    return None


def publish_at(recipe: Timing, slot_at: datetime, approved_at: datetime, run: str = "") -> datetime:
    """When an approved draft goes out: at the slot when drafting ahead (at once if it
    was approved after its slot, within publish_late), else at the approval. A person's
    post (`run`) goes out at its time, or once approved (docs/design.md §37)."""
    if post_id_of_run(run) is not None:
        return max(slot_at, approved_at)  # a post given no time has its creation as slot
    return max(slot_at, approved_at) if ahead(recipe) else approved_at


def not_yet(publish_time: datetime | None, now: datetime) -> bool:
    """Nothing is published before its time (judged by the database's clock)."""
    return publish_time is not None and now < publish_time


def approval_stale(
    recipe: Timing, approved_at: datetime | None, publish_time: datetime | None, now: datetime
) -> bool:
    """approval_ttl counts from the later of the approval and the publication time: an
    approval given on Friday for Monday 09:00 is fresh on Monday morning."""
    if approved_at is None:
        return True
    start = max(approved_at, publish_time) if publish_time is not None else approved_at
    return now - start > recipe.approval_ttl


def batch_wait_until(recipe: Timing, slot_at: datetime, since: datetime) -> datetime:
    """The last instant a slot's draft may wait on a Message Batch before it is drafted
    synchronously: batch_deadline after `since` (the drafting fire for a scheduled slot,
    the request for a person's), and never past the slot when drafting ahead: a draft
    arriving after its publication time would leave nobody the time to review it."""
    until = since + recipe.batch_deadline
    return min(until, slot_at) if ahead(recipe) else until


def review_deadline(
    recipe: Timing, slot_at: datetime, run: str = "", wall: str = ""
) -> datetime | None:
    """Drafting ahead, a draft not approved by its slot plus publish_late is missed. A
    person's post (`run`, its `runs.slot_wall`) given a time is missed past that time
    plus publish_late, whatever draft_ahead; one given none never (docs/design.md §37)."""
    if post_id_of_run(run) is not None:
        return None if wall == ASAP_WALL else slot_at + recipe.publish_late
    return slot_at + recipe.publish_late if ahead(recipe) else None


def missed_its_time(
    recipe: Timing, slot_at: datetime, now: datetime, run: str = "", wall: str = ""
) -> bool:
    """An approved draft found later than publish_late after its slot is not published
    (a person may still retry it): never late beyond publish_late."""
    deadline = review_deadline(recipe, slot_at, run, wall)
    return deadline is not None and now > deadline


def publication_label(moment: datetime, zone: ZoneInfo | str) -> str:
    """`Mon 2 Nov 09:00 (Europe/London)`: a publication time as the recipe's zone reads it."""
    tz = zone if isinstance(zone, ZoneInfo) else ZoneInfo(zone)
    local = moment.astimezone(tz)
    return f"{local:%a} {local.day} {local:%b %H:%M} ({tz.key})"


def with_publication(recipes: Mapping[str, Timing], item: ReviewItem) -> ReviewItem:
    """An approved draft waiting for its slot (a person's post: its time) says when it goes
    out (its message, until publishing starts); one approved after it goes out at once and
    says nothing."""
    recipe = recipes.get(item.recipe)
    if recipe is None or not recipe.targets:
        return item
    if not ahead(recipe) and post_id_of_run(item.run_id) is None:  # a person's post goes out
        return item  # at its time, whatever draft_ahead (docs/design.md §37)
    if item.state != DraftState.APPROVED:
        return item
    if item.publish_at is None or (item.decided_at and item.publish_at <= item.decided_at):
        return item
    return dataclasses.replace(item, publishes=publication_label(item.publish_at, recipe.zone))
