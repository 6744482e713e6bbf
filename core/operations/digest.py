"""The daily operations digest for the alert channel: what is stuck, failing, skipped
or about to expire, and how often people approve, as facts (bot/digest_text.py renders
them). Read-only over the store; posted once per day across replicas (one receipt per
day).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import sqlalchemy as sa
from sqlmodel import Session, col, select

from core.identity import digest_key
from core.models import DraftRow, EventRow, RunRow
from core.operations.alert_posts import post_once_in
from core.operations.stuck import is_stuck
from core.policies import EffectStep, FailReason, SkipReason
from core.ports import MessageRef
from core.publishing.engagement import PostStats, read_stats
from core.publishing.known_expiry import expiry_warnings, version_warnings
from core.review.feedback import RecipeFeedback, feedback_by_recipe, month_start
from core.review.window import review_closes_at
from core.setup.config import Config
from core.states import (
    DRAFT_APPROVED_STATES,
    DRAFT_DECIDED_STATES,
    RUN_WATCHED_STATES,
    DraftState,
    RunState,
)
from core.store.effects import EffectLedger
from core.store.engine import Store

DAY = timedelta(days=1)
EXPIRY_WARNING = timedelta(hours=12)
APPROVAL_WINDOW = timedelta(days=30)
WEEK_DAYS = 7  # the best post of the week: published in the last 7 days (docs/design.md §28)
REPEATED_FAILURES = 2


def post_digest(
    store: Store,
    config: Config,
    ledger: EffectLedger,
    now: datetime,
    post: Callable[[Digest], MessageRef],
) -> bool:
    """Today's digest, once per day in the digest's zone across replicas; True if posted."""
    day = now.astimezone(ZoneInfo(config.slack.digest_timezone)).date().isoformat()
    return post_once_in(
        ledger,
        digest_key(day),
        EffectStep.DIGEST,
        {"day": day},
        lambda: post(build_digest(store, config, now)),
    )


@dataclass(frozen=True)
class StuckRun:
    run_id: str
    state: str
    since: datetime


@dataclass(frozen=True)
class ExpiringDraft:
    run_id: str
    expires: datetime


@dataclass(frozen=True)
class Digest:
    """What the daily digest tells, as facts (the bot renders them for Slack)."""

    at: datetime
    stuck: list[StuckRun]  # uncertain, or stuck (core/operations/stuck.py)
    failing: dict[str, int]  # recipe → failed runs in 24h, when repeated
    skipped: dict[str, int]  # skip reason → runs in 24h
    expiring: list[ExpiringDraft]  # ready drafts within EXPIRY_WARNING of their window
    approvals: dict[str, tuple[int, int]]  # recipe → (approved, decided) over 30 days
    # what reviewers said this month (docs/design.md §22)
    feedback: dict[str, RecipeFeedback] = field(default_factory=dict)
    # approved drafts that missed their time in 24h (docs/design.md §23): nothing published
    # them by slot + publish_late, or their publication failed; each waits on Retry / Cancel
    missed: list[str] = field(default_factory=list)
    # recipe → runs skipped in 24h because their sources had nothing new (docs/design.md §27)
    no_news: dict[str, int] = field(default_factory=dict)
    # recipe → items skipped in 24h after waiting past item_ttl (docs/design.md §29)
    stale_items: dict[str, int] = field(default_factory=dict)
    expired_unread: dict[str, int] = field(default_factory=dict)  # recipe → nobody clicked, 24h
    best_post: PostStats | None = (
        None  # docs/design.md §28: the best-scored post published this week
    )
    # docs/design.md §36: a LinkedIn-Version near its retirement, a token near its expiry
    warnings: list[str] = field(default_factory=list)


def build_digest(store: Store, config: Config, now: datetime) -> Digest:
    """The digest's facts (recipe names and run ids only, never a draft's text).

    Counts are made by the database over indexed windows (the last day of runs, the
    last 30 days of decisions), so the history before them is never read.
    """
    with store.read() as session:
        watched = select(RunRow).where(col(RunRow.state).in_(RUN_WATCHED_STATES))
        open_runs = session.exec(watched).all()
        recent = _counts(
            session,
            RunRow,
            [RunRow.recipe, RunRow.state, RunRow.reason],
            col(RunRow.updated_at) >= now - DAY,
            col(RunRow.state).in_([RunState.FAILED, RunState.SKIPPED]),
        )
        ready = (
            session.connection()
            .execute(  # three columns, not whole drafts with text
                sa.select(col(DraftRow.run_id), col(DraftRow.recipe), col(DraftRow.ready_at)).where(
                    col(DraftRow.state) == DraftState.READY
                )
            )
            .all()
        )
        missed = session.exec(  # ix_runs_state_updated: the last day's failures
            select(RunRow.id)
            .where(
                col(RunRow.state) == RunState.FAILED,
                col(RunRow.updated_at) >= now - DAY,
                col(RunRow.reason) == FailReason.MISSED_SLOT,
            )
            .order_by(col(RunRow.id))
        ).all()
        decided = _counts(
            session,
            DraftRow,
            [DraftRow.recipe, DraftRow.state],
            col(DraftRow.updated_at) >= now - APPROVAL_WINDOW,
            col(DraftRow.state).in_(DRAFT_DECIDED_STATES),
            indexed=True,  # ix_drafts_recipe_state_updated: a skip-scan, in group order
        )
        unread = _expired_unread(session, now)
        since = month_start(now, config.slack.digest_timezone)
        said = feedback_by_recipe(session, config.recipes, since, "this month").values()
        best = read_stats(session, now, WEEK_DAYS).best()
    return Digest(
        at=now,
        stuck=_stuck(open_runs, config, now),
        failing=_failing(recent),
        skipped=_skipped(recent),
        expiring=_expiring(ready, config, now),
        approvals=_approvals(decided),
        feedback={f.recipe: f for f in said if f.redrafts or f.rejections},
        missed=list(missed),
        no_news=_skips_of_recipes(recent, SkipReason.NO_NEWS),
        stale_items=_skips_of_recipes(recent, SkipReason.STALE_ITEM),
        expired_unread=unread,
        best_post=best,
        warnings=known_warnings(config, now),
    )


def known_warnings(config: Config, now: datetime) -> list[str]:
    """Dates known ahead that will fail a publication (docs/design.md §36: retire, expiry)."""
    today = now.astimezone(ZoneInfo(config.slack.digest_timezone)).date()
    return version_warnings(config, today) + expiry_warnings(config, today)


def _counts(
    session: Session, table: type[Any], columns: list[Any], *where: Any, indexed: bool = False
) -> list[tuple[Any, ...]]:
    """(column values..., count) per group, counted by the database over the window.

    Grouped as `column || ''` unless `indexed`: on the plain columns SQLite would rather
    walk a whole (recipe, state) index in its order, to skip a sort, than read just the
    window from the (state, updated_at, ...) index. `indexed` is for an index that leads
    with the grouped columns and ends with the window's column: SQLite then skip-scans
    it in group order, no sort (the decided drafts: 5 ms, against 29 ms sorting 30,000
    rows of a 30-day window, at 200,000 runs; bench/history_scale.py).
    """
    grouped = [col(c) if indexed else col(c) + "" for c in columns]
    query = sa.select(*grouped, sa.func.count()).select_from(table).where(*where)
    return [tuple(row) for row in session.connection().execute(query.group_by(*grouped))]


def _expired_unread(session: Session, now: datetime) -> dict[str, int]:
    """Drafts that expired in the last day with no decision of anyone's on record (no
    approval, rejection, edit or redraft: `events.decision`), per recipe. The last day's
    expiries by ix_drafts_state_updated; each one's events by its run id."""
    clicked = sa.exists().where(
        col(EventRow.run_id) == col(DraftRow.run_id),
        col(EventRow.subject_id) == col(DraftRow.key),
        col(EventRow.decision).is_not(None),
    )
    rows = session.exec(
        select(DraftRow.recipe, sa.func.count())
        .where(
            col(DraftRow.state) == DraftState.EXPIRED,
            col(DraftRow.updated_at) >= now - DAY,
            ~clicked,
        )
        .group_by(col(DraftRow.recipe))
    ).all()
    return {recipe: int(count) for recipe, count in sorted(rows)}


def _stuck(runs: Sequence[RunRow], config: Config, now: datetime) -> list[StuckRun]:
    return [
        StuckRun(run.id, run.state, run.updated_at)
        for run in runs
        if run.state == RunState.UNCERTAIN or is_stuck(run, config, now)
    ]


def _failing(recent: list[tuple[Any, ...]]) -> dict[str, int]:
    failures: Counter[str] = Counter()
    for recipe, state, _reason, count in recent:
        if state == RunState.FAILED:
            failures[recipe] += count
    return {name: n for name, n in sorted(failures.items()) if n >= REPEATED_FAILURES}


def _skipped(recent: list[tuple[Any, ...]]) -> dict[str, int]:
    reasons: Counter[str] = Counter()
    for _recipe, state, reason, count in recent:
        if state == RunState.SKIPPED:
            reasons[reason or "unknown"] += count
    return dict(sorted(reasons.items()))


def _skips_of_recipes(recent: list[tuple[Any, ...]], why: SkipReason) -> dict[str, int]:
    """Per recipe: skips for one reason, counted apart from the others (the quiet periods,
    `no_news`; items that waited too long, `stale_item`)."""
    counted: Counter[str] = Counter()
    for recipe, state, reason, count in recent:
        if state == RunState.SKIPPED and reason == why:
            counted[recipe] += count
    return dict(sorted(counted.items()))


def _expiring(
    ready: Iterable[tuple[str, str, datetime | None]], config: Config, now: datetime
) -> list[ExpiringDraft]:
    """(run id, recipe, ready at) of each waiting draft: those whose review window ends
    within EXPIRY_WARNING."""
    soon = []
    for run_id, recipe_name, ready_at in ready:
        recipe = config.recipes.get(recipe_name)
        if recipe is None or ready_at is None:
            continue
        expires = review_closes_at(recipe, ready_at)
        if expires - now <= EXPIRY_WARNING:
            soon.append(ExpiringDraft(run_id, expires))
    return soon


def _approvals(decided: list[tuple[Any, ...]]) -> dict[str, tuple[int, int]]:
    totals: Counter[str] = Counter()
    approved: Counter[str] = Counter()
    for recipe, state, count in decided:
        totals[recipe] += count
        if state in DRAFT_APPROVED_STATES:
            approved[recipe] += count
    return {name: (approved[name], total) for name, total in sorted(totals.items())}
