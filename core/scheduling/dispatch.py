"""What happens when a recipe's slot fires, or was missed: run, skip, queue or catch up.

The scheduler is at-least-once: it fires late, twice, or not at all. The slot always
comes from the schedule, never from the clock, and every decision not to draft a slot
is recorded as a `skipped` run with its reason, so a person can see what did not happen.
"""

from __future__ import annotations

import threading
from datetime import datetime, timedelta

import sqlalchemy as sa
from sqlmodel import col, select

from core.drafting.claims import DraftResult, skip_if_pending, skip_slot
from core.drafting.service import DraftingService
from core.drafting_policies import DraftOutcome
from core.identity import post_run_range
from core.models import RunRow
from core.policies import PendingReason, SkipReason, Trigger
from core.ports import Clock
from core.setup.config import Recipe
from core.slots.publish_time import too_late_to_draft
from core.slots.schedule import Slot, latest_slot_at_or_before, slot_of_run, slots_between
from core.states import RunState
from core.store.engine import Store
from core.store.leases import SCHEDULER
from core.store.rows import lock_run, run_row

STALE_PENDING = timedelta(minutes=1)  # a pending run untouched this long has no one on it
MAX_RECORDED_MISSES = 500  # a recipe offline for long records its most recent misses only
QUEUE_POLL_SECONDS = 1.0


class SlotDispatcher:
    """Turns a fire (or a start-up) into drafted, skipped or queued slots."""

    def __init__(
        self,
        store: Store,
        drafting: DraftingService,
        clock: Clock,
        *,
        stopping: threading.Event | None = None,
        queue_poll_seconds: float = QUEUE_POLL_SECONDS,
        recipes: dict[str, Recipe] | None = None,
    ) -> None:
        self.recipes = recipes or {}
        self.store = store
        self.drafting = drafting
        self.clock = clock
        self.stopping = stopping or threading.Event()
        self.queue_poll_seconds = queue_poll_seconds

    def fire(self, recipe: Recipe, fire_at: datetime) -> list[DraftResult]:
        """The scheduler says the slot at `fire_at` is due for drafting (its drafting
        fire, draft_ahead before it, has come): run the latest due slot once.

        Slots before it that never got a run (the host slept, the process was down)
        coalesce into it and are recorded as skipped.
        """
        due = self._unrun_slots(recipe, up_to=fire_at)
        if not due:
            return []
        latest_instant = due[-1].fire_at
        missed = [s for s in due if s.fire_at < latest_instant]
        latest = [s for s in due if s.fire_at == latest_instant]  # a DST shift may share it
        results = [
            self._skip(recipe, s, SkipReason.MISFIRE, _coalesced(recipe, latest)) for s in missed
        ]
        return results + [self.run_slot(recipe, slot) for slot in latest]

    def resume(self, run_id: str) -> DraftResult | None:
        """Draft a run again whose claim expired (its worker died): once, if still
        within misfire_grace, else it is recorded as a misfire. A person's request
        (`manual`) is drafted whatever its age, as it was asked for."""
        run = self._pending_run(run_id)
        recipe = None if run is None else self.recipes.get(run.recipe)
        if run is None or recipe is None:
            return None
        slot = slot_of_run(recipe, run_id, run.slot_at)
        return None if slot is None else self._redispatch(recipe, slot, manual=run.manual)

    def _redispatch(self, recipe: Recipe, slot: Slot, *, manual: bool) -> DraftResult:
        """A person's request stays a person's request: no misfire_grace, no overlap. An
        item's run given back by its claim's holder is drafted again whatever its age: it
        already had its turn (docs/design.md §29)."""
        if manual or slot.item is not None:
            return self.drafting.draft_slot(recipe, slot, manual=True, actor=SCHEDULER)
        return self.run_slot(recipe, slot)

    def stale_pending_runs(self) -> list[str]:
        """Pending runs nobody has moved for a while: a crash between the sweep and its
        re-dispatch, a bump, a queued run left at shutdown. Nothing else looks at them. An
        item waiting its turn is not one while its recipe polls: its polls draft those,
        oldest first (docs/design.md §29); once the recipe left the config, it is."""
        now = self.clock.now()
        with self.store.read() as session:  # ix_runs_state_updated
            found = session.exec(
                select(RunRow.id, RunRow.recipe, RunRow.reason).where(
                    col(RunRow.state) == RunState.PENDING,
                    col(RunRow.updated_at) < now - STALE_PENDING,
                )
            ).all()
        polled = {name for name, r in self.recipes.items() if r.trigger == Trigger.ITEMS}
        return [
            run_id
            for run_id, recipe, reason in found
            if reason != PendingReason.ITEM_WAITS or recipe not in polled
        ]

    def people_waiting(self) -> list[str]:
        """Pending runs that are a person's request (a bump, `galley draft` in a process
        that stopped): a start drafts them at once rather than after STALE_PENDING."""
        with self.store.read() as session:  # ix_runs_state_updated: pending runs are few
            found = session.exec(
                select(RunRow.id).where(
                    col(RunRow.state) == RunState.PENDING, col(RunRow.manual).is_(True)
                )
            ).all()
        return list(found)

    def settle_pending(self, run_id: str) -> DraftResult | None:
        """Pick a stale pending run up, or close it with a reason: a person's (a manual
        run, or one a bump sent back) is drafted at the current version with no
        misfire_grace, any other one under
        the recipe's misfire and overlap policies, and one whose recipe left the config is
        skipped."""
        run = self._pending_run(run_id)
        if run is None:
            return None
        recipe = self.recipes.get(run.recipe)
        if recipe is None:
            return self._close_removed(run_id)
        slot = slot_of_run(recipe, run_id, run.slot_at)
        if slot is None:  # the schedule changed under it
            return self._skip_run(run_id, SkipReason.MISFIRE, "no longer a slot of the schedule")
        return self._redispatch(recipe, slot, manual=run.manual)

    def _pending_run(self, run_id: str) -> RunRow | None:
        """The run if it is still pending; what is done with it next re-checks under a lock."""
        with self.store.transaction() as session:
            run = run_row(session, run_id)
        return run if run is not None and run.state == RunState.PENDING else None

    def _close_removed(self, run_id: str) -> DraftResult:
        return self._skip_run(
            run_id, SkipReason.RECIPE_REMOVED, "its recipe is no longer in the config file"
        )

    def _skip_run(self, run_id: str, reason: SkipReason, detail: str) -> DraftResult:
        with self.store.transaction() as session:
            run = lock_run(session, run_id)
            if run is not None:
                now = self.clock.now()
                skip_if_pending(session, run, reason, detail, actor=SCHEDULER, now=now)
        return DraftResult(DraftOutcome.SKIPPED, run_id, None, reason, detail)

    def run_slot(self, recipe: Recipe, slot: Slot) -> DraftResult:
        """Draft one scheduled slot under the recipe's misfire and overlap policies
        (misfire_grace counts from the drafting fire, docs/design.md §23)."""
        queued = False
        while True:
            late = too_late_to_draft(recipe, slot.fire_at, self.clock.now())
            if late is not None:
                detail = "queued behind a run that outlasted misfire_grace" if queued else late
                return self._skip(recipe, slot, SkipReason.MISFIRE, detail)
            result = self.drafting.draft_slot(recipe, slot, actor=SCHEDULER, overlap=recipe.overlap)
            if result.outcome != DraftOutcome.QUEUED:
                return result
            if self.stopping.wait(self.queue_poll_seconds):
                return result  # shutting down: the queued run stays pending for the next start
            queued = True

    def _unrun_slots(self, recipe: Recipe, up_to: datetime) -> list[Slot]:
        """Due slots since the recipe's last recorded run that have no run, or a pending one."""
        with self.store.transaction() as session:
            last = session.exec(
                select(sa.func.max(RunRow.slot_at)).where(
                    col(RunRow.recipe) == recipe.name,
                    col(RunRow.state) != RunState.PENDING,
                    not_a_post(recipe.name),  # a person's post: docs/design.md §37
                )
            ).one()
        if last is None:  # a fresh database: only the latest due slot counts
            latest = latest_slot_at_or_before(recipe, up_to)
            return [] if latest is None else [latest]
        window = slots_between(recipe, last, up_to)[-MAX_RECORDED_MISSES:]
        if not window:
            return []
        with self.store.transaction() as session:
            ids = [s.run_id(recipe.name) for s in window]
            closed = set(
                session.exec(
                    select(RunRow.id).where(
                        col(RunRow.id).in_(ids), col(RunRow.state) != RunState.PENDING
                    )
                ).all()
            )
        return [s for s in window if s.run_id(recipe.name) not in closed]

    def _skip(self, recipe: Recipe, slot: Slot, reason: SkipReason, detail: str) -> DraftResult:
        with self.store.transaction() as session:
            now = self.clock.now()
            run = skip_slot(session, recipe, slot, reason, detail, actor=SCHEDULER, now=now)
            return DraftResult(DraftOutcome.SKIPPED, run.id, None, reason, detail)


def _coalesced(recipe: Recipe, latest: list[Slot]) -> str:
    return "missed; coalesced into " + ", ".join(s.run_id(recipe.name) for s in latest)


def not_a_post(recipe: str) -> sa.ColumnElement[bool]:
    """Runs other than a person's posts (docs/design.md §37): a post at its own time, even
    a month ahead, records no slot of the schedule."""
    after, before = post_run_range(recipe)
    return sa.not_(sa.and_(col(RunRow.id) > after, col(RunRow.id) < before))
