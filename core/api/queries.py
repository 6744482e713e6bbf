"""Reads for the operator API: fill the read models of `core/api/views.py` from the store.

Read-only, one short transaction each, no Slack and no running bot needed. Queries
select columns, not ORM objects, so a history of 100,000 runs reads in well under a
second; counts are done by the database.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime
from itertools import starmap
from typing import Any

import sqlalchemy as sa
from sqlmodel import Session, col, select

from core.api import status_read
from core.api.views import (
    AttemptList,
    AttemptView,
    DraftDetail,
    DraftInfo,
    DraftList,
    DraftSummary,
    EffectList,
    EffectView,
    EventList,
    EventView,
    Revision,
    RevisionList,
    RunList,
    RunSummary,
    SnapshotList,
    SourceItemView,
    Status,
    printed_text,
)
from core.drafting.attempts import model_calls_of_run
from core.drafting.revisions import model_author
from core.errors import UnknownRun
from core.identity import item_token_of_run
from core.models import (
    AttemptRow,
    BatchRow,
    DraftRevisionRow,
    DraftRow,
    EffectRow,
    EventRow,
    RunRow,
)
from core.publishing.post_checks import read_back_of
from core.publishing.targets import public_url
from core.setup.config import Config
from core.sources.polled import labels_of_runs
from core.sources.snapshot import stored_snapshot
from core.states import DRAFT_PAST_REVIEW_STATES, DraftState, EffectState, RunState
from core.store.history_pages import after_run
from core.store.rows import draft_row
from core.telemetry.pricing import estimated_cost_usd

PREVIEW = 120  # characters of a draft shown in a list


def list_runs(
    session: Session, state: RunState | None, limit: int | None, before: str | None = None
) -> RunList:
    """Newest slot first, with each run's model calls (`model_calls_of_run`: the
    whole history's GROUP BY counts the same rows). A page of runs counts its own
    attempts (a correlated count on the indexed run id: cost follows the rows returned);
    the whole history joins one GROUP BY over the attempts instead of 100,000 lookups."""
    attempts: Any
    if limit is None:
        counted = (
            sa.select(col(AttemptRow.run_id).label("run_id"), sa.func.count().label("n"))
            .group_by(col(AttemptRow.run_id))
            .subquery()
        )
        attempts = sa.func.coalesce(counted.c.n, 0)
    else:
        attempts = model_calls_of_run(col(RunRow.id)).correlate(RunRow)
    query = sa.select(
        col(RunRow.id),
        col(RunRow.recipe),
        col(RunRow.slot_wall),
        sa.type_coerce(col(RunRow.state), sa.String),  # the stored value, no enum round trip
        col(RunRow.reason),
        col(RunRow.draft_key),
        attempts,
    ).order_by(col(RunRow.slot_at).desc(), col(RunRow.id).desc())  # keyset: ix_runs_slot
    if limit is None:
        query = query.outerjoin(counted, counted.c.run_id == col(RunRow.id))
    else:
        query = query.limit(limit)
    if state is not None:
        query = query.where(col(RunRow.state) == state)
    if before is not None:
        query = query.where(after_run(session, before))
    rows = session.connection().execute(query).all()  # plain rows: no ORM loading cost
    return with_items(session, RunList(starmap(RunSummary, rows)))


def with_items(session: Session, runs: RunList) -> RunList:
    """Item runs labelled by their item's title and link (docs/design.md §29): one indexed
    read for the page's item runs, none when it has none."""
    items = [run.id for run in runs if item_token_of_run(run.id) is not None]
    if not items:
        return runs
    labels = labels_of_runs(session, items)
    return RunList(
        dataclasses.replace(run, item_title=label.title, item_link=label.link)
        if (label := labels.get(run.id)) is not None
        else run
        for run in runs
    )


def run_summary(session: Session, run_id: str) -> RunSummary | None:
    found = list_runs_by_id(session, [run_id])
    return found[0] if found else None


def list_runs_by_id(session: Session, run_ids: list[str]) -> RunList:
    attempts = model_calls_of_run(col(RunRow.id)).correlate(RunRow)
    rows = session.execute(sa.select(RunRow, attempts).where(col(RunRow.id).in_(run_ids))).all()
    return with_items(
        session,
        RunList(
            RunSummary(r.id, r.recipe, r.slot_wall, str(r.state), r.reason, r.draft_key, n)
            for r, n in rows
        ),
    )


def list_drafts(
    session: Session,
    *,
    state: DraftState | None,
    recipe: str | None,
    limit: int | None,
    now: datetime,
) -> DraftList:
    """Oldest-ready first: the order people should review them in."""
    query = (
        select(DraftRow, RunRow.slot_wall)
        .join(RunRow, col(RunRow.id) == col(DraftRow.run_id))
        .order_by(col(DraftRow.ready_at), col(DraftRow.key))
    )
    if state is not None:
        query = query.where(col(DraftRow.state) == state)
    if recipe is not None:
        query = query.where(col(DraftRow.recipe) == recipe)
    if limit is not None:
        query = query.limit(limit)
    return DraftList(
        DraftSummary(
            key=d.key,
            run=d.run_id,
            recipe=d.recipe,
            platform=d.platform,
            slot=slot,
            version=d.version,
            state=str(d.state),
            revision=d.revision,
            ready_at=d.ready_at,
            waiting_hours=_hours(now - d.ready_at) if d.ready_at and d.state == "ready" else None,
            preview=_preview(d.text or ""),
        )
        for d, slot in session.exec(query).all()
    )


def list_events(
    session: Session, *, run_id: str | None, subject_id: str | None, limit: int | None
) -> EventList:
    """A run's or a draft's history in order; otherwise the newest events first."""
    query = select(EventRow)
    if run_id is not None:
        query = query.where(col(EventRow.run_id) == run_id)
    if subject_id is not None:
        query = query.where(col(EventRow.subject_id) == subject_id)
    scoped = run_id is not None or subject_id is not None
    query = query.order_by(col(EventRow.id) if scoped else col(EventRow.id).desc())
    if limit is not None:
        query = query.limit(limit)
    return EventList(_event(e) for e in session.exec(query).all())


def list_attempts(
    session: Session,
    *,
    run_id: str | None = None,
    draft_key: str | None = None,
    recipe: str | None = None,
    limit: int | None = None,
) -> AttemptList:
    query = select(AttemptRow, BatchRow.batch_id).join(
        BatchRow, col(BatchRow.id) == col(AttemptRow.batch_ref), isouter=True
    )
    if run_id is not None:
        query = query.where(col(AttemptRow.run_id) == run_id)
    if draft_key is not None:
        query = query.where(col(AttemptRow.draft_key) == draft_key)
    if recipe is not None:
        query = query.where(col(AttemptRow.recipe) == recipe)
    scoped = run_id is not None or draft_key is not None
    order = col(AttemptRow.started_at) if scoped else col(AttemptRow.started_at).desc()
    query = query.order_by(order, col(AttemptRow.id))
    if limit is not None:
        query = query.limit(limit)
    return AttemptList(_attempt(a, batch_id) for a, batch_id in session.exec(query).all())


def list_effects(
    session: Session,
    *,
    run_id: str | None = None,
    draft_key: str | None = None,
    state: str | None = None,
    limit: int | None = None,
) -> EffectList:
    query = select(EffectRow)
    if draft_key is not None:
        query = query.where(col(EffectRow.draft_key) == draft_key)
    if run_id is not None:
        drafts = select(DraftRow.key).where(col(DraftRow.run_id) == run_id)
        query = query.where(col(EffectRow.draft_key).in_(drafts.scalar_subquery()))
    if state is not None:
        query = query.where(col(EffectRow.state) == state)
    query = query.order_by(col(EffectRow.created_at), col(EffectRow.key))
    if limit is not None:
        query = query.limit(limit)
    effects = session.exec(query).all()
    read_back = read_back_of(session, effects)
    return EffectList(
        EffectView(
            e.key,
            e.draft_key,
            e.step,
            str(e.state),
            e.external_id,
            e.detail,
            e.tries,
            e.updated_at,
            public_url(e.result) if e.state == EffectState.SUCCEEDED else None,
            read_back.get(e.key),
        )
        for e in effects
    )


def draft_detail(session: Session, ref: str) -> DraftDetail:
    """`ref` is a run id (its current draft is shown) or a draft key."""
    draft = draft_row(session, ref)
    run_id = draft.run_id if draft is not None else ref
    run = run_summary(session, run_id)
    if run is None:
        raise UnknownRun(f"no run or draft {ref!r}")
    if draft is None and run.draft_key is not None:
        draft = draft_row(session, run.draft_key)
    sources, left_out = _snapshot(session, run.id)
    if draft is None:
        return DraftDetail(
            run,
            None,
            attempts=list_attempts(session, run_id=run.id),
            sources=sources,
            sources_left_out=left_out,
        )
    attempts = list_attempts(session, draft_key=draft.key)
    return DraftDetail(
        run=run,
        draft=_draft_info(draft, sum(a.est_cost_usd for a in attempts)),
        revisions=_revisions(session, draft),
        decisions=EventList(
            e
            for e in list_events(session, run_id=None, subject_id=draft.key, limit=None)
            if _is_decision(e)
        ),
        attempts=attempts,
        effects=list_effects(session, draft_key=draft.key),
        sources=sources,
        sources_left_out=left_out,
    )


def _snapshot(session: Session, run_id: str) -> tuple[SnapshotList, tuple[str, ...]]:
    """The run's stored snapshot (docs/design.md §27) as rows, and its sources left out."""
    snapshot = stored_snapshot(session, run_id)
    if snapshot is None:
        return SnapshotList(), ()
    rows = SnapshotList(SourceItemView.of(item) for item in snapshot.items)
    return rows, tuple(gone.line() for gone in snapshot.left_out)


def _is_decision(event: EventView) -> bool:
    if event.to_state in DRAFT_PAST_REVIEW_STATES:
        return True
    return event.from_state == DraftState.APPROVED and event.to_state == DraftState.READY


def _revisions(session: Session, draft: DraftRow) -> RevisionList:
    kept = session.exec(
        select(DraftRevisionRow)
        .where(col(DraftRevisionRow.draft_key) == draft.key)
        .order_by(col(DraftRevisionRow.revision))
    ).all()
    if kept:
        return RevisionList(
            Revision(r.revision, r.written_by, r.written_at, printed_text(r.text, "")) for r in kept
        )
    if draft.text is None:
        return RevisionList()
    shown = printed_text(draft.text, "")
    return RevisionList(
        [Revision(draft.revision, model_author(draft.model), draft.ready_at, shown)]
    )


def _draft_info(draft: DraftRow, cost: float) -> DraftInfo:
    return DraftInfo(
        key=draft.key,
        state=str(draft.state),
        revision=draft.revision,
        text=draft.text or "",
        platform=draft.platform,
        version=draft.version,
        model=draft.model,
        input_tokens=draft.input_tokens,
        output_tokens=draft.output_tokens,
        est_cost_usd=cost,
        ready_at=draft.ready_at,
        decided_by=draft.decided_by,
        decided_at=draft.decided_at,
        decision_reason=draft.decision_reason,
        similar_to=draft.similar_to,
        similar_score=draft.similar_score,
        similar_method=draft.similar_method,
    )


def _event(e: EventRow) -> EventView:
    return EventView(
        e.at, e.subject, e.subject_id, e.run_id, e.from_state, e.to_state, e.actor, e.reason
    )


def _attempt(a: AttemptRow, batch_id: str | None = None) -> AttemptView:
    cost = estimated_cost_usd(
        a.model,
        a.input_tokens,
        a.output_tokens,
        a.cache_creation_tokens,
        a.cache_read_tokens,
        drafting=a.mode,
    )
    return AttemptView(
        id=a.id,
        run_id=a.run_id,
        recipe=a.recipe,
        draft_key=a.draft_key,
        number=a.number,
        model=a.model,
        started_at=a.started_at,
        outcome=a.outcome,
        http_status=a.http_status,
        cause=a.error,
        latency_ms=a.latency_ms,
        input_tokens=a.input_tokens,
        output_tokens=a.output_tokens,
        est_cost_usd=cost,
        made_for=a.cause,
        mode=a.mode,
        batch_id=batch_id,
    )


def _hours(delta: Any) -> float:
    return round(float(delta.total_seconds()) / 3600, 2)


def _preview(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= PREVIEW else flat[: PREVIEW - 1] + "…"


def read_status(session: Session, config: Config, now: datetime) -> Status:
    """What `galley status` shows, in the session's transaction: core/api/status_read.py
    reads it through Core, so the CLI can without the ORM."""
    return status_read.read_status(session.connection(), config, now)
