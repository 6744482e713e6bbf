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
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from sqlmodel import Session, col, select

from core.models import DraftRow, RedraftRow
from core.policies import RedraftState
from core.states import DraftState
from core.views import FeedbackEntry, FeedbackList, RecipeFeedback

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
    """Counts and the most asked change, from `feedback_entries`."""
    entries = feedback_entries(session, recipe, since)
    notes = [e.text for e in entries if e.kind == "redraft" and e.text]
    return RecipeFeedback(
        recipe=recipe,
        period=period,
        since=since,
        redrafts=sum(1 for e in entries if e.kind == "redraft"),
        rejections=sum(1 for e in entries if e.kind == "rejection"),
        most_asked=most_asked(notes),
        last_reason=next((e.text for e in entries if e.kind == "rejection" and e.text), None),
    )


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
