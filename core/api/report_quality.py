"""Draft quality per recipe over a window (docs/design.md §38): how many drafts people
saw, how many they approved as the model wrote them, how much they changed, how long
they took, what they turned down and what it cost. It reads, never writes.

Its reads are the window's rows by index (drafts by `ready_at`, decision events by
`at`, attempts by `started_at`): their cost is the window's drafts, not the history's.
A ratio over fewer than MIN_SAMPLE drafts or posts is None, and says so.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from functools import cache
from statistics import median
from typing import Any

import sqlalchemy as sa
from rapidfuzz.distance import Indel
from sqlmodel import Session, col

from core.api.analytics import TOKEN_SUMS, summed_cost
from core.drafting.revisions import MODEL_AUTHOR
from core.models import CHANGES as CHANGE_DECISIONS
from core.models import AttemptRow, DraftRevisionRow, DraftRow, EventRow, UTCDateTime
from core.policies import DecisionKind
from core.states import DraftState

MIN_SAMPLE = 3  # a rate over fewer drafts (or posts) than this is "too few", not a ratio
TOP_REASONS = 3
APPROVED_STATES = (DraftState.APPROVED, DraftState.PUBLISHED)
DECIDED_STATES = (*APPROVED_STATES, DraftState.REJECTED, DraftState.EXPIRED)
APPROVED, DECIDED = frozenset(APPROVED_STATES), frozenset(DECIDED_STATES)
WAITED = frozenset((*APPROVED_STATES, DraftState.REJECTED))  # decided by a person


@dataclass
class DraftQuality:
    """One recipe's drafts made ready for review in the window, and what became of them."""

    recipe: str
    drafts: int = 0  # made ready for review (a review message) in the window
    decided: int = 0  # of those, approved (or published), rejected or expired
    approved: int = 0  # approved or published
    published: int = 0
    first_pass: int = 0  # approved at revision 1, with no edit, redraft or unapprove
    rejected: int = 0
    expired: int = 0
    edits: int = 0  # edits of the published drafts
    redrafts: int = 0  # redrafts asked of the published drafts
    reasons: list[tuple[str, int]] = field(default_factory=list)  # top rejection reasons
    changed: list[float] = field(default_factory=list)  # per approved draft, 0..1
    waits: list[float] = field(default_factory=list)  # seconds, ready to decided
    cost_usd: float = 0.0  # every model call of the recipe started in the window

    @property
    def first_pass_rate(self) -> float | None:
        """First-pass approvals over drafts decided (approved, rejected or expired)."""
        return _ratio(self.first_pass, self.decided)

    @property
    def edits_per_post(self) -> float | None:
        return _ratio(self.edits, self.published)

    @property
    def redrafts_per_post(self) -> float | None:
        return _ratio(self.redrafts, self.published)

    @property
    def changed_share(self) -> float | None:
        """Mean share of characters reviewers changed between the model's latest text (its
        draft or a redraft) and the approved one: rapidfuzz's Indel normalized distance
        (characters inserted and deleted over both lengths), 0 for one approved as written."""
        return sum(self.changed) / len(self.changed) if len(self.changed) >= MIN_SAMPLE else None

    @property
    def median_decision_seconds(self) -> float | None:
        return median(self.waits) if len(self.waits) >= MIN_SAMPLE else None

    @property
    def cost_per_post(self) -> float | None:
        return _ratio(self.cost_usd, self.published)

    @property
    def too_few(self) -> str | None:
        """Why its ratios are not given: `too few: 2 drafts decided (3 needed)`."""
        if self.decided >= MIN_SAMPLE:
            return None
        return f"too few: {self.decided} drafts decided ({MIN_SAMPLE} needed)"


def _ratio(part: float, whole: int) -> float | None:
    return part / whole if whole >= MIN_SAMPLE else None


def read_quality(
    session: Session, since: datetime, until: datetime, recipes: Iterable[str]
) -> dict[str, DraftQuality]:
    """Each recipe's draft quality over drafts made ready in (since, until]."""
    found = {name: DraftQuality(name) for name in recipes}
    connection = session.connection()
    reasons: dict[str, Counter[str]] = defaultdict(Counter)
    drafts = connection.execute(_drafts(connection.dialect.name), _window(since, until)).all()
    for row in drafts:
        quality = found.get(row.recipe) or found.setdefault(row.recipe, DraftQuality(row.recipe))
        _count(quality, row)
        if row.state in APPROVED:
            first, final = row.model_text, row.edited_text
            share = Indel.normalized_distance(first, final) if first and final else 0.0
            quality.changed.append(share)
        elif row.state == DraftState.REJECTED:
            reasons[row.recipe][(row.decision_reason or "no reason given").strip()] += 1
    for recipe, counted in reasons.items():
        found[recipe].reasons = counted.most_common(TOP_REASONS)
    for recipe, cost in _costs(session, since, until).items():
        found.setdefault(recipe, DraftQuality(recipe)).cost_usd = cost
    return found


def _window(since: datetime, until: datetime) -> dict[str, datetime]:
    return {"since": since, "until": until}


def _count(quality: DraftQuality, row: Any) -> None:
    quality.drafts += 1
    state = row.state
    if state in DECIDED:
        quality.decided += 1
    if state in APPROVED:
        quality.approved += 1
        quality.first_pass += not row.changes and row.revision <= 1
    if state == DraftState.PUBLISHED:
        quality.published += 1
        quality.edits += row.edits
        quality.redrafts += row.redrafts
    quality.rejected += state == DraftState.REJECTED
    quality.expired += state == DraftState.EXPIRED
    if state in WAITED and row.decided_at is not None:
        quality.waits.append((row.decided_at - row.ready_at).total_seconds())


@cache
def _drafts(dialect: str) -> sa.Select[Any]:
    """The window's drafts (ix_drafts_ready_at), oldest first, each with its people's
    changes counted by the database, and its text only where it was approved and edited
    (the share changed compares it with the model's). Times are read as the driver gives
    them: only their difference is used."""
    ready = col(DraftRow.ready_at)
    changes = _changes()
    edited = sa.and_(col(DraftRow.state).in_(APPROVED_STATES), changes.c.edits > 0)
    counted = [sa.func.coalesce(changes.c[name], 0).label(name) for name in _KINDS]
    return (
        sa.select(
            col(DraftRow.key),
            col(DraftRow.recipe),
            col(DraftRow.state),
            col(DraftRow.revision),
            sa.type_coerce(ready, sa.DateTime(timezone=True)).label("ready_at"),
            sa.type_coerce(col(DraftRow.decided_at), sa.DateTime(timezone=True)),
            col(DraftRow.decision_reason),
            sa.case((edited, sa.func.coalesce(col(DraftRow.text), "")), else_=None).label(
                "edited_text"
            ),
            sa.case((edited, _model_text()), else_=None).label("model_text"),
            *counted,
        )
        .outerjoin(changes, changes.c.subject_id == col(DraftRow.key))
        .where(ready > _SINCE, ready <= _UNTIL)
        .order_by(ready)
    )


def _model_text() -> sa.ScalarSelect[str]:
    """The draft's latest revision the model wrote (revision 1 if none says so), by key
    (the revisions' primary key): the text the share changed is measured from. Asked only
    of approved drafts a person edited: one only redrafted, unapproved or given alt text
    by the model holds the model's text."""
    revision = col(DraftRevisionRow.revision)
    author = col(DraftRevisionRow.written_by)
    by_model = sa.or_(sa.func.substr(author, 1, len(MODEL_AUTHOR)) == MODEL_AUTHOR, revision == 1)
    return (
        sa.select(col(DraftRevisionRow.text))
        .where(col(DraftRevisionRow.draft_key) == col(DraftRow.key))
        .order_by(sa.case((by_model, 0), else_=1), sa.case((by_model, -revision), else_=revision))
        .limit(1)
        .scalar_subquery()
    )


_SINCE = sa.bindparam("since", type_=UTCDateTime())
_UNTIL = sa.bindparam("until", type_=UTCDateTime())
_KINDS = {"edits": DecisionKind.EDIT, "redrafts": DecisionKind.REDRAFT, "changes": None}


def _changes() -> sa.Subquery:
    """Edits, redrafts and every change (edits, redrafts, unapprovals) per draft, counted
    by the database over the decision events since the window began (ix_events_changes,
    read alone: a draft is changed only after it is ready, so none of its changes is older
    than `since`)."""
    kind = col(EventRow.decision)
    counts = [
        sa.func.count() if kind_is is None else sa.func.sum(sa.case((kind == kind_is, 1), else_=0))
        for kind_is in _KINDS.values()
    ]
    return (
        sa.select(
            col(EventRow.subject_id), *(c.label(n) for c, n in zip(counts, _KINDS, strict=True))
        )
        .where(col(EventRow.at) > _SINCE, sa.text(f"({CHANGE_DECISIONS})"))
        .group_by(col(EventRow.subject_id))
        .subquery("changes")
    )


def _costs(session: Session, since: datetime, until: datetime) -> dict[str, float]:
    """Every model call started in the window (a failed one is paid too), summed per
    recipe, model and way of calling by the database, priced here."""
    started = col(AttemptRow.started_at)
    rows = (
        session.connection()
        .execute(
            sa.select(
                col(AttemptRow.recipe),
                col(AttemptRow.mode),
                col(AttemptRow.model),
                *TOKEN_SUMS,
            )
            .where(started > since, started <= until)
            .group_by(col(AttemptRow.recipe), col(AttemptRow.mode), col(AttemptRow.model))
        )
        .all()
    )
    costs: dict[str, float] = defaultdict(float)
    for recipe, mode, model, *sums in rows:
        costs[recipe] += summed_cost(model, mode, *sums)
    return costs
