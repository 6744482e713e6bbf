"""How published posts did (docs/design.md §28): each post of a window with its latest
engagement reading and its score, read for `galley stats`, `g.stats()`, the digest's
best post of the week, the Home tab and `g.plots.engagement()`. It reads, never writes.

A window reads the posts published in it (ix_post_checks_recipe_published) and their
readings by key: its cost is the window's posts, not the history's.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlmodel import Session, col, select

from core.identity import run_of_draft_key
from core.models import PostCheckRow, PostReadingRow
from core.policies import PostCheck
from core.render import Rows
from core.scoring import latest_readings, score

MAX_POSTS = 2000  # posts one window shows, newest first


@dataclass(frozen=True)
class PostStats:
    """One published post and its latest reading (zeros and no label before the first)."""

    recipe: str
    target: str
    run: str
    published_at: datetime
    state: str  # a PostCheck: due, verified, gone, unreadable, marked, unconfirmed
    url: str | None
    reading: str | None  # the offset of the latest reading: `1h`, `1d`, `7d`
    read_at: datetime | None
    likes: int
    reposts: int
    replies: int
    quotes: int
    impressions: int | None
    score: int
    note: str | None  # what the platform would not say (a LinkedIn scope missing), or
    # that a person marked it published and it is not read back
    gone: str | None = None  # gone when read back: the platform's answer and its time


class StatsList(Rows[PostStats]):
    title = "engagement"
    row_type = PostStats
    columns = (
        "published_at",
        "recipe",
        "target",
        "state",
        "reading",
        "likes",
        "reposts",
        "replies",
        "quotes",
        "score",
        "url",
    )

    def best(self) -> PostStats | None:
        """The post with the highest score, if any scored at all."""
        ranked = [post for post in self if post.score > 0 and post.gone is None]
        return max(ranked, key=lambda post: (post.score, post.published_at), default=None)


def read_stats(session: Session, now: datetime, days: int, recipe: str | None = None) -> StatsList:
    """Posts published in the last `days` (of `recipe`, or every recipe), newest first."""
    query = select(PostCheckRow).where(col(PostCheckRow.published_at) > now - timedelta(days=days))
    if recipe is not None:
        query = query.where(col(PostCheckRow.recipe) == recipe)
    posts = session.exec(
        query.order_by(col(PostCheckRow.published_at).desc()).limit(MAX_POSTS)
    ).all()
    latest = latest_readings(session, [post.receipt for post in posts])
    return StatsList(_stats(post, latest.get(post.receipt)) for post in posts)


def _stats(post: PostCheckRow, reading: PostReadingRow | None) -> PostStats:
    counts = (
        (reading.likes, reading.reposts, reading.replies, reading.quotes)
        if reading is not None
        else (0, 0, 0, 0)
    )
    return PostStats(
        recipe=post.recipe,
        target=post.target,
        run=run_of_draft_key(post.receipt),
        published_at=post.published_at,
        state=post.state,
        url=post.url,
        reading=reading.label if reading is not None else None,
        read_at=reading.read_at if reading is not None else None,
        likes=counts[0],
        reposts=counts[1],
        replies=counts[2],
        quotes=counts[3],
        impressions=reading.impressions if reading is not None else None,
        score=score(*counts),
        note=post.detail if post.state == PostCheck.MARKED else _note_of(reading),
        gone=post.detail if post.state == PostCheck.GONE else None,
    )


def _note_of(reading: PostReadingRow | None) -> str | None:
    return reading.note if reading is not None else None


def gone_text(post: PostStats) -> str:
    """`Published to mastodon:…, then gone (404 at 10:02 UTC: Record not found)`."""
    return f"Published to {post.target}, then gone ({post.gone})"
