"""`galley status` without the ORM: the few columns it reads, as SQLAlchemy Core tables.

Importing `core.models` (SQLModel, SQLAlchemy's ORM, building the models) costs a
`galley status` most of its start-up (bench/cli_startup.py). The status read needs four
tables' worth of columns and no objects, so it reads them through these Core tables,
which describe only those columns. They are not a second schema: tests/store/
test_status_read.py compares each column here to the model's (name, type, nullability,
primary key), so a change to the models that this read would miss fails there.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa

from core.api.status_views import RecipeStatus, Status, describe_poll, describe_reissue, item_label
from core.identity import item_token_of_run
from core.policies import Trigger
from core.publishing.known_expiry import known_expiries
from core.setup.config import Config
from core.slots.schedule import next_slots
from core.states import RunState
from core.store.conditions import unfinished_batch_entry_of, waiting_for_review

_metadata = sa.MetaData()  # never created: the models' metadata and migrations own the schema
_STATE = sa.String(32)

recipes = sa.Table(
    "recipes",
    _metadata,
    sa.Column("name", sa.String(64), primary_key=True),
    sa.Column("version", sa.Integer, nullable=False),
    sa.Column("paused", sa.Boolean, nullable=False),
    sa.Column("paused_reason", sa.String, nullable=True),
)
runs = sa.Table(
    "runs",
    _metadata,
    sa.Column("id", sa.String(200), primary_key=True),
    sa.Column("state", _STATE, nullable=False),
    sa.Column("slot_at", sa.DateTime(timezone=True), nullable=False),
)
drafts = sa.Table(
    "drafts",
    _metadata,
    sa.Column("key", sa.String(300), primary_key=True),
    sa.Column("recipe", sa.String(64), nullable=False),
    sa.Column("state", _STATE, nullable=False),
)
attempts = sa.Table(
    "attempts",
    _metadata,
    sa.Column("id", sa.String(210), primary_key=True),
    sa.Column("recipe", sa.String(64), nullable=False),
    sa.Column("mode", sa.String(16), nullable=False),
    sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
)
item_polls = sa.Table(  # docs/design.md §29: an items recipe's latest poll
    "item_polls",
    _metadata,
    sa.Column("recipe", sa.String(64), primary_key=True),
    sa.Column("polled_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("outcome", _STATE, nullable=False),
    sa.Column("detail", sa.Text, nullable=True),
    sa.Column("reissued_at", sa.DateTime(timezone=True), nullable=True),
    sa.Column("reissued", sa.Text, nullable=True),
)
polled_items = sa.Table(  # an item run's title and link (ix_polled_items_run)
    "polled_items",
    _metadata,
    sa.Column("recipe", sa.String(64), primary_key=True),
    sa.Column("source", sa.String(64), primary_key=True),
    sa.Column("item_id", sa.String(500), primary_key=True),
    sa.Column("run_id", sa.String(200), nullable=False),
    sa.Column("same_as", sa.String(500), nullable=True),
    sa.Column("title", sa.Text, nullable=False),
    sa.Column("link", sa.Text, nullable=True),
)
TABLES = (recipes, runs, drafts, attempts, item_polls, polled_items)


def read_status(connection: sa.Connection, config: Config, now: datetime) -> Status:
    """Each recipe's version, pause flag, review queue and next slot, and the uncertain
    runs: what `galley status`, `/galley status`, Home and the notebook show. Indexed
    counts only; no write lock."""
    rows = {r.name: r for r in connection.execute(sa.select(recipes))}
    pending = _counts(connection, drafts, waiting_for_review(drafts.c.state))
    waiting = unfinished_batch_entry_of(attempts.c.mode, attempts.c.finished_at)
    in_batch = _counts(connection, attempts, waiting)  # through ix_attempts_waiting
    polls = {r.recipe: r for r in connection.execute(sa.select(item_polls))}  # one per recipe
    statuses = []
    for recipe in config.recipes.values():
        poll = polls.get(recipe.name) if recipe.trigger == Trigger.ITEMS else None
        row = rows.get(recipe.name)
        upcoming = next_slots(recipe, now, 1)
        statuses.append(
            RecipeStatus(
                name=recipe.name,
                version=row.version if row else 1,
                paused=bool(row.paused) if row else False,
                pending=pending.get(recipe.name, 0),
                pending_limit=recipe.pending_limit,
                next_slot=upcoming[0].fire_at.astimezone(recipe.zone).isoformat()
                if upcoming
                else None,
                paused_reason=row.paused_reason if row else None,
                in_batch=in_batch.get(recipe.name, 0),
                last_poll=_last_poll(poll) if poll else None,
            )
        )
    uncertain = list(
        connection.execute(
            sa.select(runs.c.id).where(runs.c.state == RunState.UNCERTAIN).order_by(runs.c.slot_at)
        ).scalars()
    )
    # each token's known expiry date (docs/design.md §36)
    expiries = [e.text(now.date()) for e in known_expiries(config)]
    items = _item_labels(connection, uncertain)
    return Status(recipes=statuses, uncertain=uncertain, items=items, expiries=expiries)


def _last_poll(poll: sa.Row[Any]) -> str:
    said = describe_poll(poll.outcome, _utc(poll.polled_at), poll.detail)
    if poll.reissued_at is None:
        return said
    return f"{said}; {describe_reissue(_utc(poll.reissued_at), poll.reissued or '')}"


def _item_labels(connection: sa.Connection, run_ids: list[str]) -> dict[str, str]:
    """Item runs among `run_ids` as people know them: title and link (docs/design.md §29)."""
    wanted = [run for run in run_ids if item_token_of_run(run) is not None]
    if not wanted:
        return {}
    query = sa.select(polled_items.c.run_id, polled_items.c.title, polled_items.c.link).where(
        polled_items.c.run_id.in_(wanted), polled_items.c.same_as.is_(None)
    )
    return {run: item_label(title, link) for run, title, link in connection.execute(query)}


def _utc(at: datetime) -> datetime:
    """SQLite hands back naive UTC (the models' UTCDateTime does this for the ORM)."""
    return at.replace(tzinfo=UTC) if at.tzinfo is None else at.astimezone(UTC)


def _counts(
    connection: sa.Connection, table: sa.Table, where: sa.ColumnElement[bool]
) -> dict[str, int]:
    """Rows matching `where` per recipe; a recipe with none is absent."""
    query = sa.select(table.c.recipe, sa.func.count()).where(where).group_by(table.c.recipe)
    return {recipe: int(count) for recipe, count in connection.execute(query)}
