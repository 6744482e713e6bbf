"""APScheduler 3 hosting: one job per recipe that fires at the recipe's slots.

APScheduler only says *when*; Galley decides *what*: each fire hands the nominal slot
time to `core.scheduling.dispatch.SlotDispatcher` on Galley's own drafting pool, so a slow model
call never holds a scheduler thread and never makes APScheduler drop a fire unseen.
The periodic passes run on the scheduler's pools too (`add_pass`; the bot's table of them
is `bot/run.py` `Bot.passes`). The scheduler's job store is memory: Galley's state lives in
Galley's database.
"""

from __future__ import annotations

import functools
import logging
import threading
from concurrent.futures import wait
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from apscheduler.events import EVENT_JOB_MISSED, JobExecutionEvent
from apscheduler.executors.pool import ThreadPoolExecutor as JobThreadPool
from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.base import BaseTrigger

from bot.pools import Pool, WorkPool
from core.api.services import Services
from core.identity import run_of_draft_key
from core.policies import Trigger
from core.publishing.missed_slots import expire_missed_slots
from core.review.queue import expire_overdue_drafts
from core.scheduling.catch_up import (
    SharedSchedules,
    latest_recorded_slots,
    plan_catch_up,
    record_skips,
)
from core.scheduling.dispatch import SlotDispatcher
from core.setup.config import Recipe
from core.slots.publish_time import drafting_fire, next_drafting, slots_due_by
from core.slots.schedule import latest_slot_at_or_before, slot_at_instant
from core.telemetry.metrics import SCHEDULER_FIRES, SCHEDULER_MISFIRES

if TYPE_CHECKING:
    from core.scheduling.items import ItemPoller

log = logging.getLogger(__name__)
RECIPE_JOB_PREFIX = "recipe:"
# A pass that runs as the scheduler starts still runs if start-up's catch-up took this long.
AT_START_GRACE = timedelta(minutes=5)


class RecipeTrigger(BaseTrigger):  # type: ignore[misc]
    """Fires at exactly the instants `core.slots.schedule` gives, DST policy included, each
    draft_ahead before its slot (docs/design.md §23): APScheduler's run time is the
    drafting fire, never the slot, which `SchedulerHost` names from it."""

    def __init__(self, recipe: Recipe) -> None:
        self.recipe = recipe

    def get_next_fire_time(
        self, previous_fire_time: datetime | None, now: datetime
    ) -> datetime | None:
        after = previous_fire_time or now
        upcoming = next_drafting(self.recipe, after, 1)
        return drafting_fire(self.recipe, upcoming[0].fire_at) if upcoming else None

    def __str__(self) -> str:
        return f"galley[{self.recipe.schedule} {self.recipe.timezone}]"


class _JobAtRunTime:
    """What APScheduler's `run_job` reads of a Job, with the nominal run time passed in."""

    def __init__(self, job: Any, run_time: datetime) -> None:
        self.id = job.id
        self._jobstore_alias = job._jobstore_alias
        self.misfire_grace_time = job.misfire_grace_time
        self.func = job.func
        self.args = job.args
        self.kwargs = {**job.kwargs, "scheduled_at": run_time}
        self._name = str(job)

    def __str__(self) -> str:
        return self._name


class NominalTimeExecutor(JobThreadPool):  # type: ignore[misc]
    """APScheduler 3 does not tell a job which run time it serves; this executor does."""

    def _do_submit_job(self, job: Any, run_times: list[datetime]) -> None:
        super()._do_submit_job(_JobAtRunTime(job, run_times[-1]), run_times[-1:])


class SchedulerHost:
    """The scheduler and the pools of one process: the drafting and publishing pools the
    fires and the listeners hand work to, the scheduler's own for fires and passes."""

    def __init__(
        self,
        services: Services,
        *,
        drafting_threads: int = 4,
        publishing_threads: int = 4,
        items: ItemPoller | None = None,
    ) -> None:
        """`items` polls items recipes at their fires: the bot's, which tells its poll
        alerts (bot/wiring.py); `services.items` when none is given."""
        self.services = services
        self.items = items
        self.stopping = threading.Event()
        self.dispatcher = SlotDispatcher(
            services.store,
            services.drafting,
            services.clock,
            stopping=self.stopping,
            recipes=services.config.recipes,
        )
        self.drafting = WorkPool(Pool.DRAFTING, drafting_threads, self.stopping)
        self.publishing = WorkPool(Pool.PUBLISHING, publishing_threads, self.stopping)
        self.scheduler = BackgroundScheduler(
            timezone=UTC,
            executors={
                Pool.FIRES: NominalTimeExecutor(max_workers=2),  # hand-offs only
                Pool.HOUSEKEEPING: JobThreadPool(max_workers=2),
                Pool.SLACK: JobThreadPool(max_workers=2),
            },
        )
        self.scheduler.add_listener(self._on_missed, EVENT_JOB_MISSED)

    def start(self) -> None:
        """Catch up from the database first, then let the schedule run.

        Catch-up is planned for all recipes at once (one query for every recipe's latest
        run); the jobs are registered in one go with their first fire time, computed once
        per distinct schedule rather than by each job's trigger.
        """
        self.sweep_claims()  # claims a dead process left behind, now expired
        recipes = list(self.services.config.recipes.values())
        self._catch_up(recipes)
        schedules = SharedSchedules()
        scheduler_now = datetime.now(UTC)  # the clock APScheduler's triggers read
        for recipe in recipes:
            first = schedules.next_after(recipe, slots_due_by(recipe, scheduler_now))
            self.scheduler.add_job(
                self._on_fire,
                trigger=RecipeTrigger(recipe),
                executor=Pool.FIRES,
                id=RECIPE_JOB_PREFIX + recipe.name,
                name=recipe.name,
                args=[recipe.name],
                replace_existing=True,
                max_instances=1,
                coalesce=True,
                misfire_grace_time=int(recipe.misfire_grace.total_seconds()),
                next_run_time=None if first is None else drafting_fire(recipe, first.fire_at),
            )
        self.scheduler.start()

    def add_pass(
        self,
        job_id: str,
        func: Any,
        trigger: BaseTrigger,
        pool: Pool,
        *,
        grace: timedelta | None = None,
        at_start: bool = False,
    ) -> None:
        """A periodic pass on one of the scheduler's pools, one run at a time; a run missed
        by less than `grace` still runs, once. `at_start`: its first run is as the
        scheduler starts (after start-up's catch-up, however long that took), not one
        interval later."""
        if at_start:
            grace = max(grace or timedelta(0), AT_START_GRACE)
        self.scheduler.add_job(
            func,
            trigger,
            id=job_id,
            executor=pool,
            replace_existing=True,
            max_instances=1,
            coalesce=True,
            **({"next_run_time": datetime.now(UTC)} if at_start else {}),
            **({} if grace is None else {"misfire_grace_time": int(grace.total_seconds())}),
        )

    def submit(self, func: Any, *args: Any, **kwargs: Any) -> None:
        """Run work on the drafting pool (tests and benchmarks hand it drafts)."""
        self.drafting.take(functools.partial(func, **kwargs), *args)

    def stop(self, deadline: timedelta) -> bool:
        """No new runs; running model calls and sends get until `deadline`. True if all
        finished."""
        self.stopping.set()
        if self.scheduler.running:
            self.scheduler.shutdown(wait=False)
        running = self.drafting.shut() | self.publishing.shut()
        _, unfinished = wait(running, timeout=deadline.total_seconds())
        return not [f for f in unfinished if not f.cancelled()]

    def _catch_up(self, recipes: list[Recipe]) -> None:
        """Record what is only to be skipped in batches (one task) and draft the slots
        still within misfire_grace (a task each): `core/scheduling/catch_up.py` decides which."""
        store, now = self.services.store, self.services.clock.now()
        with store.read() as session:
            recorded = latest_recorded_slots(session)
        scheduled = [recipe for recipe in recipes if recipe.trigger == Trigger.SCHEDULE]
        plan = plan_catch_up(scheduled, recorded, now, SharedSchedules())
        if plan.to_skip:
            self.drafting.take(record_skips, store, plan.to_skip, now)
        for recipe, slot in plan.to_run:
            self.drafting.take(self.dispatcher.run_slot, recipe, slot)
        for recipe in recipes:  # a start polls: items left waiting by a crash are drafted
            if recipe.trigger == Trigger.ITEMS:
                self.drafting.take(self.poll_items, recipe, now)
        for run_id in self.dispatcher.people_waiting():  # a bump made while it was down
            self.drafting.take(self.dispatcher.settle_pending, run_id)

    def wait_idle(self, timeout: float | None = None) -> None:
        """Block until the drafting and publishing pools have nothing left (tests and
        benchmarks)."""
        wait(self.drafting.pending() | self.publishing.pending(), timeout=timeout)

    def stop_now(self) -> None:
        self.stop(timedelta(0))

    def _on_fire(self, recipe_name: str, scheduled_at: datetime | None = None) -> None:
        """`scheduled_at` comes from NominalTimeExecutor (the default only satisfies
        APScheduler's signature check; without it the latest due slot is used)."""
        recipe = self.services.config.recipes[recipe_name]
        SCHEDULER_FIRES.labels(recipe_name).inc()
        fired = scheduled_at or self.services.clock.now()
        if recipe.trigger == Trigger.ITEMS:  # docs/design.md §29: a fire is a poll
            self.drafting.take(self.poll_items, recipe, fired)
            return
        self.drafting.take(self.dispatcher.fire, recipe, slots_due_by(recipe, fired))

    def poll_items(self, recipe: Recipe, fired: datetime) -> None:
        """Poll an items recipe at its latest slot by `fired` (a start polls too)."""
        slot = latest_slot_at_or_before(recipe, fired) or slot_at_instant(recipe, fired)
        (self.items or self.services.items).poll(recipe, slot)

    def _on_missed(self, event: JobExecutionEvent) -> None:
        """APScheduler found a fire past misfire_grace: Galley records it as skipped."""
        if not event.job_id.startswith(RECIPE_JOB_PREFIX):
            return
        recipe = self.services.config.recipes[event.job_id.removeprefix(RECIPE_JOB_PREFIX)]
        SCHEDULER_MISFIRES.labels(recipe.name).inc()
        if recipe.trigger == Trigger.ITEMS:
            return  # a missed poll loses nothing: the next one reads what it would have
        log.info(
            "missed fire of %s at %s (past misfire_grace): recorded as skipped",
            recipe.name,
            event.scheduled_run_time,
        )
        due = slots_due_by(recipe, event.scheduled_run_time)
        self.drafting.take(self.dispatcher.fire, recipe, due)

    # --- the scheduler's passes (registered by the bot: bot/run.py Bot.passes) ---------------

    def sweep_claims(self) -> None:
        """Return expired claims to the pool and draft those slots again (once, within
        misfire_grace): a worker that died mid-call does not lose its slot."""
        for key in self.services.sweep():
            self.drafting.take(self.dispatcher.resume, run_of_draft_key(key))

    def settle_stale_pending(self) -> None:
        """Nothing stays `pending` forever: stale ones are drafted or closed with a reason."""
        for run_id in self.dispatcher.stale_pending_runs():
            self.drafting.take(self.dispatcher.settle_pending, run_id)

    def expire(self) -> None:
        """Drafts past their review window, and slots that passed without a publication."""
        expire_overdue_drafts(self.services.store, self.services.config, self.services.clock)
        expire_missed_slots(self.services.store, self.services.config, self.services.clock)
