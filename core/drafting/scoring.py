"""How a published post was received (docs/design.md §28): its latest engagement
reading, read by key, and the one number posts are ranked by. Read by `learn_from`
(core/drafting/learning.py) and by the stats a stage above (core/publishing/engagement.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from statistics import median

import sqlalchemy as sa
from sqlmodel import Session, col, select

from core.models import PostReadingRow


def score(likes: int, reposts: int, replies: int, quotes: int) -> int:
    """One number to rank posts by: likes + 2 reposts + 2 replies + quotes. A repost
    or a reply is someone acting on the post, so it counts twice a like; a quote, which
    is also a repost with words, counts once more than a like would."""
    return likes + 2 * reposts + 2 * replies + quotes


def score_of_reading() -> sa.ColumnElement[int]:
    """`score` of a post_readings row, counted by the database (the same sum, in SQL)."""
    likes, reposts = col(PostReadingRow.likes), col(PostReadingRow.reposts)
    replies, quotes = col(PostReadingRow.replies), col(PostReadingRow.quotes)
    return (likes + 2 * reposts + 2 * replies + quotes).label("score")


BASELINE_POSTS = 20  # a target's previous posts its baseline is the median of
BASELINE_MIN = 5  # no lift until the target has this many read posts before


def lift(points: int, previous: Sequence[int]) -> float | None:
    """A post's score over its target's baseline: the median score of the target's
    previous BASELINE_POSTS read posts (`previous`, oldest first). None before
    BASELINE_MIN exist, or when their median is 0 (a ratio to nothing)."""
    baseline = previous[-BASELINE_POSTS:]
    if len(baseline) < BASELINE_MIN:
        return None
    middle = median(baseline)
    return points / middle if middle > 0 else None


def latest_readings(session: Session, receipts: list[str]) -> dict[str, PostReadingRow]:
    """Each receipt's latest reading (the furthest offset), read by key."""
    latest: dict[str, PostReadingRow] = {}
    for start in range(0, len(receipts), 500):  # bound each IN list
        chunk = receipts[start : start + 500]
        for reading in session.exec(
            select(PostReadingRow).where(col(PostReadingRow.receipt).in_(chunk))
        ).all():
            kept = latest.get(reading.receipt)
            if kept is None or reading.after_seconds > kept.after_seconds:
                latest[reading.receipt] = reading
    return latest
