"""A person's own post (docs/design.md §37): a run `recipe@post:<id>` whose draft is the
person's text, ready for the same review as a model's draft, with no model call.

`write_posts` adds many at once (a plan imported) in one transaction: the recipes' rows
locked in name order, the runs already there read (the same id, or the same content when
it has none: nothing added), the rest written by Core `executemany`, 500 a batch, each
draft `ready` at revision 1 and its run `awaiting_review`. Its event rows name the person
who wrote it; the draft's is a decision (`post`) in the decision log.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlmodel import Session, col, select

from core.errors import GalleyError
from core.identity import ASAP_WALL, draft_key, text_hash, wall_text
from core.models import DraftRow, RecipeRow, RunRow
from core.policies import DecisionKind
from core.setup.config import Config
from core.states import DraftState, EventSubject, RunState
from core.store.engine import Store
from core.store.transitions import Decided, record_event

WRITE_BATCH = 500  # rows per INSERT: within SQLite's bound parameters on any build


class PostRefused(GalleyError):
    """A person's post that cannot be added as written: the reasons, one per line."""


@dataclass(frozen=True)
class PlannedPost:
    """One post, checked and ready to add: its run id, its recipe, its stored body text
    (`PostBody.to_text`), and its time (None: published once approved)."""

    run_id: str
    recipe: str
    text: str
    at: datetime | None = None  # aware


@dataclass(frozen=True)
class Written:
    """What `write_posts` came to: the runs it added, and those that were there already."""

    added: tuple[str, ...] = field(default=())
    already: tuple[str, ...] = field(default=())
    drafts: tuple[str, ...] = field(default=())  # the draft keys of the runs added

    def describe(self) -> str:
        return f"{len(self.added)} added, {len(self.already)} already there"

    def to_json(self) -> dict[str, Any]:
        return {"added": list(self.added), "already": list(self.already)}


def write_posts(
    store: Store, config: Config, posts: Sequence[PlannedPost], *, actor: str, now: datetime
) -> Written:
    """Add every post not already there, in one transaction (the caller checked them all
    first: a plan is added whole or not at all)."""
    if not posts:
        return Written()
    with store.transaction() as session:
        versions = _recipe_versions(session, sorted({p.recipe for p in posts}), now)
        added: list[tuple[str, str]] = []
        for start in range(0, len(posts), WRITE_BATCH):
            batch = posts[start : start + WRITE_BATCH]
            added += _write_batch(session, config, batch, versions, actor, now)
    taken = {run for run, _ in added}
    already = tuple(p.run_id for p in posts if p.run_id not in taken)
    return Written(tuple(run for run, _ in added), already, tuple(key for _, key in added))


def _recipe_versions(session: Session, names: Sequence[str], now: datetime) -> dict[str, int]:
    """Each recipe's row (created on first sight) and its version: a post's draft is of
    the version current when it was written."""
    rows = [{"name": n, "version": 1, "paused": False, "updated_at": now} for n in names]
    session.execute(_insert(session, RecipeRow).values(rows).on_conflict_do_nothing())
    found = session.exec(  # locked in name order: two imports of one recipe take turns
        select(RecipeRow.name, RecipeRow.version)
        .where(col(RecipeRow.name).in_(names))
        .order_by(col(RecipeRow.name))
        .with_for_update()
    ).all()
    return {str(name): int(version) for name, version in found}


def _write_batch(
    session: Session,
    config: Config,
    batch: Sequence[PlannedPost],
    versions: Mapping[str, int],
    actor: str,
    now: datetime,
) -> list[tuple[str, str]]:
    """The batch's runs not there yet, each with its draft: (run id, draft key)."""
    there = set(
        session.exec(select(RunRow.id).where(col(RunRow.id).in_([p.run_id for p in batch])))
    )  # read under the recipes' locks: no other writer of their posts runs meanwhile
    new = [post for post in batch if post.run_id not in there]
    if not new:
        return []
    runs = [_run_values(config, post, versions[post.recipe], actor, now) for post in new]
    drafts = [_draft_values(config, post, versions[post.recipe], now) for post in new]
    connection = session.connection()  # Core executemany: one statement, compiled once
    connection.execute(sa.insert(_table(RunRow)), runs)
    connection.execute(sa.insert(_table(DraftRow)), drafts)
    for post, draft in zip(new, drafts, strict=True):
        _record(session, post, draft["key"], actor, now)
    return [(post.run_id, draft["key"]) for post, draft in zip(new, drafts, strict=True)]


def _run_values(
    config: Config, post: PlannedPost, version: int, actor: str, now: datetime
) -> dict[str, Any]:
    recipe = config.recipe(post.recipe)
    platform = recipe.platform
    if post.at is None:
        wall, slot_at = ASAP_WALL, now
    else:
        wall, slot_at = wall_text(_local_wall(post.at, recipe.zone)), post.at
    return {
        "id": post.run_id,
        "recipe": post.recipe,
        "slot_wall": wall,
        "slot_at": slot_at,
        "state": RunState.AWAITING_REVIEW,
        "version": version,
        "draft_key": draft_key(platform, post.run_id, version),
        "manual": True,  # a person's
        "created_at": now,
        "updated_at": now,
    }


def _draft_values(config: Config, post: PlannedPost, version: int, now: datetime) -> dict[str, Any]:
    recipe = config.recipe(post.recipe)
    return {
        "key": draft_key(recipe.platform, post.run_id, version),
        "run_id": post.run_id,
        "recipe": post.recipe,
        "platform": recipe.platform,
        "version": version,
        "state": DraftState.READY,
        "text": post.text,
        "revision": 1,
        "text_hash": text_hash(post.text),
        "ready_at": ready_at(post.at, recipe.review_window, now),
        "attempts_before": 0,
        "input_tokens": 0,
        "output_tokens": 0,
        "created_at": now,
        "updated_at": now,
    }


def ready_at(at: datetime | None, review_window: timedelta, now: datetime) -> datetime:
    """When a post's review window opens: now, or later for a post planned further ahead
    than the window, so its window closes no earlier than its time (docs/design.md §37)."""
    return now if at is None else max(now, at - review_window)


def _record(session: Session, post: PlannedPost, key: str, actor: str, now: datetime) -> None:
    """The two history lines: the run opened for review, and the draft written by its
    person (the decision log's `post`)."""
    when = "once approved" if post.at is None else f"at {post.at.isoformat()}"
    record_event(
        session,
        subject=EventSubject.RUN,
        subject_id=post.run_id,
        run_id=post.run_id,
        to_state=RunState.AWAITING_REVIEW,
        actor=actor,
        at=now,
        reason=f"a post written by {actor}, to publish {when}",
    )
    record_event(
        session,
        subject=EventSubject.DRAFT,
        subject_id=key,
        run_id=post.run_id,
        to_state=DraftState.READY,
        actor=actor,
        at=now,
        reason=f"written by {actor}",
        decision=Decided(DecisionKind.POST, 1),
    )


def _local_wall(at: datetime, zone: Any) -> datetime:
    return at.astimezone(zone).replace(tzinfo=None, second=0, microsecond=0)


def _table(model: Any) -> sa.Table:
    table: sa.Table = model.__table__
    return table


def _insert(session: Session, table: Any) -> Any:
    """The dialect's INSERT, which has ON CONFLICT DO NOTHING (as `insert_ignore`)."""
    if session.get_bind().dialect.name == "postgresql":
        return postgresql.insert(table)
    return sqlite.insert(table)
