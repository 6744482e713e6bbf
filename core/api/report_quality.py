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
from statistics import median
from typing import Any

import sqlalchemy as sa
from rapidfuzz.distance import Indel
from sqlmodel import Session, col

from core.drafting.lifts import one_of
from core.drafting.revisions import MODEL_AUTHOR
from core.models import CHANGES as CHANGE_DECISIONS
from core.models import AttemptRow, DraftRevisionRow, DraftRow, EventRow
from core.policies import DecisionKind
from core.states import DraftState
from core.telemetry.pricing import estimated_cost_usd

MIN_SAMPLE = 3  # a rate over fewer drafts (or posts) than this is "too few", not a ratio
TOP_REASONS = 3
APPROVED_STATES = (DraftState.APPROVED, DraftState.PUBLISHED)
DECIDED_STATES = (*APPROVED_STATES, DraftState.REJECTED, DraftState.EXPIRED)
# what a person did that means the model's first text was not what went out
CHANGES = (DecisionKind.EDIT, DecisionKind.REDRAFT, DecisionKind.UNAPPROVE)


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
    drafts = _drafts(session, since, until)
    changes = _changes(session, since, [row.key for row in drafts])
    changed_keys = []
    for row in drafts:
        quality = found.setdefault(row.recipe, DraftQuality(row.recipe))
        _count(quality, row, changes.get(row.key, Counter()))
        if row.state in APPROVED_STATES:
            changed_keys.append(row.key)
    edited = {key for key, counted in changes.items() if counted[DecisionKind.EDIT]}
    _measure_changes(session, drafts, changed_keys, edited, found)
    reasons: dict[str, Counter[str]] = defaultdict(Counter)
    for row in drafts:
        if row.state == DraftState.REJECTED:
            reasons[row.recipe][(row.decision_reason or "no reason given").strip()] += 1
    for recipe, counted in reasons.items():
        found[recipe].reasons = counted.most_common(TOP_REASONS)
    for recipe, cost in _costs(session, since, until).items():
        found.setdefault(recipe, DraftQuality(recipe)).cost_usd = cost
    return found


def _count(quality: DraftQuality, row: Any, changes: Counter[str]) -> None:
    quality.drafts += 1
    state = DraftState(row.state)
    if state in DECIDED_STATES:
        quality.decided += 1
    if state in APPROVED_STATES:
        quality.approved += 1
        unchanged = not any(changes[kind] for kind in CHANGES) and row.revision <= 1
        quality.first_pass += unchanged
    if state == DraftState.PUBLISHED:
        quality.published += 1
        quality.edits += changes[DecisionKind.EDIT]
        quality.redrafts += changes[DecisionKind.REDRAFT]
    quality.rejected += state == DraftState.REJECTED
    quality.expired += state == DraftState.EXPIRED
    if state in (*APPROVED_STATES, DraftState.REJECTED) and row.decided_at is not None:
        quality.waits.append((row.decided_at - row.ready_at).total_seconds())


def _drafts(session: Session, since: datetime, until: datetime) -> list[Any]:
    """The window's drafts, by ix_drafts_ready_at; their text is read only when edited."""
    ready = col(DraftRow.ready_at)
    return list(
        session.connection()
        .execute(
            sa.select(
                col(DraftRow.key),
                col(DraftRow.recipe),
                col(DraftRow.state),
                col(DraftRow.revision),
                ready,
                col(DraftRow.decided_at),
                col(DraftRow.decision_reason),
            ).where(ready > since, ready <= until)
        )
        .all()
    )


def _changes(session: Session, since: datetime, keys: list[str]) -> dict[str, Counter[str]]:
    """Edits, redrafts and unapprovals per draft, counted by the database over the
    decision events since the window began (ix_events_changes, read alone: a draft is
    changed only after it is ready, so none of its changes is older than `since`)."""
    if not keys:
        return {}
    kind = col(EventRow.decision)
    rows = (
        session.connection()
        .execute(
            sa.select(col(EventRow.subject_id), kind, sa.func.count())
            .where(col(EventRow.at) > since, sa.text(f"({CHANGE_DECISIONS})"))
            .group_by(col(EventRow.subject_id), kind)
        )
        .all()
    )
    wanted = set(keys)
    found: dict[str, Counter[str]] = defaultdict(Counter)
    for subject, decision, count in rows:
        if subject in wanted:
            found[subject][str(decision)] += int(count)
    return found


def _measure_changes(
    session: Session,
    drafts: list[Any],
    approved: list[str],
    edited: set[str],
    found: dict[str, DraftQuality],
) -> None:
    """The share changed of each approved draft: the model's latest revision (its draft or
    a redraft) against its current text, read only for the drafts a person edited (one
    only redrafted, unapproved or given alt text by the model holds the model's text)."""
    approved_keys = set(approved)
    revised = [row.key for row in drafts if row.key in approved_keys and row.key in edited]
    firsts = _model_texts(session, revised)
    finals = _current_texts(session, revised)
    for row in drafts:
        if row.key not in approved_keys:
            continue
        first, final = firsts.get(row.key), finals.get(row.key)
        share = Indel.normalized_distance(first, final) if first and final else 0.0
        found[row.recipe].changed.append(share)


def _model_texts(session: Session, keys: list[str]) -> dict[str, str]:
    """Each draft's latest revision the model wrote (revision 1 if none says so)."""
    kept: dict[str, tuple[bool, int, str]] = {}
    for start in range(0, len(keys), 500):
        chunk = keys[start : start + 500]
        for key, revision, text, author in (
            session.connection()
            .execute(
                sa.select(
                    col(DraftRevisionRow.draft_key),
                    col(DraftRevisionRow.revision),
                    col(DraftRevisionRow.text),
                    col(DraftRevisionRow.written_by),
                ).where(one_of(session.connection(), col(DraftRevisionRow.draft_key), chunk))
            )
            .all()
        ):
            by_model = author.startswith(MODEL_AUTHOR) or revision == 1
            ranked = (by_model, revision if by_model else -revision, text)
            if key not in kept or ranked[:2] > kept[key][:2]:
                kept[key] = ranked
    return {key: text for key, (_, _, text) in kept.items()}


def _current_texts(session: Session, keys: list[str]) -> dict[str, str]:
    texts: dict[str, str] = {}
    for start in range(0, len(keys), 500):
        chunk = keys[start : start + 500]
        texts.update(
            (key, text or "")
            for key, text in session.connection()
            .execute(
                sa.select(col(DraftRow.key), col(DraftRow.text)).where(
                    one_of(session.connection(), col(DraftRow.key), chunk)
                )
            )
            .all()
        )
    return texts


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
                sa.func.sum(col(AttemptRow.input_tokens)),
                sa.func.sum(col(AttemptRow.output_tokens)),
                sa.func.sum(col(AttemptRow.cache_creation_tokens)),
                sa.func.sum(col(AttemptRow.cache_read_tokens)),
            )
            .where(started > since, started <= until)
            .group_by(col(AttemptRow.recipe), col(AttemptRow.mode), col(AttemptRow.model))
        )
        .all()
    )
    costs: dict[str, float] = defaultdict(float)
    for recipe, mode, model, tokens_in, tokens_out, created, read in rows:
        costs[recipe] += estimated_cost_usd(
            model, int(tokens_in), int(tokens_out), int(created), int(read), drafting=mode
        )
    return costs
