"""How published posts did (docs/design.md §28): each post of a window with its latest
engagement reading and its score, read for `galley stats`, `g.stats()`, the digest's
best post of the week, the Home tab and `g.plots.engagement()`. It reads, never writes.

A window reads the posts published in it (ix_post_checks_recipe_published) and their
readings by key: its cost is the window's posts, not the history's. A post published
since the last read-back pass is shown too, from its receipt (`not_taken_up`). A post
with no reading says why instead of zeros: `not read` yet, or `no engagement: webhook`
where its platform has none to read.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlmodel import Session, col, select

from core.drafting.scoring import latest_readings, score
from core.identity import platform_of_target, run_of_draft_key
from core.models import EffectRow, PostCheckRow, PostReadingRow
from core.policies import PostCheck
from core.publishing.post_checks import not_taken_up, published_post
from core.render import Rows

MAX_POSTS = 2000  # posts one window shows, newest first
NOT_READ = "not read"  # no reading yet: its counts are not zeros, they are unknown
NO_ENGAGEMENT = "no engagement: {platform}"  # a platform with no counts to read


@dataclass(frozen=True)
class PostStats:
    """One published post and its latest reading (before the first, zeros and no label,
    and `unread` says why there is none)."""

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
    unread: str | None = None  # why it has no reading: NOT_READ or NO_ENGAGEMENT


class StatsList(Rows[PostStats]):
    title = "engagement"
    row_type = PostStats
    columns = (
        "published_at",
        "recipe",
        "target",
        "state",
        "reading",
        "unread",  # why there is no reading: its counts below are not zeros people gave
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
    found = [_stats(post, latest.get(post.receipt)) for post in posts]
    start = now - timedelta(days=days)
    newer = [_not_read_yet(receipt) for receipt in not_taken_up(session, now)]
    found += [p for p in newer if start < p.published_at <= now and recipe in (None, p.recipe)]
    found.sort(key=lambda post: post.published_at, reverse=True)
    return StatsList(found[:MAX_POSTS])


def _not_read_yet(receipt: EffectRow) -> PostStats:
    """A post published since the last read-back pass: due, no reading yet."""
    post = published_post(receipt)
    return PostStats(
        recipe=post.recipe,
        target=post.target,
        run=run_of_draft_key(receipt.key),
        published_at=post.published_at,
        state=PostCheck.DUE,
        url=post.url,
        reading=None,
        read_at=None,
        likes=0,
        reposts=0,
        replies=0,
        quotes=0,
        impressions=None,
        score=0,
        note=None,
        unread=NOT_READ,
    )


def _unread(post: PostCheckRow) -> str:
    """Why a post has no reading: its target cannot be read back, or was read back and
    has nothing to count (verified, with no reading due: a webhook); else not read yet."""
    verified_only = post.state == PostCheck.VERIFIED and post.due_at is None
    if post.state == PostCheck.UNREADABLE or (verified_only and post.readings_done == 0):
        return NO_ENGAGEMENT.format(platform=platform_of_target(post.target))
    return NOT_READ


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
        unread=None if reading is not None else _unread(post),
    )


def _note_of(reading: PostReadingRow | None) -> str | None:
    return reading.note if reading is not None else None


def gone_text(post: PostStats) -> str:
    """`Published to mastodon:…, then gone (404 at 10:02 UTC: Record not found)`."""
    return f"Published to {post.target}, then gone ({post.gone})"
