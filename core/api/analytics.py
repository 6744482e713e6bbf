"""The series behind the plots, counted by the database (GROUP BY, window sums), never by
Python loops over the history: a history of 100,000 runs costs one query each.

Every series is in UTC: days start at midnight UTC, weeks on Monday 00:00 UTC. Both
backends give the same rows; only the date arithmetic is spelled per dialect.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

import sqlalchemy as sa
from sqlmodel import Session, col

from core.models import AttemptRow, DraftRow, EventRow, RunRow
from core.states import (
    DRAFT_APPROVED_STATES,
    DRAFT_DECIDED_STATES,
    DraftState,
    EventSubject,
    RunState,
)
from core.telemetry.pricing import estimated_cost_usd

APPROVED, REJECTED, EXPIRED = "approved", "rejected", "expired"
OUTCOMES = (APPROVED, REJECTED, EXPIRED)

# the tokens a price reads, each summed over a group of model calls (`summed_cost`)
TOKEN_SUMS = (
    sa.func.sum(col(AttemptRow.input_tokens)),
    sa.func.sum(col(AttemptRow.output_tokens)),
    sa.func.sum(col(AttemptRow.cache_creation_tokens)),
    sa.func.sum(col(AttemptRow.cache_read_tokens)),
)


@dataclass(frozen=True)
class DepthPoint:
    recipe: str
    day: date
    depth: int  # drafts waiting for review at the end of the day


@dataclass(frozen=True)
class RatePoint:
    recipe: str
    week: date  # the Monday
    outcome: str
    drafts: int
    rate: float  # drafts / every decided draft of that recipe and week


@dataclass(frozen=True)
class DecisionTimes:
    recipe: str
    hour: int  # decided this many whole hours after the draft was ready
    drafts: int


@dataclass(frozen=True)
class CostPoint:
    recipe: str
    day: date
    input_tokens: int
    output_tokens: int
    est_cost_usd: float
    mode: str = "sync"  # a Drafting: synchronous calls, or entries of a Message Batch


@dataclass(frozen=True)
class SkipCount:
    recipe: str
    reason: str
    runs: int


def day_of(session: Session, column: Any) -> Any:
    if _dialect(session) == "postgresql":
        return sa.cast(sa.func.timezone("UTC", column), sa.Date)
    return sa.func.date(column)


def week_of(session: Session, column: Any) -> Any:
    """The Monday (UTC) of the week an instant falls in."""
    if _dialect(session) == "postgresql":
        return sa.cast(sa.func.date_trunc("week", sa.func.timezone("UTC", column)), sa.Date)
    weekday = sa.cast(sa.func.strftime("%w", column), sa.Integer)  # Sunday is 0
    days_back = sa.func.printf("-%d days", (weekday + 6) % 7)
    return sa.func.date(column, days_back)


def whole_hours_between(session: Session, start: Any, end: Any) -> Any:
    """Whole hours from `start` to `end`, counted on whole seconds (exact integers,
    so a decision made exactly N hours later falls in hour N on both backends)."""
    if _dialect(session) == "postgresql":
        return sa.func.floor(sa.func.extract("epoch", end - start) / 3600)
    seconds = sa.cast(sa.func.strftime("%s", end), sa.Integer) - sa.cast(
        sa.func.strftime("%s", start), sa.Integer
    )
    return seconds // 3600


def queue_depth(session: Session) -> list[DepthPoint]:
    """Each day's closing review-queue depth per recipe: a running sum of entries into
    `ready` (+1) and exits from it (-1), from the event rows."""
    entered = (col(EventRow.to_state) == DraftState.READY) & (
        col(EventRow.from_state) != DraftState.READY
    )
    left = (col(EventRow.from_state) == DraftState.READY) & (
        col(EventRow.to_state) != DraftState.READY
    )
    change = sa.case((entered, 1), (left, -1), else_=0)
    day = day_of(session, col(EventRow.at)).label("day")
    daily = (
        sa.select(col(DraftRow.recipe).label("recipe"), day, sa.func.sum(change).label("delta"))
        .select_from(EventRow)
        .join(DraftRow, col(DraftRow.key) == col(EventRow.subject_id))
        .where(col(EventRow.subject) == EventSubject.DRAFT, entered | left)
        .group_by(col(DraftRow.recipe), day)
        .subquery()
    )
    running = sa.func.sum(daily.c.delta).over(partition_by=daily.c.recipe, order_by=daily.c.day)
    rows = session.execute(
        sa.select(daily.c.recipe, daily.c.day, running).order_by(daily.c.recipe, daily.c.day)
    ).all()
    return [DepthPoint(r[0], _date(r[1]), int(r[2])) for r in rows]


def decision_rates(session: Session) -> list[RatePoint]:
    """Per recipe and week the draft became ready: the share approved (published
    counts as approved), rejected and expired, of the drafts decided either way."""
    outcome = sa.case(
        (col(DraftRow.state).in_(DRAFT_APPROVED_STATES), APPROVED),
        else_=col(DraftRow.state),
    ).label("outcome")
    week = week_of(session, col(DraftRow.ready_at)).label("week")
    count = sa.func.count()
    share = sa.cast(count, sa.Float) / sa.func.sum(count).over(
        partition_by=(col(DraftRow.recipe), week)
    )
    rows = session.execute(
        sa.select(col(DraftRow.recipe), week, outcome, count, share)
        .where(
            col(DraftRow.ready_at).is_not(None),
            col(DraftRow.state).in_(DRAFT_DECIDED_STATES),
        )
        .group_by(col(DraftRow.recipe), week, outcome)
        .order_by(col(DraftRow.recipe), week, outcome)
    ).all()
    return [RatePoint(r[0], _date(r[1]), str(r[2]), int(r[3]), float(r[4])) for r in rows]


def decision_times(session: Session) -> list[DecisionTimes]:
    """How many drafts were decided 0, 1, 2… whole hours after they were ready."""
    hour = whole_hours_between(session, col(DraftRow.ready_at), col(DraftRow.decided_at)).label(
        "hour"
    )
    rows = session.execute(
        sa.select(col(DraftRow.recipe), hour, sa.func.count())
        .where(col(DraftRow.ready_at).is_not(None), col(DraftRow.decided_at).is_not(None))
        .group_by(col(DraftRow.recipe), hour)
        .order_by(col(DraftRow.recipe), hour)
    ).all()
    return [DecisionTimes(r[0], int(r[1]), int(r[2])) for r in rows]


def daily_cost(session: Session) -> list[CostPoint]:
    """Tokens of every model call (failed ones are paid too) and their estimated cost,
    per recipe, day and way of calling (sync or batch, at the batch and cache prices).
    Summed per model by the database; priced here (a few rows)."""
    day = day_of(session, col(AttemptRow.started_at)).label("day")
    rows = session.execute(
        sa.select(
            col(AttemptRow.recipe),
            day,
            col(AttemptRow.mode),
            col(AttemptRow.model),
            *TOKEN_SUMS,
        )
        .group_by(col(AttemptRow.recipe), day, col(AttemptRow.mode), col(AttemptRow.model))
        .order_by(col(AttemptRow.recipe), day)
    ).all()
    totals: dict[tuple[str, date, str], list[float]] = {}
    for recipe, at, mode, model, tokens_in, tokens_out, created, read in rows:
        total = totals.setdefault((recipe, _date(at), mode), [0, 0, 0.0])
        total[0] += int(tokens_in)
        total[1] += int(tokens_out)
        total[2] += summed_cost(model, mode, tokens_in, tokens_out, created, read)
    return [
        CostPoint(recipe, day, int(t[0]), int(t[1]), t[2], mode)
        for (recipe, day, mode), t in totals.items()
    ]


def summed_cost(model: str | None, mode: str, *sums: Any) -> float:
    """What a group of calls to `model`, made one way (`mode`), cost: `sums` are its
    TOKEN_SUMS as the database returned them."""
    tokens_in, tokens_out, created, read = (int(s) for s in sums)
    return estimated_cost_usd(model, tokens_in, tokens_out, created, read, drafting=mode)


def skipped_slots(session: Session) -> list[SkipCount]:
    """Runs that ended `skipped`, per recipe and reason."""
    reason = sa.func.coalesce(col(RunRow.reason), "unknown")
    rows = session.execute(
        sa.select(col(RunRow.recipe), reason, sa.func.count())
        .where(col(RunRow.state) == RunState.SKIPPED)
        .group_by(col(RunRow.recipe), reason)
        .order_by(col(RunRow.recipe), reason)
    ).all()
    return [SkipCount(r[0], str(r[1]), int(r[2])) for r in rows]


def _dialect(session: Session) -> str:
    return session.get_bind().dialect.name


def _date(value: Any) -> date:
    if isinstance(value, datetime):
        return value.date()
    if isinstance(value, date):
        return value
    return date.fromisoformat(str(value))
