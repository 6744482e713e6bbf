"""Results per recipe and target over a window (docs/design.md §38): posts published and
verified, engagement at each reading (1 h, 24 h, 7 d: every reading, not only the latest)
and lift against the target's own baseline. It reads, never writes.

The posts, their readings and lifts are core/drafting/lifts.py's (`learn_from` ranks by
the same lift): the cost is the window's posts and twice BASELINE_POSTS more per target.
A post never read is "not read", never 0; a target whose posts cannot be read (a
webhook, Slack, a read-back refused) "has no engagement".
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from statistics import median

from sqlmodel import Session

from core.drafting.lifts import LiftedPost, offset_order, read_lifted
from core.policies import PostCheck

PostResult = LiftedPost  # one published post of the window, its readings and lift
VERIFIED_STATES = (PostCheck.VERIFIED, PostCheck.UNCONFIRMED)


@dataclass
class Results:
    """The posts of one recipe (or one recipe and target) in the window."""

    recipe: str
    target: str  # a target id, or "all" when grouped by recipe
    posts: list[PostResult] = field(default_factory=list)

    @property
    def published(self) -> int:
        return len(self.posts)

    @property
    def verified(self) -> int:
        return sum(post.state in VERIFIED_STATES for post in self.posts)

    @property
    def gone(self) -> int:
        return sum(post.state == PostCheck.GONE for post in self.posts)

    @property
    def no_engagement(self) -> bool:
        """Every post went where no engagement can be read."""
        return bool(self.posts) and not any(post.has_engagement for post in self.posts)

    @property
    def not_read(self) -> int:
        """Posts that could be read and have no reading yet."""
        return sum(post.has_engagement and not post.scores for post in self.posts)

    def readings(self) -> dict[str, tuple[int, float]]:
        """Per reading label, in the order of its offset: posts read then, median score."""
        by_label: dict[str, list[int]] = defaultdict(list)
        for post in self.posts:
            for label, points in post.scores.items():
                by_label[label].append(points)
        order = sorted(by_label, key=offset_order)
        return {label: (len(by_label[label]), median(by_label[label])) for label in order}

    @property
    def lifts(self) -> list[float]:
        return [post.lift for post in self.posts if post.lift is not None]

    @property
    def median_lift(self) -> float | None:
        return median(self.lifts) if self.lifts else None


def read_posts(session: Session, since: datetime, until: datetime) -> list[PostResult]:
    """Every post published in (since, until], oldest first, with its readings and lift."""
    return read_lifted(session, since, until)


def group_results(posts: list[PostResult], by_target: bool) -> list[Results]:
    """The posts grouped per recipe and target, or per recipe (`target` is `all`)."""
    groups: dict[tuple[str, str], Results] = {}
    for post in posts:
        key = (post.recipe, post.target if by_target else "all")
        groups.setdefault(key, Results(*key)).posts.append(post)
    return [groups[key] for key in sorted(groups)]


def best_post(posts: list[PostResult]) -> PostResult | None:
    """The window's best post: the highest lift, else the highest latest score."""
    live = [post for post in posts if post.state != PostCheck.GONE and post.scores]
    lifted = [post for post in live if post.lift is not None]
    if lifted:
        return max(lifted, key=lambda post: (post.lift or 0.0, post.published_at))
    scored = [post for post in live if max(post.scores.values()) > 0]
    return max(scored, key=lambda p: (_latest(p), p.published_at), default=None)


def _latest(post: PostResult) -> int:
    return post.scores[max(post.scores, key=offset_order)]
