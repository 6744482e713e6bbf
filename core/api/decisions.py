"""The decision log (docs/design.md §35): every approval, rejection, edit, redraft,
unapprove and resolution, with who, when, which revision and its text hash, the stage,
the outcome and the reason (`galley decisions`, `g.decisions()`).

Read from the event rows the acts already write (`events.decision` names the act), never
from a second record of them. Newest first, keyset by (at, id) on `ix_events_decisions`:
a page costs the rows it returns, however long the history. Read-only.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time
from typing import Any

import sqlalchemy as sa
from sqlmodel import Session, col

from core.errors import BadDecisionQuery
from core.identity import recipe_of_run, run_id_range
from core.models import SINGLE_STAGE, ApprovalRow, DraftRevisionRow, DraftRow, EventRow, RunRow
from core.policies import DecisionKind
from core.render import Rows
from core.review.approvals import stage_waiting
from core.setup.config import Config
from core.states import EventSubject

# What a decision that left its draft's state as it was came to, by kind.
_KEPT_STATE_OUTCOMES = {
    DecisionKind.APPROVAL: "counted",  # one approval of several required
    DecisionKind.EDIT: "edited",
    DecisionKind.REDRAFT: "requested",
    DecisionKind.RESOLUTION: "retried",  # a failed run asked for again, before its claim
}


@dataclass(frozen=True)
class DecisionView:
    """One person's act. `at` is UTC; `local_at` the same instant in the recipe's zone."""

    id: int  # the event's: `before` of the next page
    at: datetime
    local_at: datetime
    recipe: str
    run_id: str
    draft_key: str | None
    decision: str  # a DecisionKind
    stage: str | None  # None for a resolution: it settles a run, not a review stage
    who: str
    revision: int | None  # None for decisions recorded before the log kept it
    text_hash: str | None
    outcome: str
    reason: str | None


class DecisionList(Rows[DecisionView]):
    title = "decisions"
    row_type = DecisionView
    columns = ("at", "recipe", "decision", "stage", "who", "revision", "outcome", "reason")


def since_instant(since: datetime | date | str) -> datetime:
    """`--since`: a date is its midnight UTC; a time without a zone is UTC."""
    if isinstance(since, str):
        try:
            since = datetime.fromisoformat(since)
        except ValueError:
            raise BadDecisionQuery(
                f"--since {since!r}: give a date (2026-12-01) or an ISO time"
            ) from None
    if not isinstance(since, datetime):
        since = datetime.combine(since, time(), UTC)
    return since.replace(tzinfo=UTC) if since.tzinfo is None else since


def read_decisions(
    session: Session,
    config: Config,
    *,
    since: datetime | date | str | None = None,
    recipe: str | None = None,
    limit: int | None = 100,
    before: int | None = None,
) -> DecisionList:
    """Decisions newest first: at or after `since`, of `recipe`, below the decision
    `before` (the last `id` of the previous page), at most `limit` (None: all)."""
    event = EventRow.__table__.c  # type: ignore[attr-defined]
    query = _decisions().order_by(event.at.desc(), event.id.desc())
    if since is not None:
        query = query.where(event.at >= since_instant(since))
    if recipe is not None:  # a prefix test the run-id index cannot serve: the newest
        # decisions are read in order and the recipe's kept, never all of its events sorted
        prefix, _ = run_id_range(recipe)
        query = query.where(sa.func.substr(event.run_id, 1, len(prefix)) == prefix)
    if before is not None:
        query = query.where(sa.tuple_(event.at, event.id) < sa.tuple_(*_anchor(session, before)))
    if limit is not None:
        query = query.limit(limit)
    return DecisionList(_view(session, row, config) for row in session.execute(query))


def _decisions() -> sa.Select[Any]:
    """Every decision event, with the draft it is about (a resolution's: its run's) and
    the text hash of the revision it names."""
    event = EventRow.__table__.c  # type: ignore[attr-defined]
    draft_key = sa.case(
        (event.subject == EventSubject.DRAFT, event.subject_id), else_=col(RunRow.draft_key)
    )
    return (
        sa.select(
            event.id,
            event.at,
            event.decision,
            event.actor,
            event.run_id,
            event.subject,
            event.from_state,
            event.to_state,
            event.reason,
            event.revision,
            draft_key.label("draft_key"),
            _text_hash(draft_key, event.revision).label("text_hash"),
            _approval_stage(draft_key, event.revision, event.actor).label("approval_stage"),
        )
        .select_from(EventRow.__table__)  # type: ignore[attr-defined]
        .outerjoin(RunRow, col(RunRow.id) == event.run_id)
        .where(event.decision.is_not(None))
    )


def _anchor(session: Session, before: int) -> tuple[datetime, int]:
    event = EventRow.__table__.c  # type: ignore[attr-defined]
    at = session.execute(
        sa.select(event.at).where(event.id == before, event.decision.is_not(None))
    ).scalar_one_or_none()
    if at is None:
        raise BadDecisionQuery(f"no decision {before}: --before takes an id from a previous page")
    return at, before


def _approval_stage(draft_key: Any, revision: Any, actor: Any) -> Any:
    """The stage an approval was given at: its row in `approvals` (a key look-up)."""
    given = sa.select(col(ApprovalRow.stage)).where(
        col(ApprovalRow.draft_key) == draft_key,
        col(ApprovalRow.revision) == revision,
        col(ApprovalRow.approver) == actor,
    )
    return given.scalar_subquery()


def _text_hash(draft_key: Any, revision: Any) -> Any:
    """The text hash of that revision: its kept row, else the draft row's while it is still
    the current one (a revision is kept once another replaces it). Two key look-ups."""
    kept = sa.select(col(DraftRevisionRow.text_hash)).where(
        col(DraftRevisionRow.draft_key) == draft_key, col(DraftRevisionRow.revision) == revision
    )
    current = sa.select(col(DraftRow.text_hash)).where(
        col(DraftRow.key) == draft_key, col(DraftRow.revision) == revision
    )
    return sa.func.coalesce(kept.scalar_subquery(), current.scalar_subquery())


def _view(session: Session, row: Any, config: Config) -> DecisionView:
    recipe = recipe_of_run(row.run_id)
    found = config.recipes.get(recipe)
    at: datetime = row.at  # UTCDateTime: aware UTC on both backends
    kind = DecisionKind(row.decision)
    return DecisionView(
        id=row.id,
        at=at,
        local_at=at.astimezone(found.zone) if found is not None else at,
        recipe=recipe,
        run_id=row.run_id,
        draft_key=row.draft_key,
        decision=kind,
        stage=_stage(session, config, row, kind, recipe),
        who=row.actor,
        revision=row.revision,
        text_hash=row.text_hash,
        outcome=_outcome(kind, row.from_state, row.to_state),
        reason=row.reason,
    )


def _stage(
    session: Session, config: Config, row: Any, kind: DecisionKind, recipe: str
) -> str | None:
    """An approval's own stage; a rejection's, the stage its revision waited at. None
    for a resolution, and for a recipe without `approval_stages`: it has no stage to
    name (its one stage's stored name, "approval", is no word a person gave it)."""
    if row.subject != EventSubject.DRAFT:
        return None  # a resolution settles a run, not a review stage
    found = config.recipes.get(recipe)
    if found is not None and not found.approval_stages:
        return None
    if kind == DecisionKind.APPROVAL and row.approval_stage:
        return str(row.approval_stage)
    if kind == DecisionKind.REJECTION and row.revision is not None:
        return stage_waiting(session, config, recipe, row.draft_key, row.revision)
    return SINGLE_STAGE


def _outcome(kind: DecisionKind, from_state: str | None, to_state: str) -> str:
    """The state it moved its draft or run to; for an act that kept the state, its word."""
    if from_state == to_state:
        return _KEPT_STATE_OUTCOMES.get(kind, to_state)
    return to_state
