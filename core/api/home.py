"""The App Home read model: what one look at Galley's Home tab shows, read in one short
transaction. It knows nothing of Slack and decides nothing; the Slack side renders it.

Every query is bounded by the work to show (ready drafts, one latest run per recipe,
runs needing a person), never by the history: a million old runs cost nothing here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlmodel import Session, col, select

from core.api.calendar import CalendarEntry, read_calendar
from core.api.queries import read_status
from core.api.report import ReportRow, read_report
from core.api.services import Services
from core.api.views import RecipeStatus
from core.api.week import Week, read_week
from core.identity import review_effect_key, run_id_range
from core.models import DraftRow, EffectRow, RunRow
from core.operations.stuck import is_stuck
from core.policies import Trigger
from core.ports import PublishedLink
from core.publishing.engagement import PostStats, read_stats
from core.publishing.targets import published_links
from core.setup.config import Config
from core.sources.polled import ItemLabel, labels_of_runs
from core.states import RUN_WATCHED_STATES, DraftState, EffectState, RunState
from core.store.history_pages import ready_counts

WEEK_DAYS = 7  # the best post, and posts gone, of the last week (docs/design.md §28)
WAITING_LIMIT = 60  # more than a Home tab can show; the rest is counted, not listed
COMING_UP_DAYS = 7  # "Coming up": the calendar's next week (docs/design.md §23)
COMING_UP_LIMIT = 10


@dataclass(frozen=True)
class WaitingDraft:
    key: str
    run_id: str
    recipe: str
    revision: int
    ready_at: datetime | None
    review_channel: str | None  # where its review message is, once posted
    review_ts: str | None


@dataclass(frozen=True)
class RecipeLine:
    status: RecipeStatus
    last_run: str | None  # the latest run's id, state and reason: its last outcome
    last_state: str | None
    last_reason: str | None
    last_published: tuple[PublishedLink, ...] = ()  # where the latest run's draft went out
    last_item: ItemLabel | None = None  # an item run's item (docs/design.md §29)


@dataclass(frozen=True)
class RunNeedingPerson:
    id: str
    recipe: str
    state: str
    reason: str | None
    since: datetime
    stuck: bool  # running or publishing far past its deadline (core/operations/stuck.py)


@dataclass(frozen=True)
class HomeModel:
    waiting: list[WaitingDraft]  # oldest first
    waiting_total: int
    recipes: list[RecipeLine]
    needing_person: list[RunNeedingPerson]  # uncertain and stuck runs
    coming_up: list[CalendarEntry] = field(default_factory=list)  # next slots, per target
    best_post: PostStats | None = (
        None  # docs/design.md §28: the best-scored post published this week
    )
    gone: list[PostStats] = field(
        default_factory=list
    )  # docs/design.md §28: published this week, then gone
    week: Week | None = None  # docs/design.md §36: the week at a glance
    # docs/design.md §38: each recipe's report of the last 7 days, summed up in a line
    report: list[ReportRow] = field(default_factory=list)


def read_home(services: Services) -> HomeModel:
    """Everything the Home tab shows, for every viewer; who sees what is the renderer's."""
    config, now = services.config, services.clock.now()
    names = list(config.recipes)
    with services.store.transaction() as session:
        status = {r.name: r for r in read_status(session, config, now).recipes}
        shown = session.exec(
            select(DraftRow)
            .where(col(DraftRow.recipe).in_(names), col(DraftRow.state) == DraftState.READY)
            .order_by(col(DraftRow.ready_at))
            .limit(WAITING_LIMIT)
        ).all()
        total = sum(ready_counts(session, names).values())
        refs = _review_refs(session, [d.key for d in shown])
        waiting = [
            WaitingDraft(
                d.key, d.run_id, d.recipe, d.revision, d.ready_at, *refs.get(d.key, (None, None))
            )
            for d in shown
        ]
        recipes = [
            _recipe_line(session, status[n], config.recipes[n].trigger == Trigger.ITEMS)
            for n in names
        ]
        needing = _runs_needing_person(session, config, now)
        calendar = read_calendar(session, config, now, COMING_UP_DAYS)
        stats = read_stats(session, now, WEEK_DAYS)
        week = read_week(session, config, now)
        report = list(read_report(session, names, now, timedelta(days=WEEK_DAYS)))
    coming_up = [entry for entry in calendar if entry.slot_at >= now][:COMING_UP_LIMIT]
    gone = [post for post in stats if post.gone is not None]
    return HomeModel(waiting, total, recipes, needing, coming_up, stats.best(), gone, week, report)


def _review_refs(session: Session, keys: list[str]) -> dict[str, tuple[str, str]]:
    """draft key -> (channel, ts) of its posted review message."""
    receipts = session.exec(
        select(EffectRow).where(
            col(EffectRow.key).in_([review_effect_key(k) for k in keys]),
            col(EffectRow.state) == EffectState.SUCCEEDED,
        )
    ).all()
    refs = {}
    for receipt in receipts:
        if receipt.result:
            where = json.loads(receipt.result)
            refs[receipt.draft_key] = (str(where["channel"]), str(where["ts"]))
    return refs


def _recipe_line(session: Session, status: RecipeStatus, items: bool) -> RecipeLine:
    # The primary key's order is the slots' order, so the latest run is one index probe
    # however long the history. An item run's id says no time: an items recipe's latest
    # run is its latest poll's (ix_runs_recipe_slot), newest item first.
    after, before = run_id_range(status.name)
    query = select(RunRow).where(col(RunRow.id) > after, col(RunRow.id) < before)
    if items:
        query = query.where(col(RunRow.recipe) == status.name).order_by(
            col(RunRow.slot_at).desc(), col(RunRow.created_at).desc()
        )
    else:
        query = query.order_by(col(RunRow.id).desc())
    latest = session.exec(query.limit(1)).one_or_none()
    if latest is None:
        return RecipeLine(status, None, None, None)
    links = published_links(session, [latest.draft_key] if latest.draft_key else [])
    published = tuple(links.get(latest.draft_key or "", ()))
    item = labels_of_runs(session, [latest.id]).get(latest.id) if items else None
    return RecipeLine(status, latest.id, str(latest.state), latest.reason, published, item)


def _runs_needing_person(session: Session, config: Config, now: datetime) -> list[RunNeedingPerson]:
    rows = session.exec(
        select(RunRow)
        .where(col(RunRow.state).in_(RUN_WATCHED_STATES))
        .order_by(col(RunRow.updated_at))
    ).all()
    found = []
    for run in rows:
        stuck = is_stuck(run, config, now)
        if run.state == RunState.UNCERTAIN or stuck:
            found.append(
                RunNeedingPerson(
                    run.id, run.recipe, str(run.state), run.reason, run.updated_at, stuck
                )
            )
    return found
