"""What reviewers said about a recipe's drafts (docs/design.md §22): rejection reasons
and redraft notes, per recipe, for `galley show`, the daily digest and the notebook.

Read-only, over indexed windows (`ix_drafts_recipe_state_updated`,
`ix_redrafts_recipe_created`), so a long history is never read. Plain text: the Slack
adapter escapes it.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import sqlalchemy as sa
from sqlmodel import Session, col, select

from core.drafting_policies import RedraftState
from core.models import DraftRow, RedraftRow
from core.render import Rows
from core.states import DraftState

FEEDBACK_DAYS = 30
LIMIT = 500  # entries one read returns, newest first
_PHRASE_SPLIT = re.compile(r"[,;.\n]+|\band\b")


def feedback_entries(session: Session, recipe: str, since: datetime) -> FeedbackList:
    """The recipe's rejections (with their reasons) and redraft notes since `since`,
    newest first."""
    rejected = session.exec(
        select(DraftRow)
        .where(
            col(DraftRow.recipe) == recipe,
            col(DraftRow.state) == DraftState.REJECTED,
            col(DraftRow.updated_at) >= since,
        )
        .order_by(col(DraftRow.updated_at).desc())
        .limit(LIMIT)
    ).all()
    redrafts = session.exec(
        select(RedraftRow)
        .where(
            col(RedraftRow.recipe) == recipe,
            col(RedraftRow.created_at) >= since,
            col(RedraftRow.state) != RedraftState.FAILED,
        )
        .order_by(col(RedraftRow.created_at).desc())
        .limit(LIMIT)
    ).all()
    entries = [
        FeedbackEntry(d.updated_at, "rejection", d.decided_by, d.decision_reason, d.key)
        for d in rejected
    ] + [
        FeedbackEntry(r.created_at, "redraft", r.requested_by, r.note, r.draft_key)
        for r in redrafts
    ]
    return FeedbackList(sorted(entries, key=lambda e: e.at, reverse=True)[:LIMIT])


def recipe_feedback(session: Session, recipe: str, since: datetime, period: str) -> RecipeFeedback:
    """One recipe's counts and most asked change (`galley show`, the notebook)."""
    return feedback_by_recipe(session, [recipe], since, period)[recipe]


def feedback_by_recipe(
    session: Session, recipes: Iterable[str], since: datetime, period: str
) -> dict[str, RecipeFeedback]:
    """Each named recipe's feedback since `since`, in three statements however many
    recipes there are (the digest asks for all of them): rejections counted by the
    database, each recipe's newest rejection reason, and the redraft notes, which are
    few (a person writes each). No draft row is loaded: reading up to 500 whole drafts
    per recipe would be most of the digest's time (bench/history_scale.py measures it)."""
    names = set(recipes)
    rejected = (
        col(DraftRow.state) == DraftState.REJECTED,
        col(DraftRow.updated_at) >= since,
    )
    # grouped as `recipe || ''`: read the window from ix_drafts_state_updated, not every
    # rejection in the history from the (recipe, state) index (core/operations/digest.py)
    by_recipe = col(DraftRow.recipe) + ""
    rejections = {
        recipe: int(count)
        for recipe, count in session.execute(
            sa.select(by_recipe, sa.func.count()).where(*rejected).group_by(by_recipe)
        )
        if recipe in names
    }
    newest = sa.func.row_number().over(
        partition_by=col(DraftRow.recipe), order_by=col(DraftRow.updated_at).desc()
    )
    reasons = (
        sa.select(col(DraftRow.recipe), col(DraftRow.decision_reason), newest.label("newest"))
        .where(*rejected, col(DraftRow.decision_reason) != "")  # NULL is left out too
        .subquery()
    )
    last_reason = {
        recipe: reason
        for recipe, reason in session.execute(
            sa.select(reasons.c.recipe, reasons.c.decision_reason).where(reasons.c.newest == 1)
        )
        if recipe in names
    }
    redrafts: Counter[str] = Counter()
    notes: dict[str, list[str]] = {}
    for recipe, note in session.execute(
        sa.select(col(RedraftRow.recipe), col(RedraftRow.note))
        .where(
            col(RedraftRow.recipe).in_(sorted(names)),
            col(RedraftRow.created_at) >= since,
            col(RedraftRow.state) != RedraftState.FAILED,
        )
        .order_by(col(RedraftRow.created_at).desc())  # newest first: most_asked's tie rule
    ):
        redrafts[recipe] += 1
        if note:
            notes.setdefault(recipe, []).append(note)
    return {
        name: RecipeFeedback(
            recipe=name,
            period=period,
            since=since,
            redrafts=redrafts[name],
            rejections=rejections.get(name, 0),
            most_asked=most_asked(notes.get(name, [])),
            last_reason=last_reason.get(name),
        )
        for name in sorted(names)
    }


def most_asked(notes: Iterable[str]) -> str | None:
    """The phrase reviewers asked for most often ("shorter" in "shorter, mention the
    date"), lower-cased; a tie goes to the one asked most recently."""
    phrases: Counter[str] = Counter()
    for note in notes:
        for phrase in _PHRASE_SPLIT.split(note.lower()):
            cleaned = " ".join(phrase.split())
            if cleaned:
                phrases[cleaned] += 1
    if not phrases:
        return None
    return phrases.most_common(1)[0][0]


def month_start(now: datetime, zone: str) -> datetime:
    """Midnight on the first of `now`'s month in `zone`: what "this month" means."""
    local = now.astimezone(ZoneInfo(zone))
    return local.replace(day=1, hour=0, minute=0, second=0, microsecond=0)


def recent(now: datetime, days: int = FEEDBACK_DAYS) -> datetime:
    return now - timedelta(days=days)


def last_days(days: int) -> str:
    return "the last day" if days == 1 else f"the last {days} days"


@dataclass(frozen=True)
class FeedbackEntry:
    """One thing a reviewer said about a recipe's draft: a rejection and its reason, or
    a redraft and its note (docs/design.md §22)."""

    at: datetime
    kind: str  # "rejection" | "redraft"
    by: str | None
    text: str | None
    draft_key: str


class FeedbackList(Rows[FeedbackEntry]):
    title = "feedback"
    row_type = FeedbackEntry
    columns = ("at", "kind", "by", "text", "draft_key")


@dataclass(frozen=True)
class RecipeFeedback:
    """A recipe's feedback in numbers: redrafts and rejections since `since`, and the
    change reviewers asked for most."""

    recipe: str
    period: str  # "this month", "the last 30 days": how `since` reads
    since: datetime
    redrafts: int
    rejections: int
    most_asked: str | None
    last_reason: str | None

    def line(self) -> str:
        """`weekly-update: 3 redrafts, 1 rejection in the last 30 days, most asked: 'shorter'`"""
        counts = f"{_count(self.redrafts, 'redraft')}, {_count(self.rejections, 'rejection')}"
        line = f"{self.recipe}: {counts} in {self.period}"
        if self.most_asked:
            line += f", most asked: '{self.most_asked}'"
        if self.last_reason:
            line += f"; last rejected: '{self.last_reason}'"
        return line


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")
