"""How a published post was received (docs/design.md §28): its latest engagement
reading, read by key, and the one number posts are ranked by. Read by `learn_from`
(core/drafting/learning.py) and by the stats a stage above (core/publishing/engagement.py).
"""

from __future__ import annotations

from sqlmodel import Session, col, select

from core.models import PostReadingRow


def score(likes: int, reposts: int, replies: int, quotes: int) -> int:
    """One number to rank posts by: likes + 2 reposts + 2 replies + quotes. A repost
    or a reply is someone acting on the post, so it counts twice a like; a quote, which
    is also a repost with words, counts once more than a like would."""
    return likes + 2 * reposts + 2 * replies + quotes


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
