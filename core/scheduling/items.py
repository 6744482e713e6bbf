"""An items recipe's poll (docs/design.md §29): its one source read at each slot, each new
item recorded as its own run in one transaction, then the waiting item runs drafted oldest
first through the same claim as a slot's run.

The poll's transaction holds the recipe row's lock, so two replicas polling at once record
each item once; what an item becomes (a run waiting, a `backfill` skip, a re-issue of a
known item) is decided there. Nothing here calls the model but through the drafting service.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

import sqlalchemy as sa
from sqlmodel import Session, col

from core.drafting.basis import Refused, SourceAccess, read_sources
from core.drafting.claims import DraftResult, lock_recipe_row, open_run, skip_if_pending
from core.drafting.service import DraftingService
from core.drafting_policies import DraftOutcome
from core.failpoints import Failpoint, failpoint
from core.identity import item_run_range
from core.models import PolledItemRow, RunRow
from core.policies import ItemFate, PendingReason, SkipReason
from core.ports import Clock
from core.setup.config import Recipe
from core.slots.schedule import Slot, slot_of_run
from core.sources.items import SourceItem, Window
from core.sources.poll_health import PollFailure, note_poll, note_reissue
from core.sources.polled import first_poll_of, plan_poll, record_item
from core.sources.reading import read_source
from core.sources.snapshot import Snapshot
from core.states import RunState
from core.store.engine import Store
from core.store.leases import SCHEDULER
from core.store.rows import lock_run
from core.store.transitions import guarded_update

log = logging.getLogger("galley.items")


@dataclass(frozen=True)
class Recorded:
    """What one poll's transaction made of the items it read."""

    waiting: tuple[str, ...] = ()  # new item runs, pending, oldest first
    backfilled: int = 0  # items already there at the source's first poll: skipped
    reissued: int = 0  # known items under a new id (same link and title): no run
    known: int = 0  # items an earlier poll recorded


@dataclass(frozen=True)
class PollResult:
    """What one poll came to (`/galley run` and `galley draft` on an items recipe say it)."""

    recipe: str
    recorded: Recorded = field(default_factory=Recorded)
    drafted: tuple[DraftResult, ...] = ()
    failed: str | None = None  # the source could not be read: nothing recorded

    def to_json(self) -> dict[str, Any]:
        """The `galley poll --json` shape."""
        return {
            "recipe": self.recipe,
            "new": list(self.recorded.waiting),
            "backfilled": self.recorded.backfilled,
            "reissued": self.recorded.reissued,
            "known": self.recorded.known,
            "drafted": [result.to_json() for result in self.drafted],
            "failed": self.failed,
        }

    def describe(self) -> str:
        if self.failed is not None:
            return f"`{self.recipe}`: poll failed ({self.failed})"
        seen = self.recorded
        said = f"`{self.recipe}`: {len(seen.waiting)} new item(s), {seen.known} known"
        if seen.backfilled:
            said += f", {seen.backfilled} already there (backfill)"
        if seen.reissued:
            said += f", {seen.reissued} not drafted as re-issues (a known link and title, new id)"
        drafted = sum(1 for result in self.drafted if result.outcome == DraftOutcome.DRAFTED)
        return said + f"; {drafted} drafted"


class ItemPoller:
    """Polls items recipes and drafts their waiting items, oldest first."""

    def __init__(
        self,
        store: Store,
        drafting: DraftingService,
        clock: Clock,
        *,
        access: SourceAccess | None = None,
        stopping: threading.Event | None = None,
        told: Callable[[str], None] | None = None,
    ) -> None:
        """`told(recipe)` right after each poll is recorded, read or failed: the bot's
        poll alerts (`PollAlerts.tell`), so a failure reaches people as it happens."""
        self.store, self.drafting, self.clock = store, drafting, clock
        self.access = access or drafting.basis.access
        self.reader = read_source
        self.stopping = stopping or threading.Event()
        self.told = told or _nobody

    def poll(self, recipe: Recipe, slot: Slot) -> PollResult:
        """Read the source once (outside any transaction), record what is new, draft."""
        read = read_sources(
            recipe,
            Window(start=None, end=self.clock.now()),  # every item the source serves now
            self.access.context(recipe),
            reader=self.reader,
            backoff=self.drafting.backoff,
        )
        if isinstance(read, Refused) or read.left_out:  # an optional source's too
            failure = _failure_of(read)
            log.warning("poll of %s: source not read: %s", recipe.name, failure.detail)
            with self.store.transaction() as session:  # only that it failed: no items
                lock_recipe_row(session, recipe.name, self.clock.now())
                note_poll(session, recipe.name, self.clock.now(), failure)
            self.told(recipe.name)
            drafted = self.draft_waiting(recipe)
            return PollResult(recipe.name, failed=failure.detail, drafted=drafted)
        with self.store.transaction() as session:
            recorded = record_poll(session, recipe, slot, list(read.items), self.clock.now())
        failpoint(Failpoint.AFTER_POLL_COMMIT)
        self.told(recipe.name)
        return PollResult(recipe.name, recorded, drafted=self.draft_waiting(recipe))

    def draft_waiting(self, recipe: Recipe) -> tuple[DraftResult, ...]:
        """Draft the recipe's waiting item runs, oldest first, until the gate says wait;
        a run that waited past `item_ttl` is skipped (`stale_item`) instead."""
        results: list[DraftResult] = []
        gate_open = True
        for waiting in self._waiting(recipe):
            if self.stopping.is_set():
                break
            if went_stale(waiting, recipe, self.clock.now()):
                results.append(self._skip_stale(recipe, waiting.id))
                continue
            slot = slot_of_run(recipe, waiting.id, waiting.slot_at)
            if not gate_open or slot is None:
                continue  # still waiting: only item_ttl can end it before the gate opens
            result = self.drafting.draft_slot(recipe, slot, actor=SCHEDULER)
            results.append(result)
            gate_open = result.outcome != DraftOutcome.QUEUED
        return tuple(results)

    def _waiting(self, recipe: Recipe) -> list[WaitingRun]:
        """Pending item runs of the recipe, oldest item first (ix_runs_recipe_state), and
        running ones: a claim whose holder died is taken over by the next request for its
        run (docs/design.md §4), a live one answers `in_progress` and is left alone."""
        after, before = item_run_range(recipe.name)
        with self.store.read() as session:
            turns = (RunRow.id, RunRow.state, RunRow.created_at, RunRow.slot_at, RunRow.draft_key)
            rows = session.execute(
                sa.select(*(col(column) for column in turns))
                .join(PolledItemRow, col(PolledItemRow.run_id) == col(RunRow.id))
                .where(
                    col(RunRow.recipe) == recipe.name,
                    col(RunRow.state).in_([RunState.PENDING, RunState.RUNNING]),
                    col(RunRow.id) > after,
                    col(RunRow.id) < before,
                    col(PolledItemRow.same_as).is_(None),
                )
                .order_by(
                    col(RunRow.created_at),
                    sa.nulls_first(col(PolledItemRow.published_at)),
                    col(RunRow.id),
                )
            ).all()
        return [WaitingRun(run_id, RunState(state), *rest) for run_id, state, *rest in rows]

    def _skip_stale(self, recipe: Recipe, run_id: str) -> DraftResult:
        detail = f"waited longer than item_ttl ({recipe.item_ttl}) for room in the review queue"
        with self.store.transaction() as session:
            run = lock_run(session, run_id)
            now = self.clock.now()
            if run is None or not went_stale(run, recipe, now):  # claimed since the read
                return DraftResult(DraftOutcome.QUEUED, run_id, None, PendingReason.ITEM_WAITS)
            skip_if_pending(session, run, SkipReason.STALE_ITEM, detail, actor=SCHEDULER, now=now)
        return DraftResult(DraftOutcome.SKIPPED, run_id, None, SkipReason.STALE_ITEM, detail)


class _RunTurn(Protocol):
    @property
    def state(self) -> str: ...
    @property
    def created_at(self) -> datetime: ...
    @property
    def draft_key(self) -> str | None: ...


@dataclass(frozen=True)
class WaitingRun:
    """An item run a poll drafts in its turn, as `_waiting` reads it."""

    id: str
    state: RunState
    created_at: datetime
    slot_at: datetime
    draft_key: str | None  # set once the run was claimed: it had its turn


def went_stale(run: _RunTurn, recipe: Recipe, now: datetime) -> bool:
    """The one `stale_item` rule (docs/design.md §29): an item run still pending `item_ttl`
    after it was opened, that never had its turn. A run once claimed (its claim given back
    by the sweeper, a closed gate met at `resume`, a person's retry) is drafted whatever
    its age: its model call may have been paid for, and it already had its turn."""
    pending = run.state == RunState.PENDING
    return pending and run.draft_key is None and now - run.created_at > recipe.item_ttl


def _failure_of(read: Refused | Snapshot) -> PollFailure:
    """A poll's read that failed, as its alert needs it: the answer, and whether waiting
    may fix it."""
    if isinstance(read, Refused):
        return PollFailure(read.detail, read.retryable)
    left_out = read.left_out[0]
    return PollFailure(left_out.line(), left_out.retryable)


def _nobody(recipe: str) -> None:
    """No alerts to tell (the command line's poller, a test's): the bot's next alerts
    pass tells people."""


def record_poll(
    session: Session, recipe: Recipe, slot: Slot, items: list[SourceItem], now: datetime
) -> Recorded:
    """One poll's items recorded, with the recipe row locked: each new item a run
    (pending; `backfill` skipped at the source's first poll, but the newest `backfill`);
    a known id nothing; a new id with a known link and title a re-issue, logged."""
    lock_recipe_row(session, recipe.name, now)  # polls of one recipe, one at a time
    health = note_poll(session, recipe.name, now)  # read: a failing episode ends here
    source = recipe.sources[0].label  # every item it reads is labelled so
    first_poll = first_poll_of(session, recipe.name, source, now)
    plan = plan_poll(
        session, recipe.name, source, items, first_poll=first_poll, backfill=recipe.backfill
    )
    waiting: list[str] = []
    backfilled = reissued = 0
    for planned in plan.unseen:
        item = planned.item
        if planned.fate == ItemFate.REISSUE:
            same_as = planned.same_as
            record_item(session, recipe.name, item, run_id=planned.run_id, now=now, same_as=same_as)
            log.info(
                "item %r of %s re-issued as %r (same link and title): no second run",
                same_as,
                recipe.name,
                item.item_id,
            )
            note_reissue(health, item.title, item.link, now)
            reissued += 1
            continue
        if not record_item(session, recipe.name, item, run_id=planned.run_id, now=now):
            continue
        item_slot = Slot(wall=slot.wall, fire_at=slot.fire_at, item=planned.token)
        run, opened = open_run(session, recipe, item_slot, manual=False, actor=SCHEDULER, now=now)
        if not opened:  # its run is an item's recorded before (same id): never backfill's
            continue
        if planned.fate == ItemFate.BACKFILL:
            detail = f"already there at the first poll of {source} (backfill = {recipe.backfill})"
            skip_if_pending(session, run, SkipReason.BACKFILL, detail, actor=SCHEDULER, now=now)
            backfilled += 1
        elif run.state == RunState.PENDING:
            run.reason = PendingReason.ITEM_WAITS
            guarded_update(session, run, state=RunState.PENDING)
            waiting.append(run.id)
    return Recorded(tuple(waiting), backfilled, reissued, known=plan.known)
