"""Each published post's score at every reading and its lift (docs/design.md §38): the
score at its latest reading over the median score, at that same reading, of its target's
previous BASELINE_POSTS read posts. Read by `learn_from` (core/drafting/learning.py),
which ranks examples by lift, and by the report a stage above (core/api/report_results.py).

Posts are read by ix_post_checks_published, each target's baseline in one statement
(ix_post_checks_target_published), readings by key: the cost is the window's posts and
twice BASELINE_POSTS more per target, never the history.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from typing import Any, NamedTuple

import sqlalchemy as sa
from sqlmodel import Session, col

from core.drafting.scoring import BASELINE_POSTS, lift, score_of_reading
from core.identity import platform_of_target
from core.models import PostCheckRow, PostReadingRow, UTCDateTime
from core.policies import PostCheck

NO_ENGAGEMENT_PLATFORMS = ("webhook", "slack")  # nothing to read back: no counts exist


@dataclass(frozen=True)
class LiftedPost:
    """One published post of the window: its score at each reading, and its lift."""

    recipe: str
    target: str
    receipt: str
    published_at: datetime
    state: str  # a PostCheck
    url: str | None
    scores: dict[str, int]  # reading label (`1h`, `1d`, `7d`) -> score at that reading
    lift: float | None  # at its latest reading, against its target's previous posts
    lift_reading: str | None  # the reading the lift compares

    @property
    def has_engagement(self) -> bool:
        unreadable = self.state in (PostCheck.UNREADABLE, PostCheck.MARKED)
        return not unreadable and platform_of_target(self.target) not in NO_ENGAGEMENT_PLATFORMS


@cache  # a handful of labels, asked for every post
def offset_order(label: str) -> float:
    units = {"m": 60, "h": 3600, "d": 86400, "w": 604800}
    number = label[:-1]
    return float(number) * units.get(label[-1], 1) if number.isdigit() else float("inf")


def read_lifted(
    session: Session, since: datetime, until: datetime, targets: Sequence[str] | None = None
) -> list[LiftedPost]:
    """The posts published in (since, until] (to `targets`, or any), oldest first, each
    with every reading and its lift against the BASELINE_POSTS read posts of its target
    before it (of any recipe)."""
    published = col(PostCheckRow.published_at)
    connection = session.connection()  # Core rows: the ORM layer costs more than the reads
    window = [published > since, published <= until]
    if targets is not None:
        window.append(col(PostCheckRow.target).in_(list(targets)))
    posts = list(connection.execute(_post_columns().where(*window).order_by(published)).all())
    readings = _window_readings(connection, window)
    earlier = _earlier_posts(connection, sorted({post.target for post in posts}), since, readings)
    found = []
    history: dict[str, list[dict[str, int]]] = {
        target: [readings[p.receipt] for p in rows if _counts(p, readings)]
        for target, rows in earlier.items()
    }
    for post in posts:
        scores = readings.get(post.receipt, {})
        label = max(scores, key=offset_order) if scores else None
        previous = history[post.target]
        raised = None
        if label is not None and post.state != PostCheck.GONE:
            baseline = [s[label] for s in previous[-BASELINE_POSTS:] if label in s]
            raised = lift(scores[label], baseline)
        found.append(_result(post, scores, raised, label if raised is not None else None))
        if _counts(post, readings):
            previous.append(scores)
    return found


def _counts(post: Any, readings: dict[str, dict[str, int]]) -> bool:
    """Whether a post is part of its target's baseline: read, and not found gone."""
    return post.receipt in readings and post.state != PostCheck.GONE


def _result(
    post: Any, scores: dict[str, int], raised: float | None, label: str | None
) -> LiftedPost:
    return LiftedPost(
        recipe=post.recipe,
        target=post.target,
        receipt=post.receipt,
        published_at=post.published_at,
        state=post.state,
        url=post.url,
        scores=scores,
        lift=raised,
        lift_reading=label,
    )


def _post_columns() -> Any:
    return sa.select(
        col(PostCheckRow.receipt),
        col(PostCheckRow.recipe),
        col(PostCheckRow.target),
        col(PostCheckRow.published_at),
        col(PostCheckRow.state),
        col(PostCheckRow.url),
    )


class _Earlier(NamedTuple):
    """A post of a target before the window: what its baseline needs of it."""

    receipt: str
    state: str


def _earlier_posts(
    connection: sa.Connection,
    targets: list[str],
    since: datetime,
    readings: dict[str, dict[str, int]],
) -> dict[str, list[_Earlier]]:
    """Each target's posts before the window, oldest first: enough to find BASELINE_POSTS
    read ones among them (twice as many, as some were never read). Their readings are
    added to `readings`. One statement, one index range per target
    (ix_post_checks_target_published), each post's readings by key."""
    found: dict[str, list[_Earlier]] = {target: [] for target in targets}
    if not targets:
        return found
    values = {f"target_{n}": target for n, target in enumerate(targets)}
    statement = _baselines(len(targets), connection.dialect.name)
    last = None
    rows = connection.execute(statement, {**values, "since": since}).all()  # fetched at once
    for receipt, target, state, label, points in rows:
        if receipt != last:
            found[target].append(_Earlier(receipt, state))
            last = receipt
        if label is not None:
            readings.setdefault(receipt, {})[label] = points
    return found


@cache
def _baselines(targets: int, dialect: str) -> sa.Select[Any]:
    """The statement of `_earlier_posts` for this many targets, built once: building a
    union of 20 subqueries costs more than running it. Each post's readings are joined to
    it by key (on PostgreSQL by a lateral subquery, which it cannot turn into a hash join
    over every reading)."""
    published = col(PostCheckRow.published_at)
    since = sa.bindparam("since", type_=UTCDateTime())
    each = [
        sa.select(
            col(PostCheckRow.receipt), col(PostCheckRow.target), col(PostCheckRow.state), published
        )
        .where(col(PostCheckRow.target) == sa.bindparam(f"target_{n}"), published <= since)
        .order_by(published.desc())
        .limit(2 * BASELINE_POSTS)
        .subquery()
        for n in range(targets)
    ]
    union = sa.union_all(*(sa.select(*part.c) for part in each)).subquery()
    head = sa.select(union.c.receipt, union.c.target, union.c.state)
    return _with_readings(head, union, union.c.receipt, dialect).order_by(
        union.c.published_at, union.c.receipt
    )


def _with_readings(head: sa.Select[Any], left: Any, receipt: Any, dialect: str) -> sa.Select[Any]:
    """`head` with each of its post's readings (label, score) joined by key: on PostgreSQL by
    a lateral subquery, which it cannot turn into a hash join over every reading."""
    if dialect == "postgresql":
        by_key = _reading_columns().where(col(PostReadingRow.receipt) == receipt)
        read = by_key.offset(0).lateral()  # OFFSET 0: kept a subquery, never flattened
        return head.add_columns(read.c.label, read.c.score).outerjoin(read, sa.true())
    reading = sa.select(col(PostReadingRow.label), score_of_reading())
    columns = head.add_columns(*reading.selected_columns)
    return columns.select_from(left).outerjoin(
        PostReadingRow, col(PostReadingRow.receipt) == receipt
    )


def _reading_columns() -> Any:
    """Each reading's receipt, label and score, the score counted by the database."""
    return sa.select(col(PostReadingRow.receipt), col(PostReadingRow.label), score_of_reading())


def _window_readings(
    connection: sa.Connection, window: list[sa.ColumnElement[bool]]
) -> dict[str, dict[str, int]]:
    """The readings of the window's posts, joined to them (their index, then each post's
    readings by key)."""
    receipt = col(PostCheckRow.receipt)
    head = sa.select(receipt).where(*window)
    joined = _with_readings(head, PostCheckRow, receipt, connection.dialect.name)
    found: dict[str, dict[str, int]] = {}
    for key, label, points in connection.execute(joined).all():
        if label is not None:
            found.setdefault(key, {})[label] = points
    return found


def one_of(connection: sa.Connection, column: Any, keys: list[str]) -> Any:
    """`column IN keys`: on PostgreSQL `= ANY(array)`, one parameter however many keys
    (a thousand bound one by one cost 100 ms to send), still an index condition."""
    if connection.dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import ARRAY

        return column == sa.any_(sa.literal(keys, type_=ARRAY(sa.String)))
    return column.in_(keys)
