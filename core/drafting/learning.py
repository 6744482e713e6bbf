"""What a `learn_from = "top"` run learns from (docs/design.md §27): the recipe's
best-received published posts of the last LOOKBACK_DAYS, ranked by lift over their
target's baseline (docs/design.md §38), and what reviewers recently asked to avoid.

Read once, when the run's snapshot is taken, in the same fenced transaction, and kept
with it as JSON (core/sources/snapshot.py): a retry or a take-over shows the model the
same examples even after a newer reading reorders them. Every read is an indexed
window (the recipe's posts of the lookback, its latest rejections and redraft notes),
never the whole history.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlmodel import Session, col, select

from core.drafting.lifts import LiftedPost, offset_order, read_lifted
from core.drafting_policies import RedraftState
from core.identity import draft_of_publish_key
from core.models import DraftRow, PostCheckRow, RedraftRow
from core.policies import PostCheck
from core.post_body import PART_SEPARATOR, BodyUnreadable, PostBody
from core.sources.snapshot import Ask, Example, Lessons
from core.states import DraftState

LOOKBACK_DAYS = 90
EXAMPLES = 3  # posts that did well, shown
ASKS = 5  # rejection reasons, and as many redraft notes, shown


def read_lessons(session: Session, recipe: str, now: datetime) -> Lessons:
    """The recipe's best posts and latest asks as of `now`."""
    since = now - timedelta(days=LOOKBACK_DAYS)
    examples = _best_posts(session, recipe, since, now)
    return Lessons(examples=examples, asks=_asks(session, recipe, since))


def _best_posts(
    session: Session, recipe: str, since: datetime, now: datetime
) -> tuple[Example, ...]:
    """The EXAMPLES best drafts published since `since`, ranked by lift (its score over
    its target's baseline, core/drafting/lifts.py), so a big account's ordinary post does
    not crowd out a small one's best; a post with no lift yet (fewer than BASELINE_MIN
    before it) after every one with, by score; ties to the newer. A post never read, or
    found gone, is not an example."""
    targets = session.exec(
        select(PostCheckRow.target)
        .where(col(PostCheckRow.recipe) == recipe, col(PostCheckRow.published_at) > since)
        .distinct()
    ).all()
    posts = read_lifted(session, since, now, sorted(targets)) if targets else []
    best: dict[str, tuple[tuple[bool, float, int, datetime], LiftedPost]] = {}
    for post in posts:
        if post.recipe != recipe or not post.scores or post.state == PostCheck.GONE:
            continue
        points = post.scores[max(post.scores, key=offset_order)]
        ranked = (post.lift is not None, post.lift or 0.0, points, post.published_at)
        draft = draft_of_publish_key(post.receipt)
        if draft not in best or ranked > best[draft][0]:
            best[draft] = (ranked, post)
    examples: list[Example] = []
    for draft, (ranked, post) in sorted(best.items(), key=lambda kv: kv[1][0], reverse=True):
        row = session.get(DraftRow, draft)
        if row is not None and row.text:
            published = published_text(row.text, post.target)
            examples.append(
                Example(published, post.target, post.published_at.isoformat(), ranked[2])
            )
        if len(examples) == EXAMPLES:
            break
    return tuple(examples)


def published_text(text: str, target: str) -> str:
    """What `target` published of a stored draft: its own version of a set (docs/design.md
    §30), parts blank-line apart; a plain draft as it is."""
    body = PostBody.parse(text)
    if body.is_single():
        return text
    try:
        return PART_SEPARATOR.join(body.parts_for(target))
    except BodyUnreadable:
        return body.readable()


def _asks(session: Session, recipe: str, since: datetime) -> tuple[Ask, ...]:
    """The ASKS newest rejection reasons and the ASKS newest redraft notes, newest first."""
    reasons = session.exec(
        select(DraftRow.decision_reason)
        .where(
            col(DraftRow.recipe) == recipe,
            col(DraftRow.state) == DraftState.REJECTED,
            col(DraftRow.updated_at) >= since,
            col(DraftRow.decision_reason).is_not(None),
        )
        .order_by(col(DraftRow.updated_at).desc())
        .limit(ASKS)
    ).all()
    notes = session.exec(
        select(RedraftRow.note)
        .where(
            col(RedraftRow.recipe) == recipe,
            col(RedraftRow.created_at) >= since,
            col(RedraftRow.state) != RedraftState.FAILED,
        )
        .order_by(col(RedraftRow.created_at).desc())
        .limit(ASKS)
    ).all()
    return tuple(Ask("rejection", r) for r in reasons if r) + tuple(
        Ask("redraft", n) for n in notes if n
    )
